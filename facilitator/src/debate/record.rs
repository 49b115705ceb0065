//! The stored state of one debate (JSON in the `debates` KV bucket).

use caucus_shared::messages::{Challenge, Position};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::credibility::{CredibilityQuery, L2Assessment};
use crate::side::Side;
use caucus_shared::api::facilitator::{DebateRecord, DebateSummary, ResolutionRecord};

pub use caucus_shared::api::facilitator::{
    ChallengeExtensions, DebateState, EvidenceEntry, HistoryEntry, Snapshot, DEBATE_SCHEMA_VERSION,
};

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
    /// W3C `traceparent` of the debate's `debate` span: every later step,
    /// on whichever instance, continues that trace (see
    /// `service::spans`). None when it was opened without tracing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_parent: Option<String>,
    /// W3C `tracestate` stored with [`Debate::trace_parent`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_state: Option<String>,
    /// Every step so far.
    pub history: Vec<HistoryEntry>,
}

impl Debate {
    /// Its line in `facilitator.debates` (and the `debate` of replies).
    pub fn summary(&self) -> DebateSummary {
        DebateSummary {
            debate_id: self.debate_id.clone(),
            challenge_id: self.challenge.challenge_id.clone(),
            topic: self.challenge.disputed_finding.clone(),
            challenger: self.challenge.challenger.clone(),
            challenged: self.challenge.challenged.clone(),
            priority: self.challenge.priority,
            workflow_id: self.challenge.workflow_id.clone(),
            item: self.challenge.item.clone(),
            level: self.level,
            state: self.state,
            deadline: self.deadline,
            expert: self.expert.clone(),
            snapshot_id: self.snapshot.snapshot_id.clone(),
            unresponsive: self.snapshot.unresponsive.clone(),
            resolution: self.resolution.as_ref().map(|r| r.label.clone()),
            provisional: self.state == DebateState::Provisional,
            opened_at: self.opened_at,
            precedents: self.precedents.clone(),
        }
    }

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

/// Field for field (destructured, so a field added to one and not the
/// other fails to compile; the JSON is checked by a test). The stored
/// trace context is the facilitator's own bookkeeping, not part of the
/// API's record, and is left out.
impl From<Debate> for DebateRecord {
    fn from(d: Debate) -> Self {
        let Debate {
            schema_version,
            debate_id,
            challenge,
            extensions,
            opened_at,
            snapshot,
            level,
            state,
            deadline,
            evidence_due,
            challenger_position,
            challenged_position,
            evidence,
            assessment,
            expert,
            resolution,
            superseded,
            redebate_of,
            generation,
            precedents,
            trace_parent: _,
            trace_state: _,
            history,
        } = d;
        DebateRecord {
            schema_version,
            debate_id,
            challenge,
            extensions,
            opened_at,
            snapshot,
            level,
            state,
            deadline,
            evidence_due,
            challenger_position,
            challenged_position,
            evidence,
            assessment,
            expert,
            resolution,
            superseded,
            redebate_of,
            generation,
            precedents,
            history,
        }
    }
}
