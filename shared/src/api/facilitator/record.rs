//! The facilitator's debate records as they travel in replies: the stored
//! debate ([`DebateRecord`], the JSON of the facilitator's `Debate`) and
//! its parts, and the one-line [`DebateSummary`] of listings.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::resolution::ResolutionRecord;
use super::scores::{Context, L2Assessment};
use super::side::Side;
use crate::messages::{Challenge, ChallengePriority, Position};

/// Version of the stored debate shape.
pub const DEBATE_SCHEMA_VERSION: u32 = 1;

/// Where a debate stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DebateState {
    /// Level 1: waiting for the challenged agent's acknowledgement.
    AwaitingAck,
    /// Level 1: acknowledged; waiting for evidence.
    AwaitingEvidence,
    /// Level 1: evidence given; waiting for the challenger's verdict.
    AwaitingVerdict,
    /// Level 2: the facilitator is weighing credibility.
    Mediating,
    /// Level 3: with a human expert.
    AwaitingHuman,
    /// Level 4: a provisional resolution applies until the next gate.
    Provisional,
    /// Finished (binding, or closed for a re-debate).
    Resolved,
}

impl DebateState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            DebateState::AwaitingAck => "awaiting_ack",
            DebateState::AwaitingEvidence => "awaiting_evidence",
            DebateState::AwaitingVerdict => "awaiting_verdict",
            DebateState::Mediating => "mediating",
            DebateState::AwaitingHuman => "awaiting_human",
            DebateState::Provisional => "provisional",
            DebateState::Resolved => "resolved",
        }
    }

    /// Still arguing (levels 1–3).
    pub fn is_open(self) -> bool {
        !matches!(self, DebateState::Provisional | DebateState::Resolved)
    }
}

/// The memory snapshot a debate argues from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Immutable id every debate message must cite, e.g. `snap_1234`.
    pub snapshot_id: String,
    /// When it was cut.
    pub taken_at: DateTime<Utc>,
    /// Participants that acknowledged the flush.
    pub flushed: Vec<String>,
    /// Participants that did not answer within the flush time-out.
    pub unresponsive: Vec<String>,
}

/// Optional facilitator extensions read from the challenge content next to
/// the seed's fields (unknown to other readers, who ignore them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChallengeExtensions {
    /// Analysis context for credibility (sector, metric, horizon, size, stage).
    #[serde(default)]
    pub context: Context,
    /// Market regime for credibility.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regime: Option<String>,
    /// Analyses that depend on the disputed finding.
    #[serde(default)]
    pub downstream_dependencies: Vec<String>,
    /// When the next human gate is due (the override window closes then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_gate: Option<DateTime<Utc>>,
}

impl ChallengeExtensions {
    /// Reads the extensions from raw challenge content; malformed extension
    /// fields are ignored rather than failing the challenge.
    pub fn from_content(content: &Value) -> Self {
        let field = |k: &str| content.get(k).cloned();
        ChallengeExtensions {
            context: field("context")
                .and_then(|v| serde_json::from_value(v).ok())
                .unwrap_or_default(),
            regime: field("regime").and_then(|v| v.as_str().map(str::to_string)),
            downstream_dependencies: field("downstream_dependencies")
                .and_then(|v| serde_json::from_value(v).ok())
                .unwrap_or_default(),
            next_gate: field("next_gate").and_then(|v| serde_json::from_value(v).ok()),
        }
    }
}

/// Evidence put forward in a debate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidenceEntry {
    /// Who gave it.
    pub from: String,
    /// Which side that is.
    pub side: Side,
    /// The evidence.
    pub evidence: Vec<String>,
    /// The (possibly revised) position that came with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<Position>,
    /// True when the position was revised.
    #[serde(default)]
    pub revised: bool,
    /// Acknowledged limitations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limitations: Vec<String>,
    /// When.
    pub at: DateTime<Utc>,
}

/// One step of a debate's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    /// When.
    pub at: DateTime<Utc>,
    /// Level after the step.
    pub level: u8,
    /// State after the step.
    pub state: DebateState,
    /// What happened, e.g. `ack_timeout`, `evidence_rejected`.
    pub event: String,
}

/// A similar past debate and its outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Precedent {
    /// The past debate.
    pub debate_id: String,
    /// What it disputed.
    pub topic: String,
    /// 0..=1, see the module docs.
    pub similarity: f64,
    /// What matched: `metric`, `agents`, `sector`, `item`.
    pub matched: Vec<String>,
    /// The position that stood, in words.
    pub outcome: String,
    /// The agent whose position stood, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner: Option<String>,
    /// Level it was resolved at.
    pub level: u8,
    /// How (`facilitator-resolved`, `human_decision`, `gate_override`, …).
    pub method: String,
    /// Whether a person later overrode its earlier resolution.
    pub overridden: bool,
    /// When it was resolved.
    pub resolved_at: DateTime<Utc>,
}

/// One debate as the facilitator stores it (its `Debate`, field for field:
/// a facilitator test checks stored debates decode as this and re-encode to
/// the same JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebateRecord {
    /// Stored shape version.
    pub schema_version: u32,
    /// The debate id (`[A-Za-z0-9_-]+`).
    pub debate_id: String,
    /// The challenge that opened it.
    pub challenge: Challenge,
    /// Facilitator extensions of the challenge.
    #[serde(default)]
    pub extensions: ChallengeExtensions,
    /// When it opened.
    pub opened_at: DateTime<Utc>,
    /// The snapshot it argues from.
    pub snapshot: Snapshot,
    /// Current level, 1..=5.
    pub level: u8,
    /// Current state.
    pub state: DebateState,
    /// When the current state times out (none: nothing to time out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DateTime<Utc>>,
    /// When level-1 evidence is due.
    pub evidence_due: DateTime<Utc>,
    /// The challenger's current position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub challenger_position: Option<Position>,
    /// The challenged agent's current position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub challenged_position: Option<Position>,
    /// Evidence given so far.
    #[serde(default)]
    pub evidence: Vec<EvidenceEntry>,
    /// The level-2 assessment, once made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assessment: Option<L2Assessment>,
    /// The expert holding it (level 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert: Option<String>,
    /// The current resolution (provisional or final).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<ResolutionRecord>,
    /// Earlier resolutions a gate review replaced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub superseded: Vec<ResolutionRecord>,
    /// The debate this one re-opens, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redebate_of: Option<String>,
    /// 0 for an original debate, n for its n-th re-debate.
    #[serde(default)]
    pub generation: u32,
    /// Similar past debates resolved before its snapshot, closest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub precedents: Vec<Precedent>,
    /// Every step so far.
    pub history: Vec<HistoryEntry>,
}

/// One line of `facilitator.debates` (and the `debate` of `decide`,
/// `gate_review` and `message` replies).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Priority class (`critical_path`, …).
    pub priority: ChallengePriority,
    /// The workflow it belongs to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// The item concerned, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    /// Level 1..=5.
    pub level: u8,
    /// State.
    pub state: DebateState,
    /// When the state times out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DateTime<Utc>>,
    /// Expert (level 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert: Option<String>,
    /// Snapshot every message must cite.
    pub snapshot_id: String,
    /// Participants that did not flush before the snapshot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unresponsive: Vec<String>,
    /// How it was resolved (the resolution's label), if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<String>,
    /// True while a provisional decision awaits its gate.
    pub provisional: bool,
    /// Opened at.
    pub opened_at: DateTime<Utc>,
    /// Similar past debates and their outcomes (as of its snapshot).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub precedents: Vec<Precedent>,
}
