//! `[worker]`: a worker process.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Default of [`WorkerConfig::max_output_bytes`]: 256 KiB.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 256 * 1024;

/// Default of [`WorkerConfig::exec_max_output_bytes`]: 1 MiB.
pub const DEFAULT_EXEC_MAX_OUTPUT_BYTES: usize = 1024 * 1024;

/// Default of [`WorkerConfig::exec_max_stderr_bytes`]: 64 KiB.
pub const DEFAULT_EXEC_MAX_STDERR_BYTES: usize = 64 * 1024;

/// Worker settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct WorkerConfig {
    /// Agent types this worker runs (`--agent valuation,report`).
    pub agents: Vec<String>,
    /// Concurrent task slots this worker registers per agent type.
    pub slots: u32,
    /// `builtin`, `exec:CMD` or `http:URL`.
    pub handler: String,
    /// How often the worker renews its registration and leases.
    #[serde(with = "humantime_serde")]
    pub heartbeat_interval: Duration,
    /// Lease period: a killed worker's slots and leases are reclaimed after this.
    #[serde(with = "humantime_serde")]
    pub lease_ttl: Duration,
    /// Optional cluster-wide cap per agent type, below the sum of slots.
    pub capacity_cap: BTreeMap<String, u32>,
    /// How long an idle slot waits for a task before giving its lease back.
    #[serde(with = "humantime_serde")]
    pub fetch_wait: Duration,
    /// JetStream ack wait of the task consumer: an unacknowledged task is
    /// redelivered after this (in-progress acks extend it while running).
    #[serde(with = "humantime_serde")]
    pub ack_wait: Duration,
    /// Deliveries of one task message before JetStream gives up on it.
    pub max_deliver: i64,
    /// How long an attempt runs before the worker publishes its `started`
    /// event (`CAUCUS_WORKER_STARTED_DELAY`). An attempt that ends sooner
    /// publishes none: its `completed` or `failed` event carries
    /// `started_at` and the coordinator applies it as start and end, which
    /// saves a stored event per short task. `0s` publishes `started`
    /// before the handler runs (and hands the task back if it cannot).
    #[serde(with = "humantime_serde")]
    pub started_delay: Duration,
    /// Pace built-in tasks to their expected duration (the demo does).
    pub pace: bool,
    /// Directory of a fundamentals data set replacing the bundled one.
    pub data_path: Option<std::path::PathBuf>,
    /// Built-in valuation opens a debate when the financial and strategy
    /// operating-margin assumptions differ by more than this (fraction;
    /// 0 disables built-in debates). A stage param `margin_debate_gap` wins.
    pub margin_debate_gap: f64,
    /// Longest wait, before a task starts, for broadcasts already on
    /// `caucus.msg.all` to be applied (then the task runs anyway, logged).
    #[serde(with = "humantime_serde")]
    pub broadcast_wait: Duration,
    /// How long a built-in challenger waits for the challenged agent's
    /// evidence before giving up on its verdict (the facilitator's own
    /// deadlines then escalate the debate).
    #[serde(with = "humantime_serde")]
    pub debate_evidence_wait: Duration,
    /// Longest wait of a findings publish while its agent's debate sync
    /// lock is held (seed 001 sync-lock protocol). Keep it above
    /// `facilitator.sync_lock_ttl` (10 s), after which a crashed
    /// facilitator's lock lapses; past it the finding is published anyway
    /// and an error logged.
    #[serde(with = "humantime_serde")]
    pub sync_lock_wait: Duration,
    /// Largest task output, in bytes of its JSON, a worker reports as
    /// `completed` (`CAUCUS_WORKER_MAX_OUTPUT_BYTES`). A larger output is a
    /// permanent failure of the task (`output_too_large`): an event that big
    /// would not fit the workflow record or the message size limits, and
    /// running the task again would produce it again.
    pub max_output_bytes: usize,
    /// Variables of the worker's environment an `exec:` agent also receives
    /// (`CAUCUS_WORKER_EXEC_ENV_PASSTHROUGH=A,B`). An agent starts with an
    /// empty environment plus PATH, HOME, LANG and TZ (when the worker has
    /// them), TRACEPARENT (the task's trace) and these: never the worker's
    /// own credentials unless listed here.
    pub exec_env_passthrough: Vec<String>,
    /// Most bytes of an `exec:` agent's stdout the worker reads
    /// (`CAUCUS_WORKER_EXEC_MAX_OUTPUT_BYTES`); past it the command is
    /// killed and the task fails permanently (`output_too_large`).
    pub exec_max_output_bytes: usize,
    /// Bytes of an `exec:` agent's stderr kept (the last ones), for the
    /// worker's log and, shortened, the task's error message
    /// (`CAUCUS_WORKER_EXEC_MAX_STDERR_BYTES`).
    pub exec_max_stderr_bytes: usize,
    /// Longest wait for an `http:` agent's reply to one task
    /// (`CAUCUS_WORKER_HTTP_TIMEOUT`); a stage's own timeout, when shorter,
    /// ends it first. A timed-out request is a transient `timeout` failure.
    #[serde(with = "humantime_serde")]
    pub http_timeout: Duration,
    /// PEM CA bundle that verifies `https://` agents, in addition to the
    /// system's roots (`CAUCUS_WORKER_HTTP_CA_FILE`; a private CA).
    pub http_ca_file: Option<std::path::PathBuf>,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            agents: Vec::new(),
            slots: 1,
            handler: "builtin".into(),
            heartbeat_interval: Duration::from_secs(2),
            lease_ttl: Duration::from_secs(10),
            capacity_cap: BTreeMap::new(),
            fetch_wait: Duration::from_millis(500),
            ack_wait: Duration::from_secs(30),
            max_deliver: 20,
            started_delay: Duration::from_millis(250),
            pace: false,
            data_path: None,
            margin_debate_gap: 0.03,
            broadcast_wait: Duration::from_secs(2),
            debate_evidence_wait: Duration::from_secs(3600),
            sync_lock_wait: Duration::from_secs(15),
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            exec_env_passthrough: Vec::new(),
            exec_max_output_bytes: DEFAULT_EXEC_MAX_OUTPUT_BYTES,
            exec_max_stderr_bytes: DEFAULT_EXEC_MAX_STDERR_BYTES,
            http_timeout: Duration::from_secs(30),
            http_ca_file: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::ConfigLoader;

    #[test]
    fn max_output_bytes_defaults_to_256_kib_and_follows_the_env() {
        let c = ConfigLoader::new().load().unwrap();
        assert_eq!(c.worker.max_output_bytes, 262_144);
        let c = ConfigLoader::new()
            .env(vec![(
                "CAUCUS_WORKER_MAX_OUTPUT_BYTES".to_string(),
                "1000".to_string(),
            )])
            .load()
            .unwrap();
        assert_eq!(c.worker.max_output_bytes, 1000);
        let e = ConfigLoader::new()
            .set("worker.max_output_bytes", "0")
            .load()
            .unwrap_err()
            .to_string();
        assert!(e.contains("worker.max_output_bytes must be > 0"), "{e}");
    }

    #[test]
    fn started_delay_defaults_to_250_ms_and_follows_the_env() {
        let c = ConfigLoader::new().load().unwrap();
        assert_eq!(c.worker.started_delay, Duration::from_millis(250));
        let env = |v: &str| vec![("CAUCUS_WORKER_STARTED_DELAY".to_string(), v.to_string())];
        let c = ConfigLoader::new().env(env("0s")).load().unwrap();
        assert_eq!(c.worker.started_delay, Duration::ZERO);
        let c = ConfigLoader::new().env(env("1s 500ms")).load().unwrap();
        assert_eq!(c.worker.started_delay, Duration::from_millis(1500));
        let e = ConfigLoader::new()
            .env(env("soon"))
            .load()
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected a duration"), "{e}");
    }

    #[test]
    fn exec_settings_default_and_follow_the_env() {
        let c = ConfigLoader::new().load().unwrap();
        assert!(c.worker.exec_env_passthrough.is_empty());
        assert_eq!(c.worker.exec_max_output_bytes, 1_048_576);
        assert_eq!(c.worker.exec_max_stderr_bytes, 65_536);
        let c = ConfigLoader::new()
            .env(vec![
                (
                    "CAUCUS_WORKER_EXEC_ENV_PASSTHROUGH".to_string(),
                    "HTTPS_PROXY, MY_API_KEY".to_string(),
                ),
                (
                    "CAUCUS_WORKER_EXEC_MAX_OUTPUT_BYTES".to_string(),
                    "2000".to_string(),
                ),
                (
                    "CAUCUS_WORKER_EXEC_MAX_STDERR_BYTES".to_string(),
                    "300".to_string(),
                ),
            ])
            .load()
            .unwrap();
        assert_eq!(c.worker.exec_env_passthrough, ["HTTPS_PROXY", "MY_API_KEY"]);
        assert_eq!(c.worker.exec_max_output_bytes, 2000);
        assert_eq!(c.worker.exec_max_stderr_bytes, 300);
    }
}
