//! Debate outcomes feed the agents' track records (seed 000: "outcomes of
//! resolved debates and human overrides feed the track records").
//!
//! Which resolutions count: those where agents agreed or a person decided —
//! level 1 (agent direct), level 3 (expert) and level 5 (gate confirm or
//! override). Level 2 is left out on purpose: it is the facilitator's own
//! judgment from the track records, and feeding it back would let the
//! credibility engine confirm itself. Provisional defaults (level 4) and
//! re-debates decide nothing about who was right. Debates over synthetic
//! data (`challenge.synthetic`, e.g. the built-in analysts on the bundled
//! data set) feed nothing either: their outcomes describe the data set.
//!
//! Each side with a position gets one record: outcome 1 when the position
//! that stood is its own (same statement, or same metric and value, or it is
//! the winner), 0 when it is the other side's. When a person applied a
//! position of their own, the side whose numeric value was closer gets 1
//! and the other 0 (0.5 each when equally close or not comparable). At a
//! gate override, the side whose position had been applied provisionally
//! is marked `overridden` (it feeds the override penalty).

use chrono::{DateTime, Utc};

use caucus_shared::messages::{Position, ResolutionMethod};

use super::{Debate, ResolutionRecord};
use crate::credibility::TrackRecord;
use crate::side::Side;

fn same(a: &Position, b: &Position) -> bool {
    if a.statement.trim() == b.statement.trim() {
        return true;
    }
    match (a.number(), b.number()) {
        (Some(x), Some(y)) => a.metric == b.metric && (x - y).abs() < 1e-9,
        _ => false,
    }
}

/// Whether a resolution of this method says who was right.
pub fn counts(method: ResolutionMethod) -> bool {
    matches!(
        method,
        ResolutionMethod::AgentDirect
            | ResolutionMethod::Human
            | ResolutionMethod::GateConfirm
            | ResolutionMethod::GateOverride
    )
}

/// Track records `r` gives the debate's two agents (see the module docs).
pub fn track_records(d: &Debate, r: &ResolutionRecord, default_regime: &str) -> Vec<TrackRecord> {
    if !counts(r.method) || r.provisional || d.challenge.synthetic {
        return Vec::new();
    }
    let Some(fin) = r.final_position.as_ref() else {
        return Vec::new();
    };
    let q = d.credibility_query(default_regime);
    let sides = [
        (Side::Challenger, d.challenger_position.as_ref()),
        (Side::Challenged, d.challenged_position.as_ref()),
    ];
    let stood: Vec<bool> = sides
        .iter()
        .map(|(side, p)| p.is_some_and(|p| same(p, fin)) || r.winning_side == Some(*side))
        .collect();
    let outcomes: [f64; 2] = if stood[0] || stood[1] {
        [f64::from(u8::from(stood[0])), f64::from(u8::from(stood[1]))]
    } else {
        // A position of the person's own: closer is more right.
        let dist = |p: Option<&Position>| {
            let v = fin.number()?;
            Some((p?.number()? - v).abs())
        };
        match (dist(sides[0].1), dist(sides[1].1)) {
            (Some(a), Some(b)) if (a - b).abs() > 1e-12 => {
                if a < b {
                    [1.0, 0.0]
                } else {
                    [0.0, 1.0]
                }
            }
            _ => [0.5, 0.5],
        }
    };
    // At an override, whoever's position the provisional decision applied
    // was overridden by a person.
    let overridden_side = (r.method == ResolutionMethod::GateOverride)
        .then(|| d.superseded.last())
        .flatten()
        .and_then(|prior| prior.final_position.as_ref())
        .and_then(|applied| {
            sides
                .iter()
                .find(|(_, p)| p.is_some_and(|p| same(p, applied)))
                .map(|(s, _)| *s)
        });
    let at: DateTime<Utc> = r.resolved_at;
    sides
        .iter()
        .zip(outcomes)
        .filter(|((_, p), _)| p.is_some())
        .map(|((side, _), outcome)| TrackRecord {
            agent: d.agent(*side).to_string(),
            outcome,
            at,
            context: q.context.clone(),
            regime: q.regime.clone(),
            overridden: overridden_side == Some(*side),
        })
        .collect()
}
