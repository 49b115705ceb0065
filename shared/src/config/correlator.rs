//! `[correlator]`: the correlator process.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Correlator settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct CorrelatorConfig {
    /// Period of the active/standby leadership lease: a standby takes over
    /// within this after the active instance dies.
    #[serde(with = "humantime_serde")]
    pub leader_lease: Duration,
    /// Span of the correlation window: failures of one signature this close
    /// together (by their own timestamps) are one incident.
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// Distinct items within the window that make an incident and trigger a
    /// batch pause.
    pub batch_threshold: usize,
    /// Minimum distinct items for each root-cause rule.
    pub thresholds: CorrelatorThresholds,
    /// Extra stream history replayed on start beyond one window, for
    /// failures reported late or clocks that disagree.
    #[serde(with = "humantime_serde")]
    pub replay_margin: Duration,
    /// Longest history replayed on start to rebuild an incident that was
    /// still open (bounds start-up time after a long outage).
    #[serde(with = "humantime_serde")]
    pub max_replay: Duration,
    /// Severity of correlated-failure alert cards: the last token of
    /// `caucus.alerts.<severity>` (`critical`, `high`, `normal`, `low`).
    pub alert_severity: String,
    /// Failure event ids remembered to ignore replays and redeliveries.
    pub max_tracked_ids: usize,
    /// How long an event id is remembered (by event time).
    #[serde(with = "humantime_serde")]
    pub dedupe_horizon: Duration,
    /// Signatures tracked at once; the least recently failing goes first.
    pub max_signatures: usize,
    /// How often the records of incidents that only saw repeated failures
    /// (counts, `last_seen`) are written; new items are written at once.
    #[serde(with = "humantime_serde")]
    pub record_flush_interval: Duration,
    /// How often quiet incidents are closed by wall-clock time.
    #[serde(with = "humantime_serde")]
    pub expire_interval: Duration,
    /// A delivered failure not acked within this is redelivered.
    #[serde(with = "humantime_serde")]
    pub ack_wait: Duration,
    /// Failures pulled from the stream per batch.
    pub fetch_batch: usize,
    /// Correlation records are kept in KV this long after their last write.
    #[serde(with = "humantime_serde")]
    pub record_ttl: Duration,
}

impl Default for CorrelatorConfig {
    fn default() -> Self {
        CorrelatorConfig {
            leader_lease: Duration::from_secs(10),
            window: Duration::from_secs(300),
            batch_threshold: 3,
            thresholds: CorrelatorThresholds::default(),
            replay_margin: Duration::from_secs(60),
            max_replay: Duration::from_secs(3600),
            alert_severity: "high".into(),
            max_tracked_ids: 200_000,
            dedupe_horizon: Duration::from_secs(3600),
            max_signatures: 10_000,
            record_flush_interval: Duration::from_secs(1),
            expire_interval: Duration::from_secs(5),
            ack_wait: Duration::from_secs(30),
            fetch_batch: 1000,
            record_ttl: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

/// `[correlator.thresholds]`: distinct items each root-cause rule needs
/// (env `CAUCUS_CORRELATOR_THRESHOLDS__QUOTA=4`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default)]
pub struct CorrelatorThresholds {
    /// Quota errors from one source → "{source} API quota exceeded".
    pub quota: usize,
    /// Timeouts/connection errors from one source → "{source} network connectivity".
    pub network: usize,
    /// 404 / not found → "{source} data unavailable".
    pub not_found: usize,
    /// One agent type, one error → "{agent} failure - {error}".
    pub agent_bug: usize,
}

impl Default for CorrelatorThresholds {
    fn default() -> Self {
        CorrelatorThresholds {
            quota: 3,
            network: 5,
            not_found: 3,
            agent_bug: 3,
        }
    }
}
