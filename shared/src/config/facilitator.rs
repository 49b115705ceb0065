//! `[facilitator]`: the facilitator process.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Facilitator settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct FacilitatorConfig {
    /// Period of the active/standby leadership lease: a standby takes over
    /// within this after the active instance dies.
    #[serde(with = "humantime_serde")]
    pub leader_lease: Duration,
}

impl Default for FacilitatorConfig {
    fn default() -> Self {
        FacilitatorConfig {
            leader_lease: Duration::from_secs(10),
        }
    }
}
