//! Workflow and task records as stored in JetStream KV.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use caucus_shared::task::TaskError;

use super::gate::{GateState, RerunRecord};
use super::{LevelReviewState, PauseInfo, StageDef};

/// Version of the stored record.
pub const WORKFLOW_SCHEMA_VERSION: u32 = 1;

/// Lifecycle of a workflow.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
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
    /// A task failed beyond its retry policy.
    Failed,
}

impl WorkflowState {
    /// The status-API spelling.
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

    /// Parses the status-API spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => WorkflowState::Pending,
            "running" => WorkflowState::Running,
            "pausing" => WorkflowState::Pausing,
            "paused" => WorkflowState::Paused,
            "resuming" => WorkflowState::Resuming,
            "completed" => WorkflowState::Completed,
            "failed" => WorkflowState::Failed,
            _ => return None,
        })
    }

    /// Completed or failed.
    pub fn is_terminal(self) -> bool {
        matches!(self, WorkflowState::Completed | WorkflowState::Failed)
    }

    /// Whether its ready tasks may be dispatched.
    pub fn accepts_dispatch(self) -> bool {
        matches!(
            self,
            WorkflowState::Pending | WorkflowState::Running | WorkflowState::Resuming
        )
    }
}

impl std::fmt::Display for WorkflowState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where one task is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum TaskRunState {
    /// Dependencies not complete yet.
    Waiting,
    /// Dependencies complete; queued for dispatch.
    Ready,
    /// Published to the work queue; no worker has started it yet.
    Dispatched,
    /// A worker reported `started`.
    Running,
    /// Finished with an output (recorded once).
    Completed,
    /// Failed beyond its retry policy.
    Failed,
    /// A human gate waiting for a person's decision (never dispatched).
    AwaitingApproval,
}

impl TaskRunState {
    /// Dispatched or running: a worker holds (or is about to hold) it.
    pub fn is_in_flight(self) -> bool {
        matches!(self, TaskRunState::Dispatched | TaskRunState::Running)
    }
}

/// One task of a workflow.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskRecord {
    /// Stage name.
    pub stage: String,
    /// Agent type that runs it.
    pub agent_type: String,
    /// Fan-out shard, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u32>,
    /// Where it is.
    pub state: TaskRunState,
    /// Current attempt (0 before the first dispatch).
    pub attempt: u32,
    /// Longest remaining path to the end of the workflow (time units).
    pub priority: f64,
    /// Worker that ran the current attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    /// When the current attempt joined its agent type's ready queue (the
    /// start of its queue wait; metrics and the dispatch span use it).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::ts::option"
    )]
    pub ready_at: Option<DateTime<Utc>>,
    /// When the current attempt was dispatched.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::ts::option"
    )]
    pub dispatched_at: Option<DateTime<Utc>>,
    /// When the current attempt started on a worker.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::ts::option"
    )]
    pub started_at: Option<DateTime<Utc>>,
    /// When it finished.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::ts::option"
    )]
    pub finished_at: Option<DateTime<Utc>>,
    /// Not before this time (retry backoff).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::ts::option"
    )]
    pub not_before: Option<DateTime<Utc>>,
    /// The result (left out of the stored record when `output_key` is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// Key of the output in the `task_outputs` bucket when it was too large
    /// to keep inline (`coordinator.inline_output_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_key: Option<String>,
    /// The last error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TaskError>,
    /// Ran longer than its expected duration.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub overdue: bool,
    /// Attempts used before the last resume restarted it; the retry policy
    /// counts attempts above this.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub attempt_base: u32,
    /// Failed attempts per `error_type`, across resumes (tier rules use it
    /// to spot a repeated permanent error).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failure_counts: BTreeMap<String, u32>,
    /// Gate stages only: when it opened, reminders, the decision (boxed:
    /// every other task carries just the empty pointer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<Box<GateState>>,
    /// The output a re-run replaced (the latest one), kept for comparison.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_output: Option<Value>,
    /// Key of `previous_output` in the `task_outputs` bucket, if spilled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_output_key: Option<String>,
    /// Held back by a serial re-run plan until the previous step finishes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
}

impl TaskRecord {
    /// A task that has not run yet, in `state` (ready or waiting).
    pub fn new(
        stage: String,
        agent_type: String,
        shard: Option<u32>,
        state: TaskRunState,
        priority: f64,
    ) -> TaskRecord {
        TaskRecord {
            stage,
            agent_type,
            shard,
            state,
            attempt: 0,
            priority,
            worker_id: None,
            ready_at: None,
            dispatched_at: None,
            started_at: None,
            finished_at: None,
            not_before: None,
            output: None,
            error: None,
            overdue: false,
            attempt_base: 0,
            failure_counts: BTreeMap::new(),
            gate: None,
            previous_output: None,
            previous_output_key: None,
            output_key: None,
            held: false,
        }
    }

