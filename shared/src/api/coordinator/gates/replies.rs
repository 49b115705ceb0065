//! The replies of `gate_decide`, `gate_review` and `rerun`: what a decision,
//! a review or a re-run did, with the workflow as it is now.

use serde::{Deserialize, Serialize};

use crate::api::facilitator;

use super::super::status::WorkflowView;
use super::{GateAction, GateDecision};

/// What a decision did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateDecideReply {
    /// The workflow.
    pub workflow_id: String,
    /// The gate decided.
    pub gate: String,
    /// What was decided.
    pub action: GateAction,
    /// The decision as recorded.
    pub decision: Option<GateDecision>,
    /// Tasks that became ready.
    pub newly_ready: Vec<String>,
    /// Tasks that run again (a send-back).
    pub renewed: Vec<String>,
    /// The workflow after the decision (as `coordinator.status` shows one).
    pub workflow: WorkflowView,
    /// Whether the decision is stored (false: kept in memory, retried).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persisted: Option<bool>,
}

/// What a review did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateReviewReply {
    /// `facilitator.gate_review`'s answer.
    pub facilitator: facilitator::GateReviewReply,
    /// The re-run it started or the assumption it settled, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun: Option<RerunReply>,
}

/// What a re-run renewed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerunReply {
    /// The workflow.
    pub workflow_id: String,
    /// The new re-run's id.
    pub rerun_id: String,
    /// Tasks renewed (they run again).
    pub renewed: Vec<String>,
    /// Listed tasks that had not run yet (they run once, with the new
    /// inputs).
    pub not_yet_run: Vec<String>,
    /// Tasks that became ready now.
    pub newly_ready: Vec<String>,
    /// The workflow after the re-run (as `coordinator.status` shows one).
    pub workflow: WorkflowView,
    /// Whether the re-run is stored (false: kept in memory, retried).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persisted: Option<bool>,
}
