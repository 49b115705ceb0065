//! Layered configuration: defaults → TOML file → `CAUCUS_*` env → flags.
//!
//! Every section lives in its own file. Every duration from the specs is a
//! field here (humantime strings such as `"15m"` in TOML and env), so tests
//! shrink them instead of waiting.
//!
//! Environment mapping: strip `CAUCUS_`, lowercase; the first word that names
//! a section becomes the section (`CAUCUS_NATS_URL` → `nats.url`,
//! `CAUCUS_WORKER_SLOTS` → `worker.slots`); `__` nests explicitly
//! (`CAUCUS_WORKER_CAPACITY_CAP__VALUATION=2`). Variables that name no key
//! are ignored (so `CAUCUS_CONFIG` and tool variables can coexist); unknown
//! keys in a file are an error, because they are almost always typos.

mod console;
mod coordinator;
mod correlator;
mod facilitator;
mod invalid;
mod layers;
mod nats;
mod redis;
mod responses;
mod secret;
mod security;
mod telemetry;
mod worker;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use console::{ConsoleAuth, ConsoleConfig};
pub use coordinator::{CoordinatorConfig, LevelReviewMode, TierRule};
pub use correlator::CorrelatorConfig;
pub use facilitator::FacilitatorConfig;
pub use invalid::InvalidSetting;
pub use layers::{CommonArgs, ConfigLoader};
pub use nats::NatsConfig;
pub use redis::{RedisConfig, RedisMode};
pub use responses::ResponseTimeouts;
pub use secret::{redact_url, redact_urls, Secret, REDACTED};
pub use security::SecurityConfig;
pub use telemetry::{LogFormat, TelemetryConfig, AUTO_TRACE_LEVEL};
pub use worker::WorkerConfig;

/// The whole configuration of any caucus process.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Config {
    /// Prefix of every subject, stream and bucket name (`caucus`).
    pub subject_prefix: String,
    /// Bodies larger than this go to the DLQ (default 1 MiB).
    pub max_body_bytes: usize,
    /// How long SIGTERM waits for in-flight work before exiting anyway.
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,
    /// NATS connection.
    pub nats: NatsConfig,
    /// Redis connection.
    pub redis: RedisConfig,
    /// Logs and traces.
    pub telemetry: TelemetryConfig,
    /// The coordinator's settings.
    pub coordinator: CoordinatorConfig,
    /// A worker's settings.
    pub worker: WorkerConfig,
    /// The facilitator's settings.
    pub facilitator: FacilitatorConfig,
    /// The correlator's settings.
    pub correlator: CorrelatorConfig,
    /// How the API treats its callers' identity.
    pub security: SecurityConfig,
    /// The web console's settings.
    pub console: ConsoleConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            subject_prefix: "caucus".into(),
            max_body_bytes: 1024 * 1024,
            shutdown_grace: Duration::from_secs(30),
            nats: NatsConfig::default(),
            redis: RedisConfig::default(),
            telemetry: TelemetryConfig::default(),
            coordinator: CoordinatorConfig::default(),
            worker: WorkerConfig::default(),
            facilitator: FacilitatorConfig::default(),
            correlator: CorrelatorConfig::default(),
            security: SecurityConfig::default(),
            console: ConsoleConfig::default(),
        }
    }
}

/// Names of the sections, for the env mapping.
pub(crate) const SECTIONS: &[&str] = &[
    "nats",
    "redis",
    "telemetry",
    "coordinator",
    "worker",
    "facilitator",
    "correlator",
    "security",
    "console",
];

impl Config {
    /// The effective configuration as TOML (what `--dump-config` prints),
    /// secrets shown as `"***"`: every key named like a secret (see
    /// [`secret::is_secret_key`]) and the password of every URL.
    pub fn to_toml(&self) -> String {
        let rendered = toml::Value::try_from(self).map(|mut v| {
            redact(&mut v, None);
            v
        });
        rendered
            .and_then(|v| toml::to_string_pretty(&v))
            .unwrap_or_else(|e| format!("# cannot render config: {e}\n"))
    }

    /// Checks cross-field rules that serde cannot.
    pub fn validate(&self) -> Result<(), crate::Error> {
        let bad = |m: String| Err(crate::Error::Config(m));
        if self.subject_prefix.is_empty()
            || self
                .subject_prefix
                .chars()
                .any(|c| c == '.' || c == '*' || c == '>' || c.is_whitespace())
        {
            return bad(format!(
                "subject_prefix `{}` must be one non-empty subject token (no '.', '*', '>' or spaces)",
                self.subject_prefix
            ));
        }
        if self.max_body_bytes == 0 {
            return bad("max_body_bytes must be > 0".into());
        }
        self.redis.validate()?;
        if self.worker.slots == 0 {
            return bad("worker.slots must be > 0".into());
        }
        if self.worker.heartbeat_interval >= self.worker.lease_ttl {
            return bad(format!(
                "worker.heartbeat_interval ({:?}) must be shorter than worker.lease_ttl ({:?}): \
                 registrations lapse between beats, and after Redis lost its data the cap must be \
                 restored within the recovery window of one lease period",
                self.worker.heartbeat_interval, self.worker.lease_ttl
            ));
        }
        if self.worker.max_output_bytes == 0 {
            return bad("worker.max_output_bytes must be > 0".into());
        }
        if self.worker.exec_max_output_bytes == 0 {
            return bad("worker.exec_max_output_bytes must be > 0".into());
        }
        if self.worker.exec_max_stderr_bytes == 0 {
            return bad("worker.exec_max_stderr_bytes must be > 0".into());
        }
        if self.coordinator.persist_delay.saturating_mul(4) > self.worker.ack_wait {
            return bad(format!(
                "coordinator.persist_delay ({:?}) must be at most a quarter of worker.ack_wait ({:?}): \
                 the events it holds unacknowledged would otherwise be redelivered while waiting",
                self.coordinator.persist_delay, self.worker.ack_wait
            ));
        }
        let gap = self.worker.margin_debate_gap;
        if !(gap.is_finite() && gap >= 0.0) {
            return bad(format!(
                "worker.margin_debate_gap must be a fraction >= 0 (0 disables built-in debates), got {gap}"
            ));
        }
        Ok(())
    }
}

/// Replaces secrets in a rendered configuration: the value of a secret key
/// (`key` is the name `v` is stored under) becomes `"***"`, a URL keeps all
/// but its password.
fn redact(v: &mut toml::Value, key: Option<&str>) {
    match v {
        toml::Value::String(s) if key.is_some_and(secret::is_secret_key) => {
            *s = REDACTED.to_string();
        }
        toml::Value::String(s) if s.contains("://") => *s = redact_urls(s),
        toml::Value::Array(items) => items.iter_mut().for_each(|i| redact(i, key)),
        toml::Value::Table(t) => t.iter_mut().for_each(|(k, i)| redact(i, Some(k))),
        _ => {}
    }
}
