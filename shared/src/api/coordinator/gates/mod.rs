//! `gates`, `gate`, `gate_decide`, `gate_review`, `rerun`: human gates and
//! their decision packages (docs/GATES.md).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::facilitator::{Analysis, Side};
use crate::api::{
    Operation, OperationDoc, CODE_NOT_FOUND, CODE_NO_RESPONDERS, CODE_STANDBY, CODE_TIMEOUT,
};
use crate::messages::Position;

mod package;
mod records;
mod replies;

pub use package::{DecisionPackage, FindingSource, LateFindingView, PackageFinding, PackageTask};
pub use records::{GateAction, GateDecision, RerunEstimate, RerunRecord};
pub use replies::{GateDecideReply, GateReviewReply, RerunReply};

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[
    OperationDoc::of::<Gates>(),
    OperationDoc::of::<Gate>(),
    OperationDoc::of::<GateDecide>(),
    OperationDoc::of::<GateReview>(),
    OperationDoc::of::<Rerun>(),
];

/// A coordinator that cannot lead (Redis or leadership lost) answers
/// leader-only operations with this code.
const UNAVAILABLE: &str = "unavailable";

/// `coordinator.gates`: open gates, oldest first.
#[derive(Debug, Clone, Copy)]
pub struct Gates;

impl Operation for Gates {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "gates";
    const SUMMARY: &'static str = "open human gates, oldest first (see GATES.md)";
    const ERRORS: &'static [&'static str] = &[CODE_STANDBY, UNAVAILABLE, CODE_TIMEOUT];
    type Request = GatesRequest;
    type Reply = GatesReply;
}

/// `coordinator.gates`'s filters and page.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatesRequest {
    /// Only gates of this workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// Only gates of this item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    /// Gates per page (default 200, at most 1,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// The `next_cursor` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// One page of open gates.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GatesReply {
    /// Open gates matching the filters, all pages together.
    pub count: usize,
    /// This page's gates, oldest first.
    pub gates: Vec<OpenGate>,
    /// The cursor of the next page, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// One open gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenGate {
    /// The workflow.
    pub workflow_id: String,
    /// The item it analyses.
    pub item: String,
    /// Its pipeline.
    pub pipeline: String,
    /// The gate's task key.
    pub gate: String,
    /// When it opened.
    pub opened_at: Option<DateTime<Utc>>,
    /// Milliseconds it has been waiting.
    pub waiting_ms: Option<i64>,
    /// Reminders sent since it opened.
    pub reminders_sent: u32,
    /// Whether the wait was escalated.
    pub escalated: bool,
    /// How many times it sent the work back.
    pub sent_back: usize,
    /// Tasks upstream of it running again (approval waits for them).
    pub pending_upstream: Vec<String>,
}

/// `coordinator.gate`: the decision package of a workflow's open gate.
#[derive(Debug, Clone, Copy)]
pub struct Gate;

impl Operation for Gate {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "gate";
    const SUMMARY: &'static str = "a gate's decision package";
    const ERRORS: &'static [&'static str] = &[
        CODE_NOT_FOUND,
        "no_open_gate",
        "ambiguous_gate",
        CODE_STANDBY,
        UNAVAILABLE,
        CODE_TIMEOUT,
    ];
    type Request = GateRequest;
    type Reply = DecisionPackage;
}

/// Which gate's package.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateRequest {
    /// The workflow.
    pub workflow_id: String,
    /// The gate (optional when only one is open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
}

/// `coordinator.gate_decide`: approve, reject or send back at a gate.
#[derive(Debug, Clone, Copy)]
pub struct GateDecide;

