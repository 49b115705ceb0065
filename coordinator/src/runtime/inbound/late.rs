//! The flag a late finding puts on a workflow: a high or critical finding
//! addressed to an agent type whose task for the item had already
//! completed when the finding was stored.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use caucus_shared::envelope::Priority;

/// `WorkflowFlag::kind` of a late finding.
pub const LATE_FINDING: &str = "late_finding";

/// `WorkflowFlag::detail` of a late finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LateFinding {
    /// The finding's id (flags are de-duplicated by it).
    pub id: String,
    /// Its sender.
    pub from_agent: String,
    /// Its addressee as sent.
    pub to_agent: String,
    /// Its priority (high or above).
    pub priority: Priority,
    /// Its one-line text.
    pub finding: String,
    /// Its `impact`, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impact: Option<String>,
    /// The completed stages it arrived after: re-running them applies it.
    pub stages: Vec<String>,
    /// When it was stored.
    pub stored_at: DateTime<Utc>,
}
