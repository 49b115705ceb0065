//! `pause`, `resume`, `batch_pause`, `batch_resume` and `batch_status`
//! (docs/PAUSE-RESUME.md). The leader answers them; the scheduler is the
//! only writer of workflow records.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::status::{PauseView, WorkflowState};
use crate::api::{Operation, OperationDoc, CODE_NOT_FOUND, CODE_STANDBY, CODE_TIMEOUT};
use crate::messages::ResumePlan;

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[
    OperationDoc::of::<Pause>(),
    OperationDoc::of::<Resume>(),
    OperationDoc::of::<BatchPause>(),
    OperationDoc::of::<BatchResume>(),
    OperationDoc::of::<BatchStatus>(),
];

/// Error code of a state change the workflow state machine does not allow.
pub const CODE_ILLEGAL_TRANSITION: &str = "illegal_transition";
/// Error code of a resume plan that contradicts the record.
pub const CODE_INVALID_PLAN: &str = "invalid_plan";
/// Error code of a batch pause into a batch that stopped.
pub const CODE_BATCH_STOPPED: &str = "batch_stopped";

/// Codes every leader-only operation may answer besides its own.
const LEADER: [&str; 3] = [CODE_STANDBY, "unavailable", CODE_TIMEOUT];

/// `coordinator.pause`: pause one workflow.
#[derive(Debug, Clone, Copy)]
pub struct Pause;

impl Operation for Pause {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "pause";
    const MUTATES: bool = true;
    const ACTOR_FIELD: Option<&'static str> = Some("trigger_source");
    const SUMMARY: &'static str = "pause one workflow";
    const ERRORS: &'static [&'static str] = &[
        CODE_NOT_FOUND,
        CODE_ILLEGAL_TRANSITION,
        LEADER[0],
        LEADER[1],
        LEADER[2],
    ];
    type Request = PauseRequest;
    type Reply = PauseReply;
}

/// `coordinator.resume`: resume one workflow (or only compute its plan).
#[derive(Debug, Clone, Copy)]
pub struct Resume;

impl Operation for Resume {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "resume";
    const MUTATES: bool = true;
    const SUMMARY: &'static str = "resume one workflow";
    const ERRORS: &'static [&'static str] = &[
        CODE_NOT_FOUND,
        CODE_ILLEGAL_TRANSITION,
        CODE_INVALID_PLAN,
        LEADER[0],
        LEADER[1],
        LEADER[2],
    ];
    type Request = ResumeRequest;
    type Reply = ResumeReply;
}

/// `coordinator.batch_pause`: pause many workflows as one batch.
#[derive(Debug, Clone, Copy)]
pub struct BatchPause;

impl Operation for BatchPause {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "batch_pause";
    const MUTATES: bool = true;
    const SUMMARY: &'static str = "pause many";
    const ERRORS: &'static [&'static str] = &[CODE_BATCH_STOPPED, LEADER[0], LEADER[1], LEADER[2]];
    type Request = BatchPauseRequest;
    type Reply = BatchStatusReply;
}

/// `coordinator.batch_resume`: resume a batch (or items, as a new batch).
#[derive(Debug, Clone, Copy)]
pub struct BatchResume;

impl Operation for BatchResume {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "batch_resume";
    const MUTATES: bool = true;
    const SUMMARY: &'static str = "resume many";
    const ERRORS: &'static [&'static str] = &[CODE_NOT_FOUND, LEADER[0], LEADER[1], LEADER[2]];
    type Request = BatchResumeRequest;
    type Reply = BatchStatusReply;
}

/// `coordinator.batch_status`: a batch's counts and items.
#[derive(Debug, Clone, Copy)]
pub struct BatchStatus;

impl Operation for BatchStatus {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "batch_status";
    const SUMMARY: &'static str = "`{total, paused, resumed, failed}`";
    const ERRORS: &'static [&'static str] = &[CODE_NOT_FOUND, LEADER[0], LEADER[1], LEADER[2]];
    type Request = BatchStatusRequest;
    type Reply = BatchStatusReply;
}

/// What to do with tasks still in flight on resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InFlightPolicy {
    /// Keep them and wait for their results.
    #[default]
    Wait,
    /// Dispatch them again as a new attempt (late results of the old
    /// attempt are then ignored as stale).
    Restart,
}

/// The `pause` request: a workflow, or an item (its latest workflow).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PauseRequest {
    /// The workflow…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// …or the item (its latest workflow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    /// Why (default "paused by request").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Who asks (default `api`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger_source: Option<String>,
    /// Pause at once; in-flight results are still recorded when they come.
    #[serde(default)]
    pub cancel_in_flight: bool,
}

/// What a pause request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PauseOutcome {
    /// Pausing: in-flight tasks are finishing.
    Pausing,
    /// Paused now.
    Paused,
    /// It was pausing or paused already (the request was merged).
    AlreadyPaused,
}

/// The `pause` reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PauseReply {
    /// The workflow paused.
    pub workflow_id: String,
    /// Its item.
    pub item: String,
    /// Its state now (`pausing` or `paused`).
    pub state: WorkflowState,
    /// What the request did.
    pub outcome: PauseOutcome,
    /// Task keys still in flight.
    pub in_flight: Vec<String>,
    /// The pause as recorded; `null` when the record has none.
    pub pause: Option<PauseView>,
}