impl Operation for GateDecide {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "gate_decide";
    const MUTATES: bool = true;
    const ACTOR_FIELD: Option<&'static str> = Some("reviewer");
    const SUMMARY: &'static str = "approve / reject / send back at a gate";
    const ERRORS: &'static [&'static str] = &[
        CODE_NOT_FOUND,
        "no_open_gate",
        "ambiguous_gate",
        "workflow_finished",
        "workflow_not_running",
        "reruns_pending",
        "provisional_unreviewed",
        "facilitator_unavailable",
        CODE_STANDBY,
        UNAVAILABLE,
        CODE_TIMEOUT,
    ];
    type Request = GateDecideRequest;
    type Reply = GateDecideReply;
}

/// A decision at a gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateDecideRequest {
    /// The workflow.
    pub workflow_id: String,
    /// The gate (optional when only one is open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<String>,
    /// What to do.
    pub action: GateAction,
    /// Who decides.
    pub reviewer: String,
    /// Why (required to reject or send back).
    #[serde(default)]
    pub rationale: String,
    /// Send-back: stages to run again (default: the gate's dependencies).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub send_back_to: Vec<String>,
}

/// `coordinator.gate_review`: a level-5 review of one of a workflow's
/// debates; an override whose impact requires it re-runs the affected
/// tasks.
#[derive(Debug, Clone, Copy)]
pub struct GateReview;

impl Operation for GateReview {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "gate_review";
    const MUTATES: bool = true;
    const ACTOR_FIELD: Option<&'static str> = Some("reviewer");
    const SUMMARY: &'static str = "confirm / override / re-debate a provisional decision of a workflow; an override re-runs the affected tasks";
    const ERRORS: &'static [&'static str] = &[
        CODE_NOT_FOUND,
        "not_allowed",
        "wrong_state",
        "conflict",
        "store_unavailable",
        "workflow_finished",
        "workflow_not_running",
        CODE_STANDBY,
        UNAVAILABLE,
        CODE_NO_RESPONDERS,
        CODE_TIMEOUT,
    ];
    type Request = GateReviewRequest;
    type Reply = GateReviewReply;
}

/// A review of a debate of the workflow, forwarded to
/// `facilitator.gate_review` (all but `workflow_id`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateReviewRequest {
    /// The workflow whose gate the review is made at.
    pub workflow_id: String,
    /// The debate reviewed.
    pub debate_id: String,
    /// `confirm`, `override` or `redebate`.
    pub action: String,
    /// Who reviews.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reviewer: Option<String>,
    /// Override: the side whose position applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side: Option<Side>,
    /// Override: the reviewer's own position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<Position>,
    /// Why (required to override).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// Re-debate: the context the new debate should weigh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// Override: the downstream analyses for the impact report (default:
    /// the workflow's, from its stages' `params.impact`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub analyses: Option<Vec<Analysis>>,
    /// Override only: compute the facilitator's impact report and return
    /// it in `facilitator.impact` without changing the debate or the
    /// workflow (nothing stored, no re-run); the person sees the
    /// downstream impact before committing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// `coordinator.rerun`: run tasks of a workflow again.
#[derive(Debug, Clone, Copy)]
pub struct Rerun;

impl Operation for Rerun {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "rerun";
    const MUTATES: bool = true;
    const ACTOR_FIELD: Option<&'static str> = Some("requested_by");
    const SUMMARY: &'static str = "run tasks of a workflow again (serial or parallel groups)";
    const ERRORS: &'static [&'static str] = &[
        CODE_NOT_FOUND,
        "workflow_finished",
        "workflow_not_running",
        CODE_STANDBY,
        UNAVAILABLE,
        CODE_TIMEOUT,
    ];
    type Request = RerunRequest;
    type Reply = RerunReply;
}

/// A re-run: `tasks` first, then each of `groups`, each group after the
/// last completed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RerunRequest {
    /// The workflow.
    pub workflow_id: String,
    /// Task keys or stage names run first, together.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<String>,
    /// Further groups of task keys or stage names, one after another.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<Vec<String>>,
    /// Why (required).
    pub reason: String,
    /// Who asks (default `api`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_by: Option<String>,
    /// Assumptions to settle for every task dispatched from now on
    /// (metric → value).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub assumptions: BTreeMap<String, Value>,
}
