//! `[worker]`: a worker process.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

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
        }
    }
}
