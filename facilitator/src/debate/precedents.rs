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

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

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

/// A similar past debate and its outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Precedent {
    /// The past debate.
    pub debate_id: String,
    /// What it disputed.
    pub topic: String,
    /// 0..=1, see the module docs.
    pub similarity: f64,
    /// What matched: `metric`, `agents`, `sector`, `item`.
    pub matched: Vec<String>,
    /// The position that stood, in words.
    pub outcome: String,
    /// The agent whose position stood, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner: Option<String>,
    /// Level it was resolved at.
    pub level: u8,
    /// How (`facilitator-resolved`, `human_decision`, `gate_override`, …).
    pub method: String,
    /// Whether a person later overrode its earlier resolution.
    pub overridden: bool,
    /// When it was resolved.
    pub resolved_at: DateTime<Utc>,
}

fn metric(d: &Debate) -> Option<String> {
    d.extensions
        .context
        .metric
        .clone()
        .or_else(|| {
            d.challenged_position
                .as_ref()
                .and_then(|p| p.metric.clone())
        })
        .or_else(|| {
            d.challenger_position
                .as_ref()
                .and_then(|p| p.metric.clone())
        })
        .map(|m| m.to_ascii_lowercase())
}

fn same_agents(a: &Debate, b: &Debate) -> bool {
    let pair = |d: &Debate| {
        let mut v = [
            d.challenge.challenger.clone(),
            d.challenge.challenged.clone(),
        ];
        v.sort();
        v
    };
    pair(a) == pair(b)
}

fn eq_some(a: &Option<String>, b: &Option<String>) -> bool {
    matches!((a, b), (Some(x), Some(y)) if x.eq_ignore_ascii_case(y))
}

/// Precedents of `new` among `past` (see the module docs).
pub fn find(new: &Debate, past: &[Debate]) -> Vec<Precedent> {
    let cut = new.snapshot.taken_at;
    let m = metric(new);
    let mut out: Vec<Precedent> = past
        .iter()
        .filter(|p| p.debate_id != new.debate_id)
        .filter_map(|p| {
            let r = p.resolution.as_ref().filter(|r| !r.provisional)?;
            if r.resolved_at > cut {
                return None;
            }
            let mut score = 0.0;
            let mut matched = Vec::new();
            if m.is_some() && metric(p) == m {
                score += W_METRIC;
                matched.push("metric".to_string());
            }
            if same_agents(new, p) {
                score += W_AGENTS;
                matched.push("agents".to_string());
            }
            if eq_some(&new.extensions.context.sector, &p.extensions.context.sector) {
                score += W_SECTOR;
                matched.push("sector".to_string());
            }
            if eq_some(&new.challenge.item, &p.challenge.item) {
                score += W_ITEM;
                matched.push("item".to_string());
            }
            if score + 1e-9 < MIN_SIMILARITY {
                return None;
            }
            Some(Precedent {
                debate_id: p.debate_id.clone(),
                topic: p.challenge.disputed_finding.clone(),
                similarity: (score * 100.0).round() / 100.0,
                matched,
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
                overridden: !p.superseded.is_empty(),
                resolved_at: r.resolved_at,
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
