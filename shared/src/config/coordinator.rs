//! `[coordinator]`: the coordinator process.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::InvalidSetting;
use crate::task::ErrorClass;

/// Coordinator settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct CoordinatorConfig {
    /// Period of the active/standby leadership lease: a standby takes over
    /// within this after the active instance dies.
    #[serde(with = "humantime_serde")]
    pub leader_lease: Duration,
    /// Partitions the workflows are divided into; the coordinators share
    /// them, each partition under its own fenced lease (1 = one active
    /// coordinator, the others standing by). The same on every coordinator.
    /// See docs/PARTITIONS.md.
    pub partitions: u32,
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
    /// Finished workflow records (and their spilled outputs) expire from
    /// KV this long after they finished.
    #[serde(with = "humantime_serde")]
    pub retain_history: Duration,
    /// Task outputs larger than this (serialised JSON bytes) are stored
    /// under their own key in the `task_outputs` bucket instead of inside
    /// the workflow record, so a record stays small whatever tasks return.
    pub inline_output_bytes: usize,
    /// Events applied per batch before state is persisted.
    pub event_batch: usize,
    /// How long an unfinished workflow's changes may wait in memory before
    /// its record is written, so that the task events of one workflow that
    /// arrive close together share one KV write (0 = write after every
    /// batch). Their events are acknowledged only once written, so a crash
    /// redelivers them; a finished workflow, and a change a person or the
    /// API asked for, is written at once. See docs/RELIABILITY.md.
    #[serde(with = "humantime_serde")]
    pub persist_delay: Duration,
    /// A coordination-pattern agent call with no answer after this is a
    /// failed result (`timeout`); a request's `call_timeout_ms` overrides it.
    #[serde(with = "humantime_serde")]
    pub pattern_call_timeout: Duration,
    /// Alerts while a workflow stays paused, measured from the moment it
    /// paused; each fires once (reminders first, the later ones escalate).
    /// Env: `CAUCUS_COORDINATOR_PAUSE_REMINDERS=3d,7d,14d,30d`.
    #[serde(with = "duration_list")]
    pub pause_reminders: Vec<Duration>,
    /// Reminders from this index on (0-based) are escalations (`critical`).
    pub pause_escalate_from: usize,
    /// Reminders while a human gate waits, measured from its opening; each
    /// fires once. A gate stage's `params.reminders` overrides them.
    /// Env: `CAUCUS_COORDINATOR_GATE_REMINDERS=1h,4h`.
    #[serde(with = "duration_list")]
    pub gate_reminders: Vec<Duration>,
    /// A gate still waiting after this is escalated (a `critical` alert);
    /// a gate stage's `params.escalate_after` overrides it.
    #[serde(with = "humantime_serde")]
    pub gate_escalate_after: Duration,
    /// Default number of workflows a batch resumes at once.
    pub batch_concurrency: u32,
    /// A batch stops once more than this share of its finished operations
    /// failed (checked after the first wave of `concurrency` operations).
    pub batch_failure_ratio: f64,
    /// Failure tier rules: the first that matches a failed attempt decides
    /// its tier (1 retry, 2 pause, 3 escalate). See docs/PAUSE-RESUME.md.
    pub failure_tiers: Vec<TierRule>,
    /// Level review gate for pipelines that set none of their own:
    /// `conflicts` (review a level only when two of its tasks modified one
    /// resource), `always` or `off`. See docs/LEVEL-REVIEW.md.
    pub level_review_mode: LevelReviewMode,
    /// Agent type that runs level reviews for pipelines that name none.
    pub level_review_agent: String,
    /// Delay between the starts of two discovery streams of a research
    /// run (seed 004: 2 s).
    #[serde(with = "humantime_serde")]
    pub research_stagger: Duration,
    /// Discovery streams one research run may start, at most (seed 004: 5).
    pub research_max_streams: u32,
    /// Period of a research run's progress checkpoints (seed 004: 3 min).
    #[serde(with = "humantime_serde")]
    pub research_checkpoint_interval: Duration,
    /// How long a submission (idempotency key -> workflow ids) is kept in
    /// the `submissions` KV bucket: a retry with the same key within this
    /// returns the same workflow ids and creates nothing.
    #[serde(with = "humantime_serde")]
    pub submission_ttl: Duration,
    /// Workflow records a submit creates per step; the scheduler takes each
    /// step over between its dispatch rounds, so a large submit never
    /// stalls running work.
    pub submit_chunk: usize,
    /// Findings one task receives in `inputs.findings`, at most (the most
    /// recent addressed to its agent type, given oldest first).
    pub findings_per_task: usize,
    /// Serialised bytes of one task's `inputs.findings`, at most: older
    /// findings are left out first.
    pub findings_bytes_per_task: usize,
    /// How far back the coordinator reads addressed findings when it takes
    /// over (older ones reach no task).
    #[serde(with = "humantime_serde")]
    pub findings_lookback: Duration,
    /// Items whose addressed findings are held in memory, at most (the
    /// least recently addressed are forgotten first).
    pub findings_items: usize,
    /// How long a `requires_response` message may wait for its
    /// `confirmation`, by priority, before an alert card.
    pub response_timeout: super::responses::ResponseTimeouts,
}

