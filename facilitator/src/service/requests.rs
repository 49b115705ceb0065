//! Bodies of the `facilitator.*` API operations.

use caucus_shared::messages::Position;
use caucus_shared::nats::api::OffsetPage;
use caucus_shared::nats::ApiError;
use serde::{Deserialize, Serialize};

use crate::credibility::{Context, TrackRecord};
use crate::debate::GateAction;
use crate::impact::Analysis;
use crate::side::Side;

/// `facilitator.debates`: filters (all optional).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListRequest {
    /// Only this state, e.g. `awaiting_human`.
    #[serde(default)]
    pub state: Option<String>,
    /// Only this level.
    #[serde(default)]
    pub level: Option<u8>,
    /// Only this workflow.
    #[serde(default)]
    pub workflow_id: Option<String>,
    /// Only this item.
    #[serde(default)]
    pub item: Option<String>,
    /// Debates per page (default [`ListRequest::DEFAULT_LIMIT`], at most
    /// [`ListRequest::MAX_LIMIT`]).
    #[serde(default)]
    pub limit: Option<usize>,
    /// Where the page starts: the `next_cursor` of the previous page.
    #[serde(default)]
    pub cursor: Option<String>,
}

impl ListRequest {
    /// Debates per page unless `limit` says otherwise.
    pub const DEFAULT_LIMIT: usize = 200;
    /// The largest page (a debate summary is well under 1 KiB, so a page
    /// stays far below NATS's 1 MiB `max_payload`).
    pub const MAX_LIMIT: usize = 500;

    /// The page asked for.
    pub fn page(&self) -> Result<OffsetPage, ApiError> {
        OffsetPage::of(
            self.limit,
            self.cursor.as_deref(),
            Self::DEFAULT_LIMIT,
            Self::MAX_LIMIT,
        )
    }
}

/// `facilitator.debate`: one debate in full.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetRequest {
    /// The debate.
    pub debate_id: String,
}

/// `facilitator.decide`: a level-3 decision.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecideRequest {
    /// The debate.
    pub debate_id: String,
    /// Who decides.
    pub expert: String,
    /// Winning side (or `position`).
    #[serde(default)]
    pub side: Option<Side>,
    /// The expert's own position.
    #[serde(default)]
    pub position: Option<Position>,
    /// Why.
    #[serde(default)]
    pub rationale: String,
    /// The expert cannot take it: conservative default.
    #[serde(default)]
    pub unavailable: bool,
}

/// `facilitator.gate_review`: a level-5 action.
#[derive(Debug, Clone, Deserialize)]
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
    #[serde(default)]
    pub analyses: Vec<Analysis>,
}

/// `facilitator.provisional`: filters.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProvisionalRequest {
    /// Only this workflow.
    #[serde(default)]
    pub workflow_id: Option<String>,
    /// Only this item.
    #[serde(default)]
    pub item: Option<String>,
}

/// `facilitator.track_record`: records to add.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrackRecordRequest {
    /// The records (any agents).
    pub records: Vec<TrackRecord>,
}

/// `facilitator.credibility`: one agent's score.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredibilityRequest {
    /// The agent.
    pub agent: String,
    /// Context to match.
    #[serde(default)]
    pub context: Context,
    /// Regime (default: the configured current regime).
    #[serde(default)]
    pub regime: Option<String>,
}

/// One line of `facilitator.debates`.
#[derive(Debug, Clone, Serialize)]
pub struct DebateSummary {
    /// The debate.
    pub debate_id: String,
    /// Its challenge.
    pub challenge_id: String,
    /// The disputed finding.
    pub topic: String,
    /// Challenger.
    pub challenger: String,
    /// Challenged agent.
    pub challenged: String,
    /// Priority class.
    pub priority: String,
    /// The workflow it belongs to, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// The item concerned, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    /// Level 1..=5.
    pub level: u8,
    /// State.
    pub state: String,
    /// When the state times out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<chrono::DateTime<chrono::Utc>>,
    /// Expert (level 3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expert: Option<String>,
    /// Snapshot every message must cite.
    pub snapshot_id: String,
    /// Participants that did not flush before the snapshot.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unresponsive: Vec<String>,
    /// How it was resolved, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    /// True while a provisional decision awaits its gate.
    pub provisional: bool,
    /// Opened at.
    pub opened_at: chrono::DateTime<chrono::Utc>,
    /// Similar past debates and their outcomes (as of its snapshot).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub precedents: Vec<crate::debate::precedents::Precedent>,
}

impl DebateSummary {
    /// The summary of `d`.
    pub fn of(d: &crate::debate::Debate) -> Self {
        DebateSummary {
            debate_id: d.debate_id.clone(),
            challenge_id: d.challenge.challenge_id.clone(),
            topic: d.challenge.disputed_finding.clone(),
            challenger: d.challenge.challenger.clone(),
            challenged: d.challenge.challenged.clone(),
            priority: d.challenge.priority.as_str().to_string(),
            workflow_id: d.challenge.workflow_id.clone(),
            item: d.challenge.item.clone(),
            level: d.level,
            state: d.state.as_str().to_string(),
            deadline: d.deadline,
            expert: d.expert.clone(),
            snapshot_id: d.snapshot.snapshot_id.clone(),
            unresponsive: d.snapshot.unresponsive.clone(),
            resolution: d.resolution.as_ref().map(|r| r.label.clone()),
            provisional: d.state == crate::debate::DebateState::Provisional,
            opened_at: d.opened_at,
            precedents: d.precedents.clone(),
        }
    }
}