    /// Starts the task over as a new attempt, waiting for its dependencies:
    /// the old attempt's late events become stale and the next dispatch
    /// gets a fresh de-duplication id. Attempts so far no longer count
    /// against the retry policy.
    pub fn new_attempt(&mut self) {
        self.attempt_base = self.attempt;
        self.attempt += 1;
        self.state = TaskRunState::Waiting;
        self.worker_id = None;
        self.ready_at = None;
        self.dispatched_at = None;
        self.started_at = None;
        self.finished_at = None;
        self.not_before = None;
        self.overdue = false;
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One item through one pipeline.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkflowRecord {
    /// Stored-record version.
    pub schema_version: u32,
    /// Workflow id (UUID v7).
    pub workflow_id: String,
    /// The item analysed.
    pub item: String,
    /// Pipeline name.
    pub pipeline: String,
    /// Lifecycle state.
    pub state: WorkflowState,
    /// The stages as instantiated (kept so a restarted coordinator needs
    /// nothing but this record).
    /// Shared by the workflows of one submission (read-only but for
    /// copy-on-write when a level review adds its stage).
    pub stages: std::sync::Arc<Vec<StageDef>>,
    /// Tasks by key (`stage` or `stage#shard`).
    pub tasks: BTreeMap<String, TaskRecord>,
    /// Milliseconds of wall time per pipeline time unit.
    pub unit_ms: u64,
    /// Submission time.
    #[serde(serialize_with = "super::ts::serialize")]
    pub created_at: DateTime<Utc>,
    /// Last change.
    #[serde(serialize_with = "super::ts::serialize")]
    pub updated_at: DateTime<Utc>,
    /// When it completed or failed.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "super::ts::option"
    )]
    pub finished_at: Option<DateTime<Utc>>,
    /// Why it failed (or, for a tier-2/3 pause, which task failed how).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The current pause, while pausing or paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<PauseInfo>,
    /// Pauses so far (numbers checkpoints and alert ids).
    #[serde(default)]
    pub pause_count: u32,
    /// The level review gate: settings and per-level outcomes (absent on
    /// records from before reviews existed: no gate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level_review: Option<LevelReviewState>,
    /// Assumptions settled by debates or by a person at a gate; every task
    /// dispatched from now on gets them as `inputs.resolved_assumptions`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resolved_assumptions: BTreeMap<String, Value>,
    /// Re-runs requested (gate send-back, override impact), oldest first;
    /// the last one may still be in progress.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reruns: Vec<RerunRecord>,
    /// Gates approve themselves when nothing needs review (submit option).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto_approve_gates: bool,
    /// Phases, gates, streams and audit trail of a research pipeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub research: Option<crate::research::ResearchState>,
    /// Reasons to re-evaluate it (e.g. a regime change while it ran); the
    /// workflow carries on regardless.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<WorkflowFlag>,
    /// Fencing epoch of the coordinator tenure that last wrote it (0 before
    /// any leader wrote it). A leader that finds a higher epoch here was
    /// deposed and steps down (docs/RELIABILITY.md).
    #[serde(default)]
    pub epoch: u64,
    /// W3C `traceparent` of the workflow's root span (`submit`, or
    /// `workflow` for one created otherwise): every later span of the
    /// workflow (dispatches, gates) is its child, on any coordinator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_parent: Option<String>,
    /// W3C `tracestate` that came with [`WorkflowRecord::trace_parent`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_state: Option<String>,
}

/// A note that a workflow may need re-evaluation.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WorkflowFlag {
    /// What happened, e.g. `regime_change`, `rate_announcement`.
    pub kind: String,
    /// When it was flagged.
    pub at: DateTime<Utc>,
    /// The event (broadcast id, sender, regimes, confidence, …).
    pub detail: Value,
}

impl WorkflowRecord {
    /// Task id as used on the wire: `<workflow_id>/<task key>`.
    pub fn task_id(&self, key: &str) -> String {
        format!("{}/{key}", self.workflow_id)
    }

    /// Adds `flag` unless the same event (`detail.id`) flagged it already;
    /// true when added.
    pub fn add_flag(&mut self, flag: WorkflowFlag) -> bool {
        let id = flag.detail.get("id");
        if id.is_some() && self.flags.iter().any(|f| f.detail.get("id") == id) {
            return false;
        }
        self.flags.push(flag);
        true
    }

    /// Counts of tasks per state.
    pub fn progress(&self) -> (usize, usize) {
        let done = self
            .tasks
            .values()
            .filter(|t| t.state == TaskRunState::Completed)
            .count();
        (done, self.tasks.len())
    }
}