/// When the coordinator reviews a completed dependency level before the
/// next one starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LevelReviewMode {
    /// Only when two tasks of the level modified the same resource.
    #[default]
    Conflicts,
    /// After every level.
    Always,
    /// Never (and levels are not barriers).
    Off,
}

impl LevelReviewMode {
    /// The config and pipeline-spec spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            LevelReviewMode::Conflicts => "conflicts",
            LevelReviewMode::Always => "always",
            LevelReviewMode::Off => "off",
        }
    }
}

/// One failure classification rule. Every condition given must hold;
/// conditions left out match anything.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TierRule {
    /// Name shown in alerts and logs.
    pub name: String,
    /// 1 retry with backoff, 2 pause with a checkpoint, 3 escalate to a person.
    pub tier: u8,
    /// Matches when the error's `error_type` is one of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub error_types: Vec<String>,
    /// Matches when the error's class is this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<ErrorClass>,
    /// Matches when the message contains one of these (case-insensitive).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub message_contains: Vec<String>,
    /// Matches only when the stage's retry policy is (true) or is not
    /// (false) used up by this attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries_exhausted: Option<bool>,
    /// Matches only when the task has failed with this same `error_type`
    /// at least this many times (this failure included, across resumes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_repeats: Option<u32>,
}

impl TierRule {
    fn new(name: &str, tier: u8) -> Self {
        TierRule {
            name: name.into(),
            tier,
            error_types: Vec::new(),
            class: None,
            message_contains: Vec::new(),
            retries_exhausted: None,
            min_repeats: None,
        }
    }

    /// The built-in rules, in order.
    pub fn defaults() -> Vec<TierRule> {
        let strs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        vec![
            TierRule {
                error_types: strs(&["handler_panic", "invalid_pipeline", "no_builtin"]),
                ..TierRule::new("handler_bug", 3)
            },
            TierRule {
                class: Some(ErrorClass::Permanent),
                min_repeats: Some(2),
                ..TierRule::new("permanent_error_repeated", 3)
            },
            TierRule {
                error_types: strs(&[
                    "quota_exceeded",
                    "api_quota_exceeded",
                    "rate_limited",
                    "data_not_found",
                    "not_found",
                ]),
                message_contains: Vec::new(),
                ..TierRule::new("quota_or_missing_data", 2)
            },
            TierRule {
                message_contains: strs(&["quota exceeded", "rate limit exceeded"]),
                ..TierRule::new("quota_message", 2)
            },
            TierRule {
                error_types: strs(&["timeout", "connection_error"]),
                class: Some(ErrorClass::Transient),
                retries_exhausted: Some(false),
                ..TierRule::new("network", 1)
            },
            TierRule {
                class: Some(ErrorClass::Transient),
                retries_exhausted: Some(false),
                ..TierRule::new("transient", 1)
            },
            TierRule {
                retries_exhausted: Some(true),
                ..TierRule::new("retries_exhausted", 2)
            },
        ]
    }
}

