//! A gate's state and the decisions a person makes at it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Agent type recorded for gate tasks (they never reach a work queue).
pub const GATE_AGENT: &str = "gate";

/// A gate's life beyond its task state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateState {
    /// When it last opened (its dependencies had all completed).
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

/// What a person decides at a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateAction {
    /// The work stands; dependents run.
    Approve,
    /// The analysis is refused; the workflow fails.
    Reject,
    /// Upstream stages run again; the gate reopens after them.
    SendBack,
}

impl GateAction {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            GateAction::Approve => "approve",
            GateAction::Reject => "reject",
            GateAction::SendBack => "send_back",
        }
    }
}

/// A recorded decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateDecision {
    /// What was decided.
    pub action: GateAction,
    /// Who decided (`auto` for an automatic approval).
    pub decided_by: String,
    /// Why.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rationale: String,
    /// When.
    pub at: DateTime<Utc>,
    /// Milliseconds from the gate opening to this decision.
    pub response_ms: i64,
    /// Send-back only: the stages run again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub send_back_to: Vec<String>,
    /// Reminders that had been sent when it was decided.
    #[serde(default)]
    pub reminders_sent: u32,
    /// Whether the wait had been escalated.
    #[serde(default)]
    pub escalated: bool,
}

/// A decision as requested (validated by
/// [`WorkflowRecord::decide_gate`](super::super::WorkflowRecord::decide_gate)).
#[derive(Debug, Clone, PartialEq)]
pub struct GateRequest {
    /// What to do.
    pub action: GateAction,
    /// Who decides.
    pub decided_by: String,
    /// Why (required to reject or send back).
    pub rationale: String,
    /// Send-back: stages to run again (default: the gate's dependencies).
    pub send_back_to: Vec<String>,
}
