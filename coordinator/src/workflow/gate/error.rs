//! Why a gate decision or a re-run was refused.

use super::super::WorkflowState;

/// Why a gate decision or a re-run was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GateError {
    /// No gate is open in this workflow (or none with that name).
    #[error("no open gate{} in workflow {workflow_id}", .gate.as_ref().map(|g| format!(" `{g}`")).unwrap_or_default())]
    NoOpenGate {
        /// The workflow.
        workflow_id: String,
        /// The gate asked for.
        gate: Option<String>,
    },
    /// More than one gate is open; the request must name one.
    #[error("gates {0:?} are open; name one with `gate`")]
    Ambiguous(Vec<String>),
    /// The workflow already completed or failed.
    #[error("workflow {workflow_id} is {state}")]
    Finished {
        /// The workflow.
        workflow_id: String,
        /// Its state.
        state: WorkflowState,
    },
    /// The workflow is pausing, paused or resuming.
    #[error("workflow {workflow_id} is {state}; resume it first")]
    NotRunning {
        /// The workflow.
        workflow_id: String,
        /// Its state.
        state: WorkflowState,
    },
    /// A reason is required for this action.
    #[error("`rationale` is required to {0}")]
    RationaleRequired(&'static str),
    /// A named stage or task does not exist.
    #[error("unknown stage or task `{0}`")]
    Unknown(String),
    /// A send-back target is not upstream of the gate.
    #[error("stage `{stage}` is not upstream of gate `{gate}`")]
    NotUpstream {
        /// The target.
        stage: String,
        /// The gate.
        gate: String,
    },
    /// Work the gate depends on is running again.
    #[error("gate `{gate}` cannot be approved while {pending:?} run again")]
    RerunsPending {
        /// The gate.
        gate: String,
        /// Tasks upstream of it that are not complete.
        pending: Vec<String>,
    },
    /// A re-run plan with no task.
    #[error("the re-run plan names no task")]
    EmptyPlan,
}

impl GateError {
    /// A stable error code for the API.
    pub fn code(&self) -> &'static str {
        match self {
            GateError::NoOpenGate { .. } => "no_open_gate",
            GateError::Ambiguous(_) => "ambiguous_gate",
            GateError::Finished { .. } => "workflow_finished",
            GateError::NotRunning { .. } => "workflow_not_running",
            GateError::RationaleRequired(_) => "bad_request",
            GateError::Unknown(_) => "not_found",
            GateError::NotUpstream { .. } => "bad_request",
            GateError::RerunsPending { .. } => "reruns_pending",
            GateError::EmptyPlan => "bad_request",
        }
    }
}
