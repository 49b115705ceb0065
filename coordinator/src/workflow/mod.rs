//! The durable record of one workflow (one item through one pipeline) and
//! the pure rules that move it forward. The runtime keeps these in memory,
//! persists them to the `workflows` KV bucket with revision checks, and
//! turns the returned effects into NATS publishes.

mod build;
mod end;
mod gate;
mod hooks;
mod level_review;
mod level_review_output;
mod pause;
mod record;
mod resume;
mod tiers;
mod transitions;
pub(crate) mod ts;

pub use build::{instantiate, StageDef, StageKind, StageLists, StageRetry};
pub use gate::{
    GateAction, GateDecision, GateError, GateNotice, GateOutcome, GateRequest, GateState,
    GateTimers, RerunEstimate, RerunOutcome, RerunRecord, RerunRequest, GATE_AGENT,
};
pub(crate) use hooks::{Promotion, RecordHook};
pub(crate) use level_review::LevelReviewHook;
pub use level_review::{
    detect_conflicts, is_review_stage, modified_resources, needs_review, review_key, stage_levels,
    Conflict, LevelContext, LevelOutcome, LevelReviewMode, LevelReviewPolicy, LevelReviewState,
    TaskSummary,
};
pub use level_review_output::{normalise as normalise_review, LevelReview, ReviewedConflict};
pub use pause::{IllegalTransition, PauseInfo, PauseOutcome, PauseSpec};
pub use record::{
    TaskRecord, TaskRunState, WorkflowFlag, WorkflowRecord, WorkflowState, WORKFLOW_SCHEMA_VERSION,
};
pub use resume::{
    checkpoint_id, resolve, Checkpoint, CompletedTask, FailedTask, InFlightPolicy, InFlightTask,
    ResumeError, CHECKPOINT_SCHEMA_VERSION,
};
pub use tiers::{Classification, FailureFacts, Tier, TierRules};
pub use transitions::{EventOutcome, RetryDecision};

#[cfg(test)]
mod gate_tests;
#[cfg(test)]
mod level_review_tests;
#[cfg(test)]
mod pause_tests;
