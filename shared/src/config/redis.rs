//! `[redis]`: how to reach Redis.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::secret::{redact_url, Secret};

/// Redis connection settings.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RedisConfig {
    /// `redis://[user:pass@]host:port[/db]` or `rediss://` for TLS
    /// (`CAUCUS_REDIS_URL`).
    pub url: String,
    /// ACL user (`CAUCUS_REDIS_USERNAME`); overrides a user in `url`.
    pub username: Option<String>,
    /// Password (`CAUCUS_REDIS_PASSWORD`); overrides a password in `url`.
    /// Never printed: `--dump-config` and `Debug` show `***`.
    pub password: Option<Secret>,
    /// PEM CA bundle that verifies a `rediss://` server instead of the
    /// system's roots (a private CA).
    pub tls_ca_file: Option<PathBuf>,
    /// PEM client certificate for mutual TLS (with `tls_key_file`).
    pub tls_cert_file: Option<PathBuf>,
    /// PEM client key for mutual TLS (with `tls_cert_file`).
    pub tls_key_file: Option<PathBuf>,
    /// Connections in the pool.
    pub pool_size: usize,
    /// Attempts before giving up at start-up.
    pub connect_attempts: u32,
    /// Timeout of one connection attempt.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Largest pause between attempts.
    #[serde(with = "humantime_serde")]
    pub connect_backoff_max: Duration,
}

impl Default for RedisConfig {
    fn default() -> Self {
        RedisConfig {
            url: "redis://127.0.0.1:6379".into(),
            username: None,
            password: None,
            tls_ca_file: None,
            tls_cert_file: None,
            tls_key_file: None,
            pool_size: 16,
            connect_attempts: 10,
            connect_timeout: Duration::from_secs(2),
            connect_backoff_max: Duration::from_secs(2),
        }
    }
}

// By hand so the URL's password is not shown (the password field is a
// `Secret`, which redacts itself).
impl fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &redact_url(&self.url))
            .field("username", &self.username)
            .field("password", &self.password)
            .field("tls_ca_file", &self.tls_ca_file)
            .field("tls_cert_file", &self.tls_cert_file)
            .field("tls_key_file", &self.tls_key_file)
            .field("pool_size", &self.pool_size)
            .field("connect_attempts", &self.connect_attempts)
            .field("connect_timeout", &self.connect_timeout)
            .field("connect_backoff_max", &self.connect_backoff_max)
            .finish()
    }
}
