//! The durable record of one workflow (one item through one pipeline) and
//! the pure rules that move it forward. The runtime keeps these in memory,
//! persists them to the `workflows` KV bucket with revision checks, and
//! turns the returned effects into NATS publishes.

mod build;
mod record;
mod transitions;

pub use build::{instantiate, StageDef, StageRetry};
pub use record::{
    TaskRecord, TaskRunState, WorkflowRecord, WorkflowState, WORKFLOW_SCHEMA_VERSION,
};
pub use transitions::{EventOutcome, RetryDecision};