impl CoordinatorConfig {
    /// Checks the pause, batch and tier settings.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        let bad = |key: &'static str, problem: String| Err(InvalidSetting::new(key, problem));
        if !(1..=crate::partition::MAX_PARTITIONS).contains(&self.partitions) {
            return bad(
                "coordinator.partitions",
                format!(
                    "{} must be between 1 and {}",
                    self.partitions,
                    crate::partition::MAX_PARTITIONS
                ),
            );
        }
        if self.batch_concurrency == 0 {
            return bad("coordinator.batch_concurrency", "must be at least 1".into());
        }
        if !(self.batch_failure_ratio > 0.0 && self.batch_failure_ratio <= 1.0) {
            return bad(
                "coordinator.batch_failure_ratio",
                format!("{} must be in (0, 1]", self.batch_failure_ratio),
            );
        }
        if self.submit_chunk == 0 {
            return bad("coordinator.submit_chunk", "must be at least 1".into());
        }
        if self.submission_ttl.is_zero() {
            return bad("coordinator.submission_ttl", "must be above 0".into());
        }
        if self.findings_items == 0 {
            return bad("coordinator.findings_items", "must be at least 1".into());
        }
        if let Some(p) = self.response_timeout.zero_for() {
            return bad(
                "coordinator.response_timeout",
                format!("`{p}` must be above 0"),
            );
        }
        if self.research_max_streams == 0 {
            return bad(
                "coordinator.research_max_streams",
                "must be at least 1".into(),
            );
        }
        if self.gate_reminders.windows(2).any(|w| w[0] > w[1]) {
            return bad(
                "coordinator.gate_reminders",
                "must be in ascending order".into(),
            );
        }
        if self.pause_reminders.windows(2).any(|w| w[0] > w[1]) {
            return bad(
                "coordinator.pause_reminders",
                "must be in ascending order".into(),
            );
        }
        let agent = &self.level_review_agent;
        if agent.is_empty()
            || !agent
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        {
            return bad(
                "coordinator.level_review_agent",
                format!("`{agent}` must match [a-z0-9_-]+"),
            );
        }
        for r in &self.failure_tiers {
            if !(1..=3).contains(&r.tier) {
                return bad(
                    "coordinator.failure_tiers",
                    format!("rule `{}`: tier {} must be 1, 2 or 3", r.name, r.tier),
                );
            }
        }
        Ok(())
    }
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        let day = Duration::from_secs(24 * 3600);
        CoordinatorConfig {
            leader_lease: Duration::from_secs(10),
            partitions: 1,
            time_unit: Duration::from_secs(1),
            overdue_factor: 1.5,
            tick: Duration::from_millis(200),
            retain_finished: Duration::from_secs(600),
            retain_history: day * 7,
            inline_output_bytes: 8 * 1024,
            event_batch: 256,
            persist_delay: Duration::from_millis(100),
            pause_reminders: vec![day * 3, day * 7, day * 14, day * 30],
            pause_escalate_from: 2,
            gate_reminders: vec![Duration::from_secs(3600), Duration::from_secs(4 * 3600)],
            gate_escalate_after: Duration::from_secs(24 * 3600),
            batch_concurrency: 5,
            batch_failure_ratio: 0.5,
            failure_tiers: TierRule::defaults(),
            pattern_call_timeout: Duration::from_secs(300),
            research_stagger: Duration::from_secs(2),
            research_max_streams: 5,
            research_checkpoint_interval: Duration::from_secs(180),
            level_review_mode: LevelReviewMode::Conflicts,
            level_review_agent: "reviewer".into(),
            submission_ttl: day,
            submit_chunk: 250,
            findings_per_task: 20,
            findings_bytes_per_task: 32 * 1024,
            findings_lookback: day,
            findings_items: 10_000,
            response_timeout: Default::default(),
        }
    }
}

