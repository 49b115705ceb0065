//! The stored state of one debate (JSON in the `debates` KV bucket).

use caucus_shared::messages::{Challenge, Position};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::resolution::ResolutionRecord;
use crate::credibility::{Context, CredibilityQuery, L2Assessment};
use crate::side::Side;

/// Version of the stored [`Debate`] shape.
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

/// One debate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Debate {
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
    pub precedents: Vec<super::precedents::Precedent>,
    /// Every step so far.
    pub history: Vec<HistoryEntry>,
}

impl Debate {
    /// The metric it is about ([`caucus_shared::messages::debate_metric`]).
    pub fn metric(&self) -> Option<String> {
        caucus_shared::messages::debate_metric(
            self.extensions.context.metric.as_deref(),
            self.challenged_position.as_ref(),
            self.challenger_position.as_ref(),
        )
    }

    /// The agent on `side`.
    pub fn agent(&self, side: Side) -> &str {
        match side {
            Side::Challenger => &self.challenge.challenger,
            Side::Challenged => &self.challenge.challenged,
        }
    }

    /// The side `agent` is on, if it takes part.
    pub fn side_of(&self, agent: &str) -> Option<Side> {
        if agent == self.challenge.challenger {
            Some(Side::Challenger)
        } else if agent == self.challenge.challenged {
            Some(Side::Challenged)
        } else {
            None
        }
    }

    /// The current position of `side`.
    pub fn position(&self, side: Side) -> Option<&Position> {
        match side {
            Side::Challenger => self.challenger_position.as_ref(),
            Side::Challenged => self.challenged_position.as_ref(),
        }
    }

    /// What credibility is computed for.
    pub fn credibility_query(&self, default_regime: &str) -> CredibilityQuery {
        let mut context = self.extensions.context.clone();
        if context.metric.is_none() {
            context.metric = self
                .challenged_position
                .as_ref()
                .or(self.challenger_position.as_ref())
                .and_then(|p| p.metric.clone());
        }
        let regime = self
            .extensions
            .regime
            .clone()
            .or_else(|| (!default_regime.is_empty()).then(|| default_regime.to_string()));
        CredibilityQuery { context, regime }
    }

    /// Every piece of evidence: the challenge basis and counter-evidence,
    /// both positions' evidence, then what was given during the debate.
    pub fn evidence_considered(&self) -> Vec<String> {
        let mut out = vec![format!(
            "challenge basis: {}",
            self.challenge.challenge_basis
        )];
        out.extend(self.challenge.counter_evidence.iter().cloned());
        for p in [
            &self.challenge.challenger_position,
            &self.challenge.challenged_position,
        ]
        .into_iter()
        .flatten()
        {
            out.extend(p.evidence.iter().cloned());
        }
        for e in &self.evidence {
            out.extend(e.evidence.iter().cloned());
        }
        let mut seen = std::collections::HashSet::new();
        out.retain(|e| seen.insert(e.clone()));
        out
    }
}
