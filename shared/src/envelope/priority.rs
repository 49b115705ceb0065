//! Message priority and its ordering.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How urgent a message is. `a > b` means `a` is more urgent, so
/// `SystemCritical > Critical > High > Normal > Low`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// Tier 0: regime changes, major Fed moves; bypasses every queue.
    SystemCritical,
    /// Must be handled before anything but system-critical traffic.
    Critical,
    /// Ahead of normal traffic.
    High,
    /// The default.
    #[default]
    Normal,
    /// Background.
    Low,
}

impl Priority {
    /// Every priority, most urgent first.
    pub const ALL: [Priority; 5] = [
        Priority::SystemCritical,
        Priority::Critical,
        Priority::High,
        Priority::Normal,
        Priority::Low,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::SystemCritical => "system_critical",
            Priority::Critical => "critical",
            Priority::High => "high",
            Priority::Normal => "normal",
            Priority::Low => "low",
        }
    }

    /// Urgency rank: 4 for system-critical down to 0 for low.
    pub fn rank(self) -> u8 {
        match self {
            Priority::SystemCritical => 4,
            Priority::Critical => 3,
            Priority::High => 2,
            Priority::Normal => 1,
            Priority::Low => 0,
        }
    }

    /// True when the message must skip every queue and be handled at once
    /// (the seed's "Tier 0, bypasses queue").
    pub fn bypasses_queues(self) -> bool {
        self == Priority::SystemCritical
    }
}

impl Ord for Priority {
    fn cmp(&self, other: &Self) -> Ordering {
        self.rank().cmp(&other.rank())
    }
}

impl PartialOrd for Priority {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Priority {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Priority::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown priority `{s}` (expected one of: system_critical, critical, high, normal, low)"
                )
            })
    }
}
