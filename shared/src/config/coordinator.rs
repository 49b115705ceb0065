//! `[coordinator]`: the coordinator process.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Coordinator settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct CoordinatorConfig {
    /// Period of the active/standby leadership lease: a standby takes over
    /// within this after the active instance dies.
    #[serde(with = "humantime_serde")]
    pub leader_lease: Duration,
}

impl Default for CoordinatorConfig {
    fn default() -> Self {
        CoordinatorConfig {
            leader_lease: Duration::from_secs(10),
        }
    }
}
