//! `debates`, `debate`, `expert_load`, `decide`: debates and the experts' queues.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::record::{DebateRecord, DebateSummary};
use super::resolution::ResolutionRecord;
use super::side::Side;
use super::SERVICE;
use crate::api::server::OffsetPage;
use crate::api::{ApiError, Empty, Operation, OperationDoc, CODE_NOT_FOUND};
use crate::messages::Position;

/// The debates store (KV) failed.
pub const CODE_STORE_UNAVAILABLE: &str = "store_unavailable";
/// A revision-checked write kept losing to concurrent writers.
pub const CODE_CONFLICT: &str = "conflict";
/// Redis or NATS failed.
pub const CODE_UNAVAILABLE: &str = "unavailable";
/// The sender may not send this message in this debate.
pub const CODE_NOT_ALLOWED: &str = "not_allowed";
/// The message or decision does not fit the debate's current state.
pub const CODE_WRONG_STATE: &str = "wrong_state";

/// Codes of a transition of a stored debate (decide, gate review, message).
pub(super) const TRANSITION_ERRORS: &[&str] = &[
    CODE_NOT_FOUND,
    CODE_NOT_ALLOWED,
    CODE_WRONG_STATE,
    CODE_CONFLICT,
    CODE_STORE_UNAVAILABLE,
];

/// `facilitator.debates`: debates, open ones first by priority class then
/// arrival, one page at a time.
pub struct Debates;

impl Operation for Debates {
    const SERVICE: &'static str = SERVICE;
    const NAME: &'static str = "debates";
    const SUMMARY: &'static str = "debates and provisional decisions";
    const ERRORS: &'static [&'static str] = &[CODE_STORE_UNAVAILABLE];
    type Request = DebatesRequest;
    type Reply = DebatesReply;
}

/// Filters (all optional) and the page of `facilitator.debates`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DebatesRequest {
    /// Only this state, e.g. `awaiting_human`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Only this level (1..=5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<u8>,
    /// Only this workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// Only this item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    /// Debates per page (default [`DebatesRequest::DEFAULT_LIMIT`], at most
    /// [`DebatesRequest::MAX_LIMIT`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// Where the page starts: the `next_cursor` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

impl DebatesRequest {
    /// Debates per page unless `limit` says otherwise.
    pub const DEFAULT_LIMIT: usize = 200;
    /// The largest page (a debate summary is well under 1 KiB, so a page
    /// stays far below NATS's 1 MiB `max_payload`).
    pub const MAX_LIMIT: usize = 500;

    /// The page asked for (`bad_request` on a bad cursor).
    pub fn page(&self) -> Result<OffsetPage, ApiError> {
        OffsetPage::of(
            self.limit,
            self.cursor.as_deref(),
            Self::DEFAULT_LIMIT,
            Self::MAX_LIMIT,
        )
    }
}

/// One page of `facilitator.debates`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebatesReply {
    /// The debates of this page.
    pub debates: Vec<DebateSummary>,
    /// Debates matching the filters, over all pages.
    pub total: usize,
    /// The `cursor` of the next page; absent on the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `facilitator.debate`: one debate in full.
pub struct GetDebate;

impl Operation for GetDebate {
    const SERVICE: &'static str = SERVICE;
    const NAME: &'static str = "debate";
    const SUMMARY: &'static str =
        "one debate as stored, with the metric it is about (see DEBATES.md)";
    const ERRORS: &'static [&'static str] = &[CODE_NOT_FOUND, CODE_STORE_UNAVAILABLE];
    type Request = DebateRequest;
    type Reply = DebateReply;
}

/// Which debate `facilitator.debate` returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DebateRequest {
    /// The debate.
    pub debate_id: String,
}

/// The stored debate and what it is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebateReply {
    /// The debate, field for field as stored.
    #[serde(flatten)]
    pub debate: DebateRecord,
    /// The metric it is about, by the one shared rule
    /// ([`crate::messages::debate_metric`]); callers read this rather than
    /// deciding again. Null when nothing names one.
    pub metric: Option<String>,
}

/// `facilitator.expert_load`: each expert's open debates against the cap.
pub struct ExpertLoad;

impl Operation for ExpertLoad {
    const SERVICE: &'static str = SERVICE;
    const NAME: &'static str = "expert_load";
    const SUMMARY: &'static str = "per-expert debate load (e.g. 2/3)";
    const ERRORS: &'static [&'static str] = &[CODE_UNAVAILABLE];
    type Request = Empty;
    type Reply = ExpertLoadReply;
}

/// Expert → `"<debates held>/<cap>"`, e.g. `"2/3"`.
pub type ExpertLoadReply = BTreeMap<String, String>;

/// `facilitator.decide`: an expert's level-3 decision.
pub struct Decide;

impl Operation for Decide {
    const SERVICE: &'static str = SERVICE;
    const NAME: &'static str = "decide";
    const MUTATES: bool = true;
    const ACTOR_FIELD: Option<&'static str> = Some("expert");
    const SUMMARY: &'static str = "an expert's level-3 decision (see DEBATES.md)";
    const ERRORS: &'static [&'static str] = TRANSITION_ERRORS;
    type Request = DecideRequest;
    type Reply = DecideReply;
}

/// A level-3 decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecideRequest {
    /// The debate.
    pub debate_id: String,
    /// Who decides.
    pub expert: String,
    /// Winning side (or `position`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side: Option<Side>,
    /// The expert's own position (wins over `side`'s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<Position>,
    /// Why.
    #[serde(default)]
    pub rationale: String,
    /// The expert cannot take it: the conservative default applies.
    #[serde(default)]
    pub unavailable: bool,
}

/// The debate after a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecideReply {
    /// The debate's summary.
    pub debate: DebateSummary,
    /// Its resolution (null while none).
    pub resolution: Option<ResolutionRecord>,
}

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[
    OperationDoc::of::<Debates>(),
    OperationDoc::of::<GetDebate>(),
    OperationDoc::of::<ExpertLoad>(),
    OperationDoc::of::<Decide>(),
];
