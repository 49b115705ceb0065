//! Redis primitives: every state change is one Lua script, and the keys of
//! one primitive share a hash tag so the scripts run unchanged on Redis
//! Cluster.

mod connect;

pub use connect::{connect, redact_url, RedisPool};
