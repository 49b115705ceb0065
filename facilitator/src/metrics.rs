//! The facilitator's metrics (docs/OBSERVABILITY.md lists them all).
//! Instruments are made once, from the process's meter; recording into
//! them is a no-op when metrics are off.
//!
//! - `caucus_debates_total{level,outcome}` (counter): one count each time a
//!   debate leaves a level or settles at one, by the instance whose write
//!   won (so a transition is counted once however many instances run).
//!   `level` is the level left or settled at, `"1"`..=`"5"`. `outcome`:
//!   - `resolved`: settled by the agents (level 1) or by the credibility
//!     differential (level 2);
//!   - `decided`: a person decided (level 3);
//!   - `provisional`: the conservative default was applied until the next
//!     gate (level 4);
//!   - `deferred`: queues full, deferred to the next gate;
//!   - `confirmed` / `overridden` / `redebated`: the gate review (level 5);
//!   - `escalated`: the level could not settle it (rejected evidence, a
//!     credibility gap too small, an unavailable expert, …);
//!   - `timed_out`: the level's deadline passed (ack, evidence, verdict,
//!     mediation, human decision), which escalates it.
//! - `caucus_debates_open` (gauge): debates still arguing (levels 1–3), as
//!   the debates bucket shows them; every instance reports the same figure
//!   (graph it with `max`, not `sum`).
//! - `caucus_expert_queue{expert}` (gauge): debates holding a slot in each
//!   expert's Redis queue, refreshed every [`EXPERT_QUEUE_REFRESH`].

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use caucus_shared::messages::ResolutionMethod;
use caucus_shared::telemetry::metrics::meter;
use opentelemetry::metrics::{Counter, Gauge};
use opentelemetry::KeyValue;

use crate::debate::{Debate, Effect};

/// How often the expert queue gauges are read from Redis.
pub const EXPERT_QUEUE_REFRESH: Duration = Duration::from_secs(5);

struct Instruments {
    debates: Counter<u64>,
    open: Gauge<u64>,
    expert_queue: Gauge<u64>,
}

fn instruments() -> &'static Instruments {
    static I: OnceLock<Instruments> = OnceLock::new();
    I.get_or_init(|| {
        let m = meter();
        Instruments {
            debates: m
                .u64_counter("caucus_debates")
                .with_description("Debates leaving or settling at a level, by level and outcome")
                .build(),
            open: m
                .u64_gauge("caucus_debates_open")
                .with_description("Debates still arguing (levels 1-3)")
                .build(),
            expert_queue: m
                .u64_gauge("caucus_expert_queue")
                .with_description("Debates holding a slot in each expert's queue")
                .build(),
        }
    })
}

/// The `outcome` label of a resolution by `method`.
pub fn resolution_outcome(method: ResolutionMethod) -> &'static str {
    match method {
        ResolutionMethod::AgentDirect | ResolutionMethod::Credibility => "resolved",
        ResolutionMethod::Human => "decided",
        ResolutionMethod::ConservativeDefault => "provisional",
        ResolutionMethod::DeferredToGate => "deferred",
        ResolutionMethod::GateConfirm => "confirmed",
        ResolutionMethod::GateOverride => "overridden",
        ResolutionMethod::GateRedebate => "redebated",
    }
}

/// The `outcome` label of an escalation for `reason` (the state machine
/// names every deadline-driven escalation `<what>_timeout`).
pub fn escalation_outcome(reason: &str) -> &'static str {
    if reason.ends_with("_timeout") {
        "timed_out"
    } else {
        "escalated"
    }
}

/// `(level, outcome)` of each effect that ends or settles a level.
pub fn level_ends(effects: &[Effect]) -> Vec<(u8, &'static str)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Escalated(esc) => Some((esc.from_level, escalation_outcome(&esc.reason))),
            Effect::Resolved(rec) => Some((rec.level, resolution_outcome(rec.method))),
            Effect::ReleaseExpert { .. } | Effect::Redebate(_) => None,
        })
        .collect()
}

/// Counts the level ends among `effects` (call once per stored transition).
pub(crate) fn debate_effects(effects: &[Effect]) {
    let i = instruments();
    for (level, outcome) in level_ends(effects) {
        i.debates.add(
            1,
            &[
                KeyValue::new("level", level.to_string()),
                KeyValue::new("outcome", outcome),
            ],
        );
    }
}

/// Records how many debates `expert`'s queue holds.
pub(crate) fn expert_queue(expert: &str, members: usize) {
    instruments().expert_queue.record(
        u64::try_from(members).unwrap_or(u64::MAX),
        &[KeyValue::new("expert", expert.to_string())],
    );
}

