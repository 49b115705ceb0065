//! The KV buckets a restricted service opens, in one place.
//!
//! The facilitator and the correlator only bind to their buckets (see
//! [`super::bind`]); the coordinator and `caucus init` create them with
//! these settings. The coordinator's own buckets stay with the coordinator,
//! which creates them itself at start.

use std::time::Duration;

use crate::Config;

/// The facilitator's debates bucket (five revisions kept per debate).
pub const DEBATES: &str = "debates";
/// The facilitator's credibility tracks.
pub const CREDIBILITY: &str = "credibility";
/// The facilitator's own state (the current regime).
pub const FACILITATOR_STATE: &str = "facilitator";
/// The correlator's incidents.
pub const CORRELATIONS: &str = "correlations";

/// One KV bucket: its name without the prefix, and its limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketSpec {
    /// The name without the prefix (`debates` → `caucus_debates`).
    pub name: &'static str,
    /// Revisions kept per key.
    pub history: i64,
    /// Age limit of an entry (zero: none).
    pub max_age: Duration,
    /// The service that reads and writes it.
    pub used_by: &'static str,
}

/// The facilitator's and the correlator's buckets, with the settings of
/// `cfg`.
pub fn restricted(cfg: &Config) -> Vec<BucketSpec> {
    vec![
        BucketSpec {
            name: DEBATES,
            history: 5,
            max_age: cfg.facilitator.debate_retention,
            used_by: "facilitator",
        },
        BucketSpec {
            name: CREDIBILITY,
            history: 1,
            max_age: Duration::ZERO,
            used_by: "facilitator",
        },
        BucketSpec {
            name: FACILITATOR_STATE,
            history: 1,
            max_age: Duration::ZERO,
            used_by: "facilitator",
        },
        BucketSpec {
            name: CORRELATIONS,
            history: 1,
            max_age: cfg.correlator.record_ttl,
            used_by: "correlator",
        },
    ]
}

/// The spec of one of [`restricted`]'s buckets by name.
pub fn restricted_named(cfg: &Config, name: &str) -> Option<BucketSpec> {
    restricted(cfg).into_iter().find(|b| b.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_facilitator_keeps_debate_history_and_names_are_distinct() {
        let cfg = Config::default();
        let all = restricted(&cfg);
        let debates = restricted_named(&cfg, DEBATES).expect("debates");
        assert_eq!(debates.history, 5);
        assert_eq!(debates.max_age, cfg.facilitator.debate_retention);
        let mut names: Vec<_> = all.iter().map(|b| b.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), all.len());
    }
}
