//! Debate lifecycle events after the challenge: ack, evidence, verdict,
//! escalation, resolution. Each names its debate and the snapshot it argues
//! from, so every message of a debate refers to the same version of reality.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::challenge::Position;
use super::validate::{non_empty, opt_unit_interval};
use super::{MessageContent, ValidationError};
use crate::envelope::MessageType;

fn level(field: &'static str, level: u8) -> Result<(), ValidationError> {
    if (1..=5).contains(&level) {
        Ok(())
    } else {
        Err(ValidationError::Level { field, level })
    }
}

/// The challenged agent confirms receipt (level 1: within 15 minutes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebateAck {
    /// The debate.
    pub debate_id: String,
    /// The challenge acknowledged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub challenge_id: Option<String>,
    /// When the agent commits to deliver its evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub respond_by: Option<DateTime<Utc>>,
    /// A request for clarification, or any remark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The snapshot the debate argues from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
}

impl MessageContent for DebateAck {
    const MESSAGE_TYPE: MessageType = MessageType::DebateAck;

    fn validate(&self) -> Result<(), ValidationError> {
        non_empty("debate_id", &self.debate_id)
    }
}

/// Evidence answering the challenge (level 1: within 1 hour).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebateEvidence {
    /// The debate.
    pub debate_id: String,
    /// The evidence.
    #[serde(default)]
    pub evidence: Vec<String>,
    /// The sender's (possibly revised) position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<Position>,
    /// True when the sender revised its position.
    #[serde(default)]
    pub revised: bool,
    /// Acknowledged limitations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limitations: Vec<String>,
    /// The snapshot the debate argues from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
}

impl MessageContent for DebateEvidence {
    const MESSAGE_TYPE: MessageType = MessageType::DebateEvidence;

    fn validate(&self) -> Result<(), ValidationError> {
        non_empty("debate_id", &self.debate_id)?;
        match &self.position {
            Some(p) => p.validate("position"),
            None => Ok(()),
        }
    }
}

/// The challenger accepts (resolved) or rejects (escalate to level 2) the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebateVerdict {
    /// The debate.
    pub debate_id: String,
    /// True accepts the evidence and ends the debate.
    pub accepted: bool,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The snapshot the debate argues from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
}

impl MessageContent for DebateVerdict {
    const MESSAGE_TYPE: MessageType = MessageType::DebateVerdict;

    fn validate(&self) -> Result<(), ValidationError> {
        non_empty("debate_id", &self.debate_id)
    }
}

/// A debate moves up the 5-level ladder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebateEscalation {
    /// The debate.
    pub debate_id: String,
    /// Level left, 1..=5.
    pub from_level: u8,
    /// Level entered, 1..=5.
    pub to_level: u8,
    /// Why, e.g. `ack_timeout`, `evidence_rejected`, `credibility_gap_too_small`.
    pub reason: String,
    /// The expert the debate was routed to (level 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert: Option<String>,
    /// When the new level times out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DateTime<Utc>>,
    /// The snapshot the debate argues from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
}

impl MessageContent for DebateEscalation {
    const MESSAGE_TYPE: MessageType = MessageType::DebateEscalation;

    fn validate(&self) -> Result<(), ValidationError> {
        non_empty("debate_id", &self.debate_id)?;
        level("from_level", self.from_level)?;
        level("to_level", self.to_level)?;
        if self.to_level <= self.from_level {
            return Err(ValidationError::LevelOrder {
                from: self.from_level,
                to: self.to_level,
            });
        }
        non_empty("reason", &self.reason)
    }
}

/// How a debate was resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolutionMethod {
    /// Level 1: the challenger accepted the evidence (or the challenged agent revised).
    AgentDirect,
    /// Level 2: credibility differential above threshold (binding).
    Credibility,
    /// Level 3: a person decided (binding).
    Human,
    /// Level 4: most conservative position, provisional until the next gate.
    ConservativeDefault,
    /// Level 5: the gate confirmed the provisional decision.
    GateConfirm,
    /// Level 5: the gate overrode it.
    GateOverride,
    /// Level 5: the gate asked for a new debate (this one closes).
    GateRedebate,
    /// Deferred to the next gate (queue full, non-critical debate).
    DeferredToGate,
}

/// The outcome of a debate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebateResolution {
    /// The debate.
    pub debate_id: String,
    /// Level at which it was resolved, 1..=5.
    pub level: u8,
    /// How.
    pub method: ResolutionMethod,
    /// The agreed or applied position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<Position>,
    /// The agent whose position won, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner: Option<String>,
    /// True until a gate confirms or overrides it.
    #[serde(default)]
    pub provisional: bool,
    /// Why this resolution (credibility scores, conservative-default rationale, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// Evidence considered.
    #[serde(default)]
    pub evidence_considered: Vec<String>,
    /// Positions considered but not applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<Position>,
    /// Confidence in the resolution, 0..=1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Extra structured detail (credibility breakdown, impact report, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// The snapshot the debate argued from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
}

impl MessageContent for DebateResolution {
    const MESSAGE_TYPE: MessageType = MessageType::DebateResolution;

    fn validate(&self) -> Result<(), ValidationError> {
        non_empty("debate_id", &self.debate_id)?;
        level("level", self.level)?;
        opt_unit_interval("confidence", self.confidence)?;
        if let Some(p) = &self.position {
            p.validate("position")?;
        }
        Ok(())
    }
}