/// The `resume` request: a workflow, or an item (its latest workflow).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResumeRequest {
    /// The workflow…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// …or the item (its latest workflow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    /// Only compute and return the plan.
    #[serde(default)]
    pub dry_run: bool,
    /// In-flight tasks: `wait` (default) or `restart`.
    #[serde(default)]
    pub in_flight: InFlightPolicy,
    /// A plan to follow instead of the computed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<ResumePlan>,
    /// Send an alert card when resumed.
    #[serde(default)]
    pub notify: bool,
}

/// The `resume` reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResumeReply {
    /// The workflow.
    pub workflow_id: String,
    /// Its item.
    pub item: String,
    /// Only the plan was computed; nothing changed.
    pub dry_run: bool,
    /// Its state now.
    pub state: WorkflowState,
    /// The checkpoint of the pause; `null` before it was stored.
    pub checkpoint_id: Option<String>,
    /// The plan followed (or that would be).
    pub plan: ResumePlan,
    /// Task keys dispatched again with a new attempt (absent on a dry run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewed: Option<Vec<String>>,
}

/// The `batch_pause` request: items (the latest workflow of each) or
/// workflows by id.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchPauseRequest {
    /// Items: the latest workflow of each is paused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<String>,
    /// Or workflows by id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub workflow_ids: Vec<String>,
    /// Why (default "batch pause requested").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Pauses per wave (default `coordinator.batch_concurrency`, 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// Batch id, 1–200 of `A-Z a-z 0-9 - _ =` (default: a new UUID);
    /// an existing batch gains the new items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
    /// The failure correlation behind it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
}

/// The `batch_resume` request: a batch, or items (their latest paused
/// workflows, as a new batch).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchResumeRequest {
    /// The batch to resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
    /// Or items.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<String>,
    /// Resumed-and-unfinished workflows at once (default
    /// `coordinator.batch_concurrency`, 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_limit: Option<u32>,
    /// In-flight tasks: `wait` (default) or `restart`.
    #[serde(default)]
    pub in_flight: InFlightPolicy,
}

/// The `batch_status` request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchStatusRequest {
    /// The batch.
    pub batch_id: String,
}

/// Where one item of a batch is.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ItemState {
    /// Pause requested; in-flight tasks finishing.
    Pausing,
    /// Paused.
    Paused,
    /// Waiting for its turn to resume.
    ResumeQueued,
    /// Resumed, not finished yet.
    Resuming,
    /// Resumed and completed.
    Resumed,
    /// The pause operation failed (no workflow, illegal transition).
    Failed,
    /// The resume failed: refused, or the workflow paused again or failed.
    ResumeFailed,
    /// Nothing to do (its workflow had already finished).
    Skipped,
}

impl ItemState {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ItemState::Pausing => "pausing",
            ItemState::Paused => "paused",
            ItemState::ResumeQueued => "resume_queued",
            ItemState::Resuming => "resuming",
            ItemState::Resumed => "resumed",
            ItemState::Failed => "failed",
            ItemState::ResumeFailed => "resume_failed",
            ItemState::Skipped => "skipped",
        }
    }
}

/// One item of a batch.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BatchItem {
    /// The item.
    pub item: String,
    /// Its (latest) workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// Where it is.
    pub state: ItemState,
    /// Why it failed or was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When its workflow paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_at: Option<DateTime<Utc>>,
    /// Paused by a human gate time-out (resumed first).
    #[serde(default)]
    pub gate_timeout: bool,
    /// Pause number of the workflow when it was resumed (a later pause
    /// means the resume failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_from_pause: Option<u32>,
}

/// Lifecycle of a batch.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BatchState {
    /// Some items still pausing.
    Pausing,
    /// Every pausable item paused.
    Paused,
    /// Resuming items in order.
    Resuming,
    /// Nothing left to do.
    Completed,
    /// Stopped: too many operations failed.
    Stopped,
}

impl BatchState {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            BatchState::Pausing => "pausing",
            BatchState::Paused => "paused",
            BatchState::Resuming => "resuming",
            BatchState::Completed => "completed",
            BatchState::Stopped => "stopped",
        }
    }
}

/// The reply of `batch_pause`, `batch_resume` and `batch_status`: the
/// batch, its counts and its items.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchStatusReply {
    /// The batch.
    pub batch_id: String,
    /// Its lifecycle state.
    pub state: BatchState,
    /// Why, shown to people.
    pub reason: String,
    /// The failure correlation behind it; `null` when none.
    pub correlation_id: Option<String>,
    /// Items.
    pub total: usize,
    /// Items pausing, paused or waiting to resume.
    pub paused: usize,
    /// Items resumed (running again or completed).
    pub resumed: usize,
    /// Failed pause or resume operations.
    pub failed: usize,
    /// Items with nothing to do.
    pub skipped: usize,
    /// Pauses per wave.
    pub max_concurrency: u32,
    /// Workflows resumed and unfinished at once, at most.
    pub concurrency_limit: u32,
    /// Why it stopped; `null` unless stopped.
    pub stop_reason: Option<String>,
    /// The items, in the order they joined.
    pub items: Vec<BatchItem>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Its last change.
    pub updated_at: DateTime<Utc>,
}
