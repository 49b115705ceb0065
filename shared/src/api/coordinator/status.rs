//! `status`: workflows, their tasks and the load per agent type.
//!
//! The views here are what the coordinator shows of its workflow records;
//! the records themselves (and their rules) stay in the coordinator.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::coordinator::gates::RerunRecord;
use crate::api::{Operation, OperationDoc, CODE_STANDBY, CODE_TIMEOUT};
use crate::task::TaskError;

mod level_review;
mod records;
mod research;

pub use level_review::{
    ConflictView, LevelOutcomeView, LevelReviewPolicyView, LevelReviewResultView, LevelReviewView,
    RetryView, ReviewedConflictView,
};
pub use records::{FlagView, GateView, PauseView};
pub use research::{
    RefusedWriteView, ResearchAlertView, ResearchGateView, ResearchView, StreamView,
};

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[OperationDoc::of::<Status>()];

/// `caucus.api.coordinator.status` (the leader answers).
#[derive(Debug, Clone, Copy)]
pub struct Status;

impl Operation for Status {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "status";
    const SUMMARY: &'static str = "workflow state: the workflows named, or a page of those held (`next_cursor`), with the load per agent type";
    const ERRORS: &'static [&'static str] = &[CODE_STANDBY, "unavailable", CODE_TIMEOUT];
    type Request = StatusRequest;
    type Reply = StatusReply;
}

/// The body of `status`: which workflows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusRequest {
    /// Exactly these workflows (held or stored; unknown ids are left
    /// out); empty: a page of the workflows held.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<String>,
    /// Only workflows in these states (`running`, `failed`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub states: Vec<String>,
    /// Include each task (with outputs only when `ids` names the
    /// workflows: a list never inlines outputs).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tasks: bool,
    /// Workflows per list page: default 100, 1 to 1,000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Where a list page starts: a previous reply's `next_cursor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// The reply of `status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusReply {
    /// The workflows (list pages in `(created_at, workflow_id)` order).
    pub workflows: Vec<WorkflowView>,
    /// The `cursor` of the next list page; null on the last page and
    /// always with `ids`.
    pub next_cursor: Option<String>,
    /// Tasks ready and in flight per agent type.
    pub load: BTreeMap<String, AgentLoadView>,
    /// Capacity per agent type as last read from Redis (slots).
    pub capacity: BTreeMap<String, usize>,
    /// Workflows held per state (`running`, …), whatever the filters: the
    /// console's overview shows them without reading every page. Absent
    /// from coordinators that predate it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub counts: BTreeMap<String, usize>,
}

/// The load of one agent type.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentLoadView {
    /// Tasks ready and waiting for capacity.
    pub ready: usize,
    /// Tasks dispatched or running.
    pub in_flight: usize,
    /// How long the oldest ready task has waited (ms).
    pub oldest_wait_ms: i64,
}

/// The lifecycle state of a workflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkflowState {
    /// Created, nothing dispatched yet.
    Pending,
    /// At least one task dispatched.
    Running,
    /// Pause requested; in-flight tasks finishing.
    Pausing,
    /// Paused with a checkpoint.
    Paused,
    /// Resume requested.
    Resuming,
    /// Every task completed.
    Completed,
    /// A task failed beyond its retry policy (or a gate rejected it).
    Failed,
}

impl WorkflowState {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkflowState::Pending => "pending",
            WorkflowState::Running => "running",
            WorkflowState::Pausing => "pausing",
            WorkflowState::Paused => "paused",
            WorkflowState::Resuming => "resuming",
            WorkflowState::Completed => "completed",
            WorkflowState::Failed => "failed",
        }
    }
}

impl std::fmt::Display for WorkflowState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where one task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Dependencies not complete yet.
    Waiting,
    /// Dependencies complete; queued for dispatch.
    Ready,
    /// Published to the work queue; no worker has started it yet.
    Dispatched,
    /// A worker reported `started`.
    Running,
    /// Finished with an output.
    Completed,
    /// Failed beyond its retry policy.
    Failed,
    /// A human gate waiting for a person's decision.
    AwaitingApproval,
}

