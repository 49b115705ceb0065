//! `[nats]`: how to reach NATS.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::secret::{redact_urls, Secret};

/// NATS connection settings.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct NatsConfig {
    /// Server URL(s), comma separated (`CAUCUS_NATS_URL`).
    pub url: String,
    /// A `.creds` file (JWT + nkey seed).
    pub credentials_file: Option<PathBuf>,
    /// An nkey seed (`SU…`) for nkey auth (never printed).
    pub nkey_seed: Option<Secret>,
    /// Token auth (never printed).
    pub token: Option<Secret>,
    /// User for user/password auth (`CAUCUS_NATS_USER`).
    pub user: Option<String>,
    /// Password for user/password auth (`CAUCUS_NATS_PASSWORD`; never
    /// printed: `--dump-config` and `Debug` show `***`).
    pub password: Option<Secret>,
    /// Require TLS.
    pub tls_required: bool,
    /// PEM CA bundle that verifies the server (a private CA), in addition
    /// to the system's roots.
    pub tls_ca_file: Option<PathBuf>,
    /// Client certificate (mutual TLS).
    pub tls_cert_file: Option<PathBuf>,
    /// Client key (mutual TLS).
    pub tls_key_file: Option<PathBuf>,
    /// Timeout of one connection attempt.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Attempts before giving up at start-up.
    pub connect_attempts: u32,
    /// Largest pause between attempts (exponential backoff up to this).
    #[serde(with = "humantime_serde")]
    pub connect_backoff_max: Duration,
    /// Stream replicas (1 for a single server, 3 on a cluster).
    pub replicas: usize,
    /// Timeout of request/reply calls made by clients such as the CLI.
    #[serde(with = "humantime_serde")]
    pub request_timeout: Duration,
    /// How long a write no stream answered (a clustered stream electing
    /// its leader) is repeated before it fails; zero = never repeated.
    #[serde(with = "humantime_serde")]
    pub election_wait: Duration,
    /// How long the streams keep messages (TASKS keeps unclaimed work this long).
    #[serde(with = "humantime_serde")]
    pub stream_max_age: Duration,
    /// Size cap of each stream in bytes (oldest messages go first); -1 = none
    /// (the default: JetStream reserves a capped stream's whole size on disk
    /// up front, so caps are for deployments that size their volumes).
    pub stream_max_bytes: i64,
    /// How long dead letters are kept.
    #[serde(with = "humantime_serde")]
    pub dlq_max_age: Duration,
}

impl Default for NatsConfig {
    fn default() -> Self {
        NatsConfig {
            url: "nats://127.0.0.1:4222".into(),
            credentials_file: None,
            nkey_seed: None,
            token: None,
            user: None,
            password: None,
            tls_required: false,
            tls_ca_file: None,
            tls_cert_file: None,
            tls_key_file: None,
            connect_timeout: Duration::from_secs(2),
            connect_attempts: 10,
            connect_backoff_max: Duration::from_secs(2),
            replicas: 1,
            request_timeout: Duration::from_secs(10),
            election_wait: Duration::from_secs(15),
            stream_max_age: Duration::from_secs(14 * 24 * 3600),
            stream_max_bytes: -1,
            dlq_max_age: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

// By hand so the URLs' passwords are not shown (secrets redact themselves).
impl fmt::Debug for NatsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatsConfig")
            .field("url", &redact_urls(&self.url))
            .field("credentials_file", &self.credentials_file)
            .field("nkey_seed", &self.nkey_seed)
            .field("token", &self.token)
            .field("user", &self.user)
            .field("password", &self.password)
            .field("tls_required", &self.tls_required)
            .field("tls_ca_file", &self.tls_ca_file)
            .field("tls_cert_file", &self.tls_cert_file)
            .field("tls_key_file", &self.tls_key_file)
            .field("connect_timeout", &self.connect_timeout)
            .field("connect_attempts", &self.connect_attempts)
            .field("connect_backoff_max", &self.connect_backoff_max)
            .field("replicas", &self.replicas)
            .field("request_timeout", &self.request_timeout)
            .field("election_wait", &self.election_wait)
            .field("stream_max_age", &self.stream_max_age)
            .field("stream_max_bytes", &self.stream_max_bytes)
            .field("dlq_max_age", &self.dlq_max_age)
            .finish()
    }
}
