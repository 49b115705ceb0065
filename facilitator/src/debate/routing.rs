//! Workload-aware routing of debates that need a human (seed: "Routing
//! Logic by Priority" and "Overflow Handling").
//!
//! | priority | expert has room (< 3) | every expert full (3/3) |
//! |---|---|---|
//! | critical-path | route to the expert at once | credibility auto-resolution if clear, else conservative default (level 4) |
//! | valuation | route (queue order: arrival) | credibility auto-resolution if clear, else defer to the next gate |
//! | supporting | route | credibility auto-resolution if clear, else defer to the next gate |
//!
//! Outside overflow, a critical-path debate is never auto-resolved by
//! credibility (it goes to a person); the other classes are auto-resolved
//! at level 2 whenever the credibility gap is clear.

use caucus_shared::messages::ChallengePriority;
use serde::{Deserialize, Serialize};

/// What the service could get from the expert queues.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpertSlot {
    /// A slot was taken on this expert's queue.
    Claimed(String),
    /// Every expert's queue is full.
    Full,
}

/// Where a debate goes after level 2.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// Resolve to the more credible agent (binding). `overflow` is true when
    /// only the full queue allowed it (critical-path debates).
    Credibility {
        /// Resolved because the queues were full.
        overflow: bool,
    },
    /// Level 3: a person decides.
    Human(String),
    /// Level 4: conservative default, provisional.
    ConservativeDefault,
    /// Provisional conservative default, labelled as deferred to the next gate.
    DeferToGate,
}

/// True when level 2 cannot settle the debate by itself, so an expert slot
/// should be claimed before calling [`route`].
pub fn needs_expert(priority: ChallengePriority, credibility_clear: bool) -> bool {
    !(credibility_clear && priority != ChallengePriority::CriticalPath)
}

/// The route for a debate leaving level 2. `slot` is what the service
/// claimed; it is ignored when [`needs_expert`] is false.
pub fn route(priority: ChallengePriority, credibility_clear: bool, slot: &ExpertSlot) -> Route {
    if !needs_expert(priority, credibility_clear) {
        return Route::Credibility { overflow: false };
    }
    match slot {
        ExpertSlot::Claimed(expert) => Route::Human(expert.clone()),
        ExpertSlot::Full if credibility_clear => Route::Credibility { overflow: true },
        ExpertSlot::Full => match priority {
            ChallengePriority::CriticalPath => Route::ConservativeDefault,
            ChallengePriority::Valuation | ChallengePriority::Supporting => Route::DeferToGate,
        },
    }
}

/// Experts to try, least loaded first (ties by name), skipping full ones:
/// the workload-aware order in which the service tries to claim a slot.
pub fn candidates(loads: &[(String, u32)], max: u32) -> Vec<String> {
    let mut open: Vec<&(String, u32)> = loads.iter().filter(|(_, n)| *n < max).collect();
    open.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
    open.into_iter().map(|(e, _)| e.clone()).collect()
}

/// Order of debates in an expert's queue: priority class, then arrival.
pub fn queue_rank(priority: ChallengePriority) -> u8 {
    match priority {
        ChallengePriority::CriticalPath => 0,
        ChallengePriority::Valuation => 1,
        ChallengePriority::Supporting => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ChallengePriority::*;

    #[test]
    fn seed_routing_table() {
        let alice = ExpertSlot::Claimed("alice".into());
        let full = ExpertSlot::Full;
        // Room in the queue.
        assert_eq!(
            route(CriticalPath, false, &alice),
            Route::Human("alice".into())
        );
        assert_eq!(
            route(CriticalPath, true, &alice),
            Route::Human("alice".into())
        );
        assert_eq!(
            route(Valuation, false, &alice),
            Route::Human("alice".into())
        );
        assert_eq!(
            route(Supporting, false, &alice),
            Route::Human("alice".into())
        );
        // Clear credibility settles non-critical debates without a person.
        assert_eq!(
            route(Valuation, true, &alice),
            Route::Credibility { overflow: false }
        );
        assert_eq!(
            route(Supporting, true, &full),
            Route::Credibility { overflow: false }
        );
        // Overflow.
        assert_eq!(
            route(CriticalPath, true, &full),
            Route::Credibility { overflow: true }
        );
        assert_eq!(
            route(CriticalPath, false, &full),
            Route::ConservativeDefault
        );
        assert_eq!(route(Valuation, false, &full), Route::DeferToGate);
        assert_eq!(route(Supporting, false, &full), Route::DeferToGate);
    }

    #[test]
    fn least_loaded_expert_first() {
        let loads = vec![
            ("carol".into(), 2),
            ("alice".into(), 3),
            ("bob".into(), 2),
            ("dan".into(), 0),
        ];
        assert_eq!(candidates(&loads, 3), vec!["dan", "bob", "carol"]);
        assert!(candidates(&[("alice".into(), 3)], 3).is_empty());
    }
}
