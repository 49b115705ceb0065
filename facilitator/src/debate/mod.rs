//! The debate state machine: pure, no I/O, no clock reads (every call takes
//! `now`). The service loads a [`Debate`] from the KV bucket, calls one
//! transition, writes it back (revision-checked) and only then carries out
//! the returned [`Effect`]s.
//!
//! ```text
//! L1 awaiting_ack ──ack──▶ awaiting_evidence ──evidence──▶ awaiting_verdict ──accept──▶ resolved (L1)
//!      │ ack timeout            │ evidence timeout              │ reject / verdict timeout
//!      └────────────────────────┴───────────────────────────────┴──▶ L2 mediating
//! L2 mediating ──clear credibility gap (not critical-path)──▶ resolved (L2, binding)
//!      └─ expert slot ─▶ L3 awaiting_human ──decision──▶ resolved (L3, binding)
//!      └─ queues full ─▶ overflow (see routing)    └─ 6 h / unavailable ─▶ L4 provisional
//! L4 provisional ──gate review──▶ confirm / override (impact report) / re-debate ─▶ resolved (L5)
//! ```

pub mod conservative;
mod machine;
pub mod outcomes;
pub mod precedents;
mod record;
pub mod resolution;
pub mod routing;
#[cfg(test)]
pub(crate) mod tests;

use std::time::Duration;

use caucus_shared::config::FacilitatorConfig;
use caucus_shared::messages::{Challenge, DebateEscalation};
use serde::{Deserialize, Serialize};

pub use machine::{GateAction, HumanDecision, OverrideImpact};
pub use record::{
    ChallengeExtensions, Debate, DebateState, EvidenceEntry, HistoryEntry, Snapshot,
    DEBATE_SCHEMA_VERSION,
};
pub use resolution::{OverrideStatus, OverrideWindow, ProvisionalDetails, ResolutionRecord};
pub use routing::{ExpertSlot, Route};

/// Every time-out of the escalation ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Level 1 acknowledgement (15 min).
    pub ack: Duration,
    /// Level 1 evidence, from the challenge (1 h).
    pub evidence: Duration,
    /// Level 1 verdict grace after late evidence.
    pub verdict_grace: Duration,
    /// Level 2 mediation (1 h).
    pub mediation: Duration,
    /// Level 3 human decision (6 h).
    pub human: Duration,
    /// Level 4 review deadline when no gate is known (24 h).
    pub fallback_window: Duration,
}

impl Timeouts {
    /// The time-outs `cfg` configures.
    pub fn from_config(cfg: &FacilitatorConfig) -> Self {
        Timeouts {
            ack: cfg.ack_timeout,
            evidence: cfg.evidence_timeout,
            verdict_grace: cfg.verdict_grace,
            mediation: cfg.mediation_timeout,
            human: cfg.human_timeout,
            fallback_window: cfg.fallback_window,
        }
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts::from_config(&FacilitatorConfig::default())
    }
}

/// Something the service must do after storing a transition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Publish on `caucus.debates.<id>.escalation`.
    Escalated(DebateEscalation),
    /// Publish on `caucus.debates.<id>.resolution` and tell both agents.
    Resolved(Box<ResolutionRecord>),
    /// Free the expert's queue slot.
    ReleaseExpert {
        /// The expert.
        expert: String,
    },
    /// Open a new debate (a gate asked for a re-debate).
    Redebate(Box<RedebateRequest>),
}

/// A new debate a gate review asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RedebateRequest {
    /// The new challenge (new `debate_id`, the added context as counter-evidence).
    pub challenge: Challenge,
    /// Extensions carried over.
    pub extensions: ChallengeExtensions,
    /// The debate it re-opens.
    pub redebate_of: String,
    /// 1 for the first re-debate of a debate, 2 for the next, …
    pub generation: u32,
}

/// Why a transition was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DebateError {
    /// The challenge or debate id is unusable.
    #[error("invalid challenge: {0}")]
    InvalidChallenge(String),
    /// A message did not cite the debate's snapshot.
    #[error("debate {debate_id}: message from `{from}` does not cite a snapshot; every debate message must cite `{expected}`")]
    SnapshotMissing {
        /// The debate.
        debate_id: String,
        /// The sender.
        from: String,
        /// The debate's snapshot.
        expected: String,
    },
    /// A message cited another snapshot.
    #[error("debate {debate_id}: message from `{from}` cites snapshot `{cited}`, but this debate argues from `{expected}`")]
    SnapshotMismatch {
        /// The debate.
        debate_id: String,
        /// The sender.
        from: String,
        /// What it cited.
        cited: String,
        /// The debate's snapshot.
        expected: String,
    },
    /// The sender may not send this message in this debate.
    #[error("debate {debate_id}: {reason}")]
    NotAllowed {
        /// The debate.
        debate_id: String,
        /// Why.
        reason: String,
    },
    /// The message does not fit the debate's current state.
    #[error("debate {debate_id} is {state} at level {level}: {reason}")]
    WrongState {
        /// The debate.
        debate_id: String,
        /// Its state.
        state: &'static str,
        /// Its level.
        level: u8,
        /// What was attempted.
        reason: String,
    },
}

impl DebateError {
    /// Machine-readable code for API errors and DLQ headers.
    pub fn code(&self) -> &'static str {
        match self {
            DebateError::InvalidChallenge(_) => "invalid_challenge",
            DebateError::SnapshotMissing { .. } => "snapshot_missing",
            DebateError::SnapshotMismatch { .. } => "snapshot_mismatch",
            DebateError::NotAllowed { .. } => "not_allowed",
            DebateError::WrongState { .. } => "wrong_state",
        }
    }
}

/// Debate ids end up in subjects and KV keys: `[A-Za-z0-9_-]`, 1..=128 bytes.
pub fn validate_debate_id(id: &str) -> Result<(), DebateError> {
    if id.is_empty() || id.len() > 128 {
        return Err(DebateError::InvalidChallenge(format!(
            "debate id `{id}` must be 1..=128 characters"
        )));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-')))
    {
        return Err(DebateError::InvalidChallenge(format!(
            "debate id `{id}`: character {c:?} is not allowed (only [A-Za-z0-9_-])"
        )));
    }
    Ok(())
}