/// The ids of open debates, kept in step with the debates bucket by the
/// timer's watch; every change re-records `caucus_debates_open`.
#[derive(Debug, Default)]
pub struct OpenDebates {
    ids: Mutex<HashSet<String>>,
}

impl OpenDebates {
    /// Notes the stored state of `d`.
    pub fn observe(&self, d: &Debate) {
        self.update(|ids| {
            if d.state.is_open() {
                ids.insert(d.debate_id.clone());
            } else {
                ids.remove(&d.debate_id);
            }
        });
    }

    /// Notes that debate `id` was deleted.
    pub fn removed(&self, id: &str) {
        self.update(|ids| {
            ids.remove(id);
        });
    }

    /// How many debates are open.
    pub fn count(&self) -> usize {
        self.ids.lock().map(|ids| ids.len()).unwrap_or_default()
    }

    fn update(&self, f: impl FnOnce(&mut HashSet<String>)) {
        // A poisoned lock only means a panic elsewhere mid-update; the set
        // is still a set.
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut ids);
        instruments()
            .open
            .record(u64::try_from(ids.len()).unwrap_or(u64::MAX), &[]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caucus_shared::messages::DebateEscalation;

    fn escalation(from: u8, reason: &str) -> Effect {
        Effect::Escalated(DebateEscalation {
            debate_id: "d1".into(),
            from_level: from,
            to_level: from + 1,
            reason: reason.into(),
            expert: None,
            deadline: None,
            snapshot_id: None,
        })
    }

    #[test]
    fn open_debates_follow_the_stored_states() {
        crate::service::spans::tests::traced();
        let open = OpenDebates::default();
        let mut a = crate::debate::tests::open("supporting");
        let mut b = a.clone();
        b.debate_id = "other".into();
        open.observe(&a);
        open.observe(&b);
        open.observe(&a);
        assert_eq!(open.count(), 2, "one entry per debate, not per write");
        a.state = crate::debate::DebateState::Provisional;
        open.observe(&a);
        assert_eq!(open.count(), 1, "a provisional debate no longer argues");
        b.state = crate::debate::DebateState::Mediating;
        open.observe(&b);
        assert_eq!(open.count(), 1);
        open.removed("other");
        assert_eq!(open.count(), 0);
        let text = caucus_shared::telemetry::metrics::encode();
        assert!(text.lines().any(|l| l == "caucus_debates_open 0"), "{text}");
    }

    /// The names and labels dashboards use, as Prometheus reads them.
    #[test]
    fn prometheus_shows_debates_by_level_and_outcome_and_expert_queues() {
        crate::service::spans::tests::traced();
        debate_effects(&[
            escalation(2, "mediation_timeout"),
            escalation(1, "evidence_rejected"),
            Effect::ReleaseExpert {
                expert: "expert_kim".into(),
            },
        ]);
        debate_effects(&[escalation(1, "evidence_rejected")]);
        expert_queue("expert_kim", 2);
        let text = caucus_shared::telemetry::metrics::encode();
        let has = |line: &str| text.lines().any(|l| l == line);
        assert!(
            has(r#"caucus_debates_total{level="2",outcome="timed_out"} 1"#),
            "{text}"
        );
        assert!(
            has(r#"caucus_debates_total{level="1",outcome="escalated"} 2"#),
            "{text}"
        );
        assert!(
            has(r#"caucus_expert_queue{expert="expert_kim"} 2"#),
            "{text}"
        );
    }

    #[test]
    fn timeouts_and_other_escalations_are_told_apart() {
        let fx = [
            escalation(1, "ack_timeout"),
            escalation(1, "evidence_rejected"),
            escalation(3, "human_timeout"),
            Effect::ReleaseExpert {
                expert: "e1".into(),
            },
        ];
        assert_eq!(
            level_ends(&fx),
            vec![(1, "timed_out"), (1, "escalated"), (3, "timed_out")]
        );
    }

    #[test]
    fn every_resolution_method_has_its_own_outcome_but_levels_1_and_2_resolve() {
        use ResolutionMethod::*;
        let all = [
            AgentDirect,
            Credibility,
            Human,
            ConservativeDefault,
            DeferredToGate,
            GateConfirm,
            GateOverride,
            GateRedebate,
        ];
        let labels: Vec<&str> = all.iter().map(|m| resolution_outcome(*m)).collect();
        assert_eq!(
            labels,
            [
                "resolved",
                "resolved",
                "decided",
                "provisional",
                "deferred",
                "confirmed",
                "overridden",
                "redebated"
            ]
        );
    }
}
