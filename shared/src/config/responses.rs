//! `[coordinator.response_timeout]`: how long a sender waits for the
//! `confirmation` of a message sent with `requires_response: true`, by the
//! message's priority, before people get an alert card.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::envelope::Priority;

/// The response time-out per priority. Env:
/// `CAUCUS_COORDINATOR_RESPONSE_TIMEOUT__HIGH=30m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ResponseTimeouts {
    /// For `system_critical` messages.
    #[serde(with = "humantime_serde")]
    pub system_critical: Duration,
    /// For `critical` messages.
    #[serde(with = "humantime_serde")]
    pub critical: Duration,
    /// For `high` messages.
    #[serde(with = "humantime_serde")]
    pub high: Duration,
    /// For `normal` messages.
    #[serde(with = "humantime_serde")]
    pub normal: Duration,
    /// For `low` messages.
    #[serde(with = "humantime_serde")]
    pub low: Duration,
}

impl Default for ResponseTimeouts {
    fn default() -> Self {
        let min = Duration::from_secs(60);
        ResponseTimeouts {
            system_critical: min * 5,
            critical: min * 15,
            high: min * 60,
            normal: min * 240,
            low: min * 1440,
        }
    }
}

impl ResponseTimeouts {
    /// The time-out for a message of `priority`.
    pub fn for_priority(&self, priority: Priority) -> Duration {
        match priority {
            Priority::SystemCritical => self.system_critical,
            Priority::Critical => self.critical,
            Priority::High => self.high,
            Priority::Normal => self.normal,
            Priority::Low => self.low,
        }
    }

    /// Every time-out must be above zero.
    pub fn zero_for(&self) -> Option<Priority> {
        Priority::ALL
            .into_iter()
            .find(|p| self.for_priority(*p).is_zero())
    }
}
