//! `[correlator]`: the correlator process.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Correlator settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct CorrelatorConfig {
    /// Period of the active/standby leadership lease: a standby takes over
    /// within this after the active instance dies.
    #[serde(with = "humantime_serde")]
    pub leader_lease: Duration,
}

impl Default for CorrelatorConfig {
    fn default() -> Self {
        CorrelatorConfig {
            leader_lease: Duration::from_secs(10),
        }
    }
}
