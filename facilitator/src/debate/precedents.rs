//! Precedents: similar past debates and how they ended, loaded when a
//! debate opens (seed 001, pre-debate memory: "load precedents relative to
//! the snapshot"). Only debates resolved before the new debate's snapshot
//! was cut count, so a precedent never leaks what happened afterwards.
//!
//! Similarity is a weighted match over what the seed's memory would match
//! on: the disputed metric (0.4), the same two agents in either role (0.3),
//! the sector (0.2) and the item (0.1). A past debate is a precedent at
//! [`MIN_SIMILARITY`] or more; the closest [`MAX_PRECEDENTS`] are kept,
//! most similar first, then most recent.
//!
//! The facilitator matches against a [`PrecedentIndex`] of compact entries
//! it keeps in step with the debates bucket through its KV watch, so
//! opening a debate costs no store reads however many debates exist.

use chrono::{DateTime, Utc};

use super::Debate;

/// Weight of the same disputed metric.
pub const W_METRIC: f64 = 0.4;
/// Weight of the same pair of agents.
pub const W_AGENTS: f64 = 0.3;
/// Weight of the same sector.
pub const W_SECTOR: f64 = 0.2;
/// Weight of the same item.
pub const W_ITEM: f64 = 0.1;
/// Least similarity for a precedent.
pub const MIN_SIMILARITY: f64 = 0.5;
/// Precedents kept per debate.
pub const MAX_PRECEDENTS: usize = 5;

pub use caucus_shared::api::facilitator::Precedent;

fn metric(d: &Debate) -> Option<String> {
    d.metric()
}

fn agents(d: &Debate) -> [String; 2] {
    let mut v = [
        d.challenge.challenger.clone(),
        d.challenge.challenged.clone(),
    ];
    v.sort();
    v
}

fn eq_some(a: &Option<String>, b: &Option<String>) -> bool {
    matches!((a, b), (Some(x), Some(y)) if x.eq_ignore_ascii_case(y))
}

/// What precedent matching needs of a resolved debate (a few hundred bytes,
/// so the index holds many).
#[derive(Debug, Clone, PartialEq)]
pub struct Past {
    debate_id: String,
    topic: String,
    metric: Option<String>,
    agents: [String; 2],
    sector: Option<String>,
    item: Option<String>,
    outcome: String,
    winner: Option<String>,
    level: u8,
    method: String,
    overridden: bool,
    resolved_at: DateTime<Utc>,
}

impl Past {
    /// The entry of a finally resolved debate; `None` for any other.
    pub fn of(d: &Debate) -> Option<Past> {
        let r = d.resolution.as_ref().filter(|r| !r.provisional)?;
        Some(Past {
            debate_id: d.debate_id.clone(),
            topic: d.challenge.disputed_finding.clone(),
            metric: metric(d),
            agents: agents(d),
            sector: d.extensions.context.sector.clone(),
            item: d.challenge.item.clone(),
            outcome: r
                .final_position
                .as_ref()
                .map(|x| x.statement.clone())
                .unwrap_or_else(|| "no position applied".to_string()),
            winner: r.winner.clone(),
            level: r.level,
            method: serde_json::to_value(r.method)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            overridden: !d.superseded.is_empty(),
            resolved_at: r.resolved_at,
        })
    }
}

/// Resolved debates this process has seen (the facilitator feeds it from
/// its watch of the debates bucket), so opening a debate never scans the
/// bucket. Bounded: past [`MAX_INDEXED`] the oldest resolutions go first.
#[derive(Debug, Default)]
pub struct PrecedentIndex {
    inner: std::sync::RwLock<std::collections::HashMap<String, Past>>,
}

/// Resolved debates kept in a [`PrecedentIndex`].
pub const MAX_INDEXED: usize = 100_000;

impl PrecedentIndex {
    /// Records (or forgets) `d` as its stored version says.
    pub fn observe(&self, d: &Debate) {
        let mut m = self.inner.write().expect("precedent index");
        match Past::of(d) {
            Some(p) => {
                m.insert(d.debate_id.clone(), p);
                if m.len() > MAX_INDEXED {
                    if let Some(oldest) = m
                        .values()
                        .min_by_key(|p| p.resolved_at)
                        .map(|p| p.debate_id.clone())
                    {
                        m.remove(&oldest);
                    }
                }
            }
            None => {
                m.remove(&d.debate_id);
            }
        }
    }

    /// Forgets a deleted debate.
    pub fn remove(&self, debate_id: &str) {
        self.inner
            .write()
            .expect("precedent index")
            .remove(debate_id);
    }

    /// Precedents of `new` among the indexed debates.
    pub fn find(&self, new: &Debate) -> Vec<Precedent> {
        find_in(new, self.inner.read().expect("precedent index").values())
    }

    /// Debates indexed.
    pub fn len(&self) -> usize {
        self.inner.read().expect("precedent index").len()
    }

    /// Whether none is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Precedents of `new` among `past` debates (see the module docs).
pub fn find(new: &Debate, past: &[Debate]) -> Vec<Precedent> {
    let entries: Vec<Past> = past.iter().filter_map(Past::of).collect();
    find_in(new, entries.iter())
}

/// Precedents of `new` among indexed entries.
pub fn find_in<'a>(new: &Debate, past: impl Iterator<Item = &'a Past>) -> Vec<Precedent> {
    let cut = new.snapshot.taken_at;
    let m = metric(new);
    let pair = agents(new);
    let mut out: Vec<Precedent> = past
        .filter(|p| p.debate_id != new.debate_id && p.resolved_at <= cut)
        .filter_map(|p| {
            let mut score = 0.0;
            let mut matched = Vec::new();
            if m.is_some() && p.metric == m {
                score += W_METRIC;
                matched.push("metric".to_string());
            }
            if p.agents == pair {
                score += W_AGENTS;
                matched.push("agents".to_string());
            }
            if eq_some(&new.extensions.context.sector, &p.sector) {
                score += W_SECTOR;
                matched.push("sector".to_string());
            }
            if eq_some(&new.challenge.item, &p.item) {
                score += W_ITEM;
                matched.push("item".to_string());
            }
            if score + 1e-9 < MIN_SIMILARITY {
                return None;
            }
            Some(Precedent {
                debate_id: p.debate_id.clone(),
                topic: p.topic.clone(),
                similarity: (score * 100.0).round() / 100.0,
                matched,
                outcome: p.outcome.clone(),
                winner: p.winner.clone(),
                level: p.level,
                method: p.method.clone(),
                overridden: p.overridden,
                resolved_at: p.resolved_at,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.similarity
            .total_cmp(&a.similarity)
            .then(b.resolved_at.cmp(&a.resolved_at))
    });
    out.truncate(MAX_PRECEDENTS);
    out
}
