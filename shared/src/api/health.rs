//! `<service>.health`, which every service answers.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{Empty, Operation};

/// `caucus.api.<service>.health`: is this instance up, and can it work.
#[derive(Debug, Clone, Copy)]
pub struct Health;

impl Operation for Health {
    const SERVICE: &'static str = "*";
    const NAME: &'static str = "health";
    const SUMMARY: &'static str = "liveness of any caucus service: `ok`, or `degraded` naming each component that cannot work and why";
    const ERRORS: &'static [&'static str] = &[];
    type Request = Empty;
    type Reply = HealthReply;
}

/// The answer to `health`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthReply {
    /// The service's name (`coordinator`, `worker`, …).
    pub service: String,
    /// This process's id (`<service>-<12 hex>`).
    pub instance_id: String,
    /// The crate version it runs.
    pub version: String,
    /// Milliseconds since it started.
    pub uptime_ms: u64,
    /// `ok` or `degraded`.
    pub status: String,
    /// Each degraded component and why (`{"redis": "Redis unreachable: …"}`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub degraded: BTreeMap<String, String>,
}
