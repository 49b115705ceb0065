//! `provisional`, `gate_review`: provisional decisions and their review.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::debates::{CODE_STORE_UNAVAILABLE, TRANSITION_ERRORS};
use super::impact::Analysis;
use super::record::DebateSummary;
use super::resolution::{GateAction, OverrideImpact, ResolutionRecord};
use super::SERVICE;
use crate::api::{Operation, OperationDoc};
use crate::messages::Position;

/// `facilitator.provisional`: provisional decisions awaiting their gate.
pub struct Provisional;

impl Operation for Provisional {
    const SERVICE: &'static str = SERVICE;
    const NAME: &'static str = "provisional";
    const SUMMARY: &'static str =
        "provisional decisions awaiting review, oldest first (see DEBATES.md)";
    const ERRORS: &'static [&'static str] = &[CODE_STORE_UNAVAILABLE];
    type Request = ProvisionalRequest;
    type Reply = ProvisionalReply;
}

/// Filters of `facilitator.provisional`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvisionalRequest {
    /// Only this workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// Only this item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
}

/// The provisional decisions and a sentence for people.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProvisionalReply {
    /// How many.
    pub count: usize,
    /// E.g. `2 provisional decisions require review`.
    pub message: String,
    /// One per provisional debate, oldest first.
    pub decisions: Vec<ProvisionalDecision>,
}

/// One provisional decision, as a gate presents it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProvisionalDecision {
    /// The debate.
    pub debate_id: String,
    /// The disputed finding.
    pub topic: String,
    /// Its workflow (null when none).
    pub workflow_id: Option<String>,
    /// Its item (null when none).
    pub item: Option<String>,
    /// The resolution's label, e.g. `provisional - conservative default`.
    pub label: Option<String>,
    /// The position applied until review.
    pub conservative_position: Option<Position>,
    /// Positions considered but not applied.
    #[serde(default)]
    pub alternatives: Vec<Position>,
    /// Why the conservative position was chosen.
    pub rationale: Option<String>,
    /// The branch of the decision rule, e.g. `lowest:operating_margin`.
    pub rule: Option<String>,
    /// When the override window closes.
    pub override_window_deadline: Option<DateTime<Utc>>,
    /// Analyses that use the provisional assumption.
    #[serde(default)]
    pub downstream_dependencies: Vec<String>,
    /// Agent → its current position (null when it stated none).
    #[serde(default)]
    pub positions: BTreeMap<String, Option<Position>>,
    /// Agent → its level-2 credibility (null when not computed); null when
    /// the debate never reached level 2.
    pub credibility: Option<BTreeMap<String, Option<BriefScore>>>,
}

/// An agent's credibility in a provisional decision.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BriefScore {
    /// Comprehensive credibility, 0..=1.
    pub score: f64,
    /// Half-width of its Wilson interval.
    pub ci: f64,
    /// Records in similar context.
    pub data_points: u64,
}

/// `facilitator.gate_review`: a gate's level-5 action.
pub struct GateReview;

impl Operation for GateReview {
    const SERVICE: &'static str = SERVICE;
    const NAME: &'static str = "gate_review";
    const MUTATES: bool = true;
    const ACTOR_FIELD: Option<&'static str> = Some("reviewer");
    const SUMMARY: &'static str = "confirm / override / re-debate a provisional decision";
    const ERRORS: &'static [&'static str] = TRANSITION_ERRORS;
    type Request = GateReviewRequest;
    type Reply = GateReviewReply;
}

/// A level-5 action on a provisional debate. Unknown fields are not denied:
/// the action's fields are flattened in, which serde cannot check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateReviewRequest {
    /// The provisional debate.
    pub debate_id: String,
    /// `confirm`, `override` (with `rationale` and `side` or `position`) or
    /// `redebate` (with `context`), plus `reviewer`.
    #[serde(flatten)]
    pub action: GateAction,
    /// Downstream analyses for the impact report (override only); without
    /// them the provisional decision's downstream dependencies are flagged
    /// for review.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub analyses: Vec<Analysis>,
    /// Override only: return the impact report the override would make,
    /// changing nothing (the debate stays provisional, nothing is stored
    /// or published); any other action with it is a `bad_request`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// The debate after a gate review.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateReviewReply {
    /// The debate's summary.
    pub debate: DebateSummary,
    /// Its final resolution.
    pub resolution: Option<ResolutionRecord>,
    /// The override's downstream impact (null unless overridden).
    pub impact: Option<OverrideImpact>,
    /// The debate a re-debate opens (null unless re-debated).
    pub redebate_id: Option<String>,
}

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[
    OperationDoc::of::<Provisional>(),
    OperationDoc::of::<GateReview>(),
];
