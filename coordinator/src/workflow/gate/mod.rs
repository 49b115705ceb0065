//! Human gates and re-runs: pure rules over a workflow record.
//!
//! A gate stage is a task nobody dispatches. When its dependencies complete
//! it *opens* (`awaiting_approval`) and waits for a person: approve completes
//! it (dependents go on), reject fails the workflow, send-back runs the named
//! upstream stages again and reopens the gate when they finish. A re-run
//! (a gate's send-back, or an override whose downstream impact requires it)
//! renews exactly the listed tasks, in groups: a group starts when the
//! previous one completed, so a serial plan is one task per group.

mod decide;
mod error;
mod estimate;
mod graph;
mod impact;
mod notices;
mod open;
mod progress;
mod rerun;
mod settle;
mod state;
mod trace;

pub use decide::GateOutcome;
pub use error::GateError;
pub use estimate::RerunEstimate;
pub use notices::{GateNotice, GateTimers};
pub use rerun::{RerunOutcome, RerunRecord, RerunRequest};
pub use state::{GateAction, GateDecision, GateRequest, GateState, GATE_AGENT};
