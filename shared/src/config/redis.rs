//! `[redis]`: how to reach Redis.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Redis connection settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RedisConfig {
    /// `redis://[user:pass@]host:port[/db]` or `rediss://` for TLS
    /// (`CAUCUS_REDIS_URL`).
    pub url: String,
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
            pool_size: 16,
            connect_attempts: 10,
            connect_timeout: Duration::from_secs(2),
            connect_backoff_max: Duration::from_secs(2),
        }
    }
}
