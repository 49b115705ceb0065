//! The smaller records a workflow view carries: its pause, its flags, a
//! gate's state and the re-runs.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

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
    pub history: Vec<GateDecisionView>,
    /// The final decision (approve or reject).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<GateDecisionView>,
}

/// A decision recorded at a gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateDecisionView {
    /// `approve`, `reject` or `send_back`.
    pub action: String,
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
    /// Reminders sent before it was decided.
    #[serde(default)]
    pub reminders_sent: u32,
    /// Whether the wait had been escalated.
    #[serde(default)]
    pub escalated: bool,
}

/// One re-run (a gate's send-back, an override's impact) and its progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerunView {
    /// `rerun-<n>` within the workflow.
    pub rerun_id: String,
    /// Why.
    pub reason: String,
    /// Who asked (a reviewer, `facilitator`).
    pub requested_by: String,
    /// When.
    pub requested_at: DateTime<Utc>,
    /// Task keys in groups: a group starts once the previous one completed.
    pub groups: Vec<Vec<String>>,
    /// Index of the group running now (`groups.len()` when done).
    pub next_group: usize,
    /// Listed tasks that had not run yet (they run once, with the new
    /// inputs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_yet_run: Vec<String>,
    /// Assumptions it settled.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub assumptions: BTreeMap<String, Value>,
    /// When its last group completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<DateTime<Utc>>,
    /// The impact report's estimates, each with the actual result once
    /// its task ran again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub estimates: Vec<RerunEstimateView>,
}

/// An estimate of a re-run task's result, and the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerunEstimateView {
    /// The task key.
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
