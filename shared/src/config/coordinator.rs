//! `[coordinator]`: the coordinator process.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Coordinator settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct CoordinatorConfig {
    /// Period of the active/standby leadership lease: a standby takes over
    /// within this after the active instance dies.
    #[serde(with = "humantime_serde")]
    pub leader_lease: Duration,
    /// Wall time of one pipeline time unit (expected durations are in units).
    #[serde(with = "humantime_serde")]
    pub time_unit: Duration,
    /// A running task is flagged overdue past this multiple of its expected duration.
    pub overdue_factor: f64,
    /// How often capacities are re-read from Redis and timers checked.
    #[serde(with = "humantime_serde")]
    pub tick: Duration,
    /// Finished workflows are dropped from memory (not from KV) after this.
    #[serde(with = "humantime_serde")]
    pub retain_finished: Duration,
    /// Events applied per batch before state is persisted.
    pub event_batch: usize,
    /// A coordination-pattern agent call with no answer after this is a
    /// failed result (`timeout`); a request's `call_timeout_ms` overrides it.
    #[serde(with = "humantime_serde")]
    pub pattern_call_timeout: Duration,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            leader_lease: Duration::from_secs(10),
            time_unit: Duration::from_secs(1),
            overdue_factor: 1.5,
            tick: Duration::from_millis(200),
            retain_finished: Duration::from_secs(600),
            event_batch: 256,
            pattern_call_timeout: Duration::from_secs(300),
        }
    }
}