/// A list of humantime durations (`["3d", "7d"]`).
mod duration_list {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer>(v: &[Duration], s: S) -> Result<S::Ok, S::Error> {
        v.iter()
            .map(|d| humantime::format_duration(*d).to_string())
            .collect::<Vec<_>>()
            .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Duration>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|s| {
                humantime::parse_duration(s.trim())
                    .map_err(|e| serde::de::Error::custom(format!("duration `{s}`: {e}")))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigLoader;

    #[test]
    fn response_timeouts_parse_per_priority_from_env() {
        let c = ConfigLoader::new()
            .env(vec![(
                "CAUCUS_COORDINATOR_RESPONSE_TIMEOUT__HIGH".to_string(),
                "2s".to_string(),
            )])
            .load()
            .unwrap();
        let t = c.coordinator.response_timeout;
        assert_eq!(t.high, Duration::from_secs(2));
        assert_eq!(
            t.for_priority(crate::envelope::Priority::Low),
            Duration::from_secs(86400)
        );
    }

    #[test]
    fn reminders_parse_from_env_and_round_trip() {
        let c = ConfigLoader::new()
            .env(vec![(
                "CAUCUS_COORDINATOR_PAUSE_REMINDERS".to_string(),
                "50ms, 1s".to_string(),
            )])
            .load()
            .unwrap();
        assert_eq!(
            c.coordinator.pause_reminders,
            vec![Duration::from_millis(50), Duration::from_secs(1)]
        );
        let d = CoordinatorConfig::default();
        assert_eq!(d.pause_reminders[0], Duration::from_secs(3 * 86400));
        assert!(d.validate().is_ok());
        let e = ConfigLoader::new()
            .set("coordinator.pause_reminders", "soon")
            .load()
            .unwrap_err()
            .to_string();
        assert!(e.contains("soon"), "{e}");
    }

    #[test]
    fn bad_tier_settings_are_named() {
        let mut c = CoordinatorConfig::default();
        c.failure_tiers[0].tier = 4;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("handler_bug"));
        let c = CoordinatorConfig {
            batch_failure_ratio: 0.0,
            ..CoordinatorConfig::default()
        };
        assert!(c.validate().is_err());
    }

    #[test]
    fn level_review_keys_load_and_are_checked() {
        let d = CoordinatorConfig::default();
        assert_eq!(d.level_review_mode, LevelReviewMode::Conflicts);
        assert_eq!(d.level_review_agent, "reviewer");
        let c = ConfigLoader::new()
            .env(vec![
                (
                    "CAUCUS_COORDINATOR_LEVEL_REVIEW_MODE".to_string(),
                    "always".to_string(),
                ),
                (
                    "CAUCUS_COORDINATOR_LEVEL_REVIEW_AGENT".to_string(),
                    "qa".to_string(),
                ),
            ])
            .load()
            .unwrap();
        assert_eq!(c.coordinator.level_review_mode, LevelReviewMode::Always);
        assert_eq!(c.coordinator.level_review_agent, "qa");
        let e = ConfigLoader::new()
            .set("coordinator.level_review_mode", "sometimes")
            .load()
            .unwrap_err()
            .to_string();
        assert!(e.contains("sometimes") && e.contains("conflicts"), "{e}");
        let c = CoordinatorConfig {
            level_review_agent: "Bad Agent".into(),
            ..CoordinatorConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("level_review_agent"));
    }

    #[test]
    fn submission_keys_load_and_are_checked() {
        let d = CoordinatorConfig::default();
        assert_eq!(d.submission_ttl, Duration::from_secs(24 * 3600));
        assert_eq!(d.submit_chunk, 250);
        let c = ConfigLoader::new()
            .env(vec![
                (
                    "CAUCUS_COORDINATOR_SUBMISSION_TTL".to_string(),
                    "2h".to_string(),
                ),
                (
                    "CAUCUS_COORDINATOR_SUBMIT_CHUNK".to_string(),
                    "100".to_string(),
                ),
            ])
            .load()
            .unwrap();
        assert_eq!(c.coordinator.submission_ttl, Duration::from_secs(7200));
        assert_eq!(c.coordinator.submit_chunk, 100);
        let c = CoordinatorConfig {
            submit_chunk: 0,
            ..CoordinatorConfig::default()
        };
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("submit_chunk"));
    }
}