impl TaskState {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Waiting => "waiting",
            TaskState::Ready => "ready",
            TaskState::Dispatched => "dispatched",
            TaskState::Running => "running",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::AwaitingApproval => "awaiting_approval",
        }
    }
}

impl std::fmt::Display for TaskState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Tasks completed out of all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Tasks completed.
    pub completed: usize,
    /// Tasks in all.
    pub total: usize,
}

/// One workflow as `status` (and the gate operations) show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkflowView {
    /// Its id.
    pub workflow_id: String,
    /// The item analysed.
    pub item: String,
    /// The item as a subject token (`caucus.….<item_token>` subjects).
    pub item_token: String,
    /// The pipeline's name.
    pub pipeline: String,
    /// Its lifecycle state.
    pub state: WorkflowState,
    /// Tasks completed out of all.
    pub progress: Progress,
    /// Keys of tasks running longer than expected.
    pub overdue_tasks: Vec<String>,
    /// When it was submitted.
    pub created_at: DateTime<Utc>,
    /// Its last change.
    pub updated_at: DateTime<Utc>,
    /// When it completed or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    /// Milliseconds from submission to `finished_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_ms: Option<i64>,
    /// Why it failed (or, paused by a failure, which task failed how).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The current pause, while pausing or paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<PauseView>,
    /// Reasons to re-evaluate it (a regime change while it ran, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<FlagView>,
    /// True when `flags` is not empty.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reevaluate: bool,
    /// A research run's phases, streams and gates (docs/RESEARCH.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub research: Option<ResearchView>,
    /// The level review gate's settings and outcomes (docs/LEVEL-REVIEW.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level_review: Option<LevelReviewView>,
    /// Keys of the gates waiting for a person.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_gates: Vec<String>,
    /// Assumptions a review settled, by name; tasks dispatched since get
    /// them as `inputs.resolved_assumptions`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resolved_assumptions: BTreeMap<String, Value>,
    /// Re-runs requested, oldest first (the last may still run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reruns: Vec<RerunRecord>,
    /// Its gates approve themselves when nothing needs review.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto_approve_gates: bool,
    /// Its tasks by key (`stage` or `stage#shard`), when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<BTreeMap<String, TaskView>>,
    /// The tasks' outputs were left out (a list page): ask for the id.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outputs_omitted: bool,
}

impl WorkflowView {
    /// Completed, failed or paused: nothing moves until someone acts.
    pub fn is_settled(&self) -> bool {
        matches!(
            self.state,
            WorkflowState::Completed | WorkflowState::Failed | WorkflowState::Paused
        )
    }
}

/// One task of a workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskView {
    /// Its stage.
    pub stage: String,
    /// The agent type that runs it (`gate` for a human gate).
    pub agent_type: String,
    /// Where it is.
    pub state: TaskState,
    /// The current attempt (0 before the first dispatch).
    pub attempt: u32,
    /// The worker that ran the current attempt.
    pub worker_id: Option<String>,
    /// When the current attempt started on a worker.
    pub started_at: Option<DateTime<Utc>>,
    /// When it finished.
    pub finished_at: Option<DateTime<Utc>>,
    /// It ran longer than its expected duration.
    pub overdue: bool,
    /// The last error.
    pub error: Option<TaskError>,
    /// Its output: absent (`None`) when the reply leaves outputs out
    /// (`outputs_omitted`), null (`Some(Value::Null)`) when it has none yet.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub output: Option<Value>,
    /// A gate's opening, reminders and decisions (null for other tasks).
    pub gate: Option<GateView>,
    /// The output a re-run replaced: absent as `output` is, null when
    /// there is none.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub previous_output: Option<Value>,
}

/// A field that is there, null included (absent is `None` by `default`):
/// a task's `output: null` reads back as it was sent.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}
