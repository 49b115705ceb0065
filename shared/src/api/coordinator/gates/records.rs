//! What a gate stores and shows: decisions made at it, re-runs and the
//! impact report's estimates beside their actual results. The coordinator
//! keeps its own records; these are how the API states them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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
    /// Every action, in the order a decision package offers them.
    pub const ALL: [GateAction; 3] = [
        GateAction::Approve,
        GateAction::Reject,
        GateAction::SendBack,
    ];

    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            GateAction::Approve => "approve",
            GateAction::Reject => "reject",
            GateAction::SendBack => "send_back",
        }
    }
}

/// A decision recorded at a gate.
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

/// One re-run of a workflow's tasks and its progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerunRecord {
    /// `rerun-<n>` within the workflow.
    pub rerun_id: String,
    /// Why (e.g. `gate review of debate D-1 by alice: override`).
    pub reason: String,
    /// Who asked (a reviewer, `facilitator`, `api`).
    pub requested_by: String,
    /// When.
    pub requested_at: DateTime<Utc>,
    /// Task keys in order: a group starts once the previous one completed.
    pub groups: Vec<Vec<String>>,
    /// Index of the group running now (`groups.len()` when done).
    pub next_group: usize,
    /// Listed tasks that had not run yet: they run once, with the new inputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_yet_run: Vec<String>,
    /// Assumptions it settled (metric → value, merged into the workflow's).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub assumptions: BTreeMap<String, Value>,
    /// When the last group completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<DateTime<Utc>>,
    /// The impact report's estimates of the re-run tasks' results, each
    /// with the actual result once its task ran again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub estimates: Vec<RerunEstimate>,
}

/// An impact report's estimate of what a re-run task will produce, and
/// what it did produce.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerunEstimate {
    /// The task key (the impact report's `analysis_id`).
    pub task: String,
    /// What it produces, e.g. `target_price`.
    pub output_metric: String,
    /// Its result before the re-run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<f64>,
    /// The estimated result.
    pub estimate: f64,
    /// How it was estimated, e.g. `linear sensitivity`.
    pub estimate_method: String,
    /// The re-run's result, rounded to 2 decimals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual: Option<f64>,
    /// `actual − estimate`, rounded to 2 decimals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<f64>,
}
