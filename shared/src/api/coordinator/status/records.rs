//! The smaller records a workflow view carries: its pause, its flags and
//! a gate's state (decisions and re-runs are the gate operations' types).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::coordinator::gates::GateDecision;

/// A workflow's current pause (docs/PAUSE-RESUME.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PauseView {
    /// 1 for the workflow's first pause, +1 per pause.
    pub seq: u32,
    /// Why, shown to people.
    pub reason: String,
    /// Who asked: `human`, `api`, `tier2_failure`, `tier3_failure`,
    /// `batch`, `correlator`, `gate_timeout`, …
    pub trigger_source: String,
    /// When the pause was requested.
    pub requested_at: DateTime<Utc>,
    /// When it reached `paused`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_at: Option<DateTime<Utc>>,
    /// Paused without waiting for in-flight tasks.
    #[serde(default)]
    pub cancel_in_flight: bool,
    /// The failure tier that caused it (2 or 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<u8>,
    /// A person has been alerted; dispatch stays stopped until someone
    /// resumes it.
    #[serde(default)]
    pub escalated: bool,
    /// Tasks that failed beyond their tier-1 handling.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_tasks: Vec<String>,
    /// The checkpoint, once stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_id: Option<String>,
    /// Indices of the reminders already sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reminders_sent: Vec<usize>,
    /// The batch that paused it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
    /// The failure correlation behind the batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
}

/// A reason to re-evaluate a workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlagView {
    /// What happened: `regime_change`, `rate_announcement`.
    pub kind: String,
    /// When it was flagged.
    pub at: DateTime<Utc>,
    /// The broadcast: its `id`, `from_agent`, regimes (`new_regime`, …)
    /// and confidence, as it was sent.
    pub detail: Value,
}

/// A human gate's life beyond its task state (docs/GATES.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateView {
    /// When it last opened.
    pub opened_at: DateTime<Utc>,
    /// Reminders sent since it opened.
    #[serde(default)]
    pub reminders_sent: u32,
    /// When the wait was escalated, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalated_at: Option<DateTime<Utc>>,
    /// Earlier decisions that sent the work back, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<GateDecision>,
    /// The final decision (approve or reject).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<GateDecision>,
}
