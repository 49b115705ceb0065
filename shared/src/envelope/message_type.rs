//! The closed set of `message_type` values.
//!
//! The set is closed on purpose: a consumer that does not know a type cannot
//! act on it safely, so an unknown name is a decode error (the message goes to
//! the DLQ) rather than a silently ignored variant.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::DecodeError;

/// What an envelope carries; decides which typed content it must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageType {
    /// An analytical result ([`crate::messages::Finding`]).
    Finding,
    /// A finding with historical precedent ([`crate::messages::FindingWithPrecedent`]).
    FindingWithPrecedent,
    /// A request for analysis ([`crate::messages::Request`]).
    Request,
    /// A dispute of another agent's finding ([`crate::messages::Challenge`]).
    Challenge,
    /// Validation of a finding or assumption ([`crate::messages::Confirmation`]).
    Confirmation,
    /// Urgent attention or a broadcast ([`crate::messages::Alert`]).
    Alert,
    /// Pause one item's workflow ([`crate::messages::PauseRequest`]).
    PauseRequest,
    /// A workflow reached PAUSED ([`crate::messages::PauseComplete`]).
    PauseComplete,
    /// Resume a paused workflow ([`crate::messages::ResumeCommand`]).
    ResumeCommand,
    /// Pause many items at once ([`crate::messages::BatchPauseRequest`]).
    BatchPauseRequest,
    /// An agent failed on an item ([`crate::messages::AgentFailureEvent`]).
    AgentFailureEvent,
    /// Correlated failures found ([`crate::messages::CorrelationDetected`]).
    CorrelationDetected,
    /// The correlator asks for a batch pause ([`crate::messages::BatchTrigger`]).
    BatchTrigger,
    /// A task for a worker ([`crate::task::TaskDispatch`]).
    TaskDispatch,
    /// A worker's report on a task ([`crate::task::TaskEvent`]).
    TaskEvent,
    /// The challenged agent acknowledges a challenge ([`crate::messages::DebateAck`]).
    DebateAck,
    /// Evidence answering a challenge ([`crate::messages::DebateEvidence`]).
    DebateEvidence,
    /// The challenger accepts or rejects the evidence ([`crate::messages::DebateVerdict`]).
    DebateVerdict,
    /// A debate moves up a level ([`crate::messages::DebateEscalation`]).
    DebateEscalation,
    /// A debate is resolved ([`crate::messages::DebateResolution`]).
    DebateResolution,
}

impl MessageType {
    /// Every message type, in documentation order.
    pub const ALL: [MessageType; 20] = [
        MessageType::Finding,
        MessageType::FindingWithPrecedent,
        MessageType::Request,
        MessageType::Challenge,
        MessageType::Confirmation,
        MessageType::Alert,
        MessageType::PauseRequest,
        MessageType::PauseComplete,
        MessageType::ResumeCommand,
        MessageType::BatchPauseRequest,
        MessageType::AgentFailureEvent,
        MessageType::CorrelationDetected,
        MessageType::BatchTrigger,
        MessageType::TaskDispatch,
        MessageType::TaskEvent,
        MessageType::DebateAck,
        MessageType::DebateEvidence,
        MessageType::DebateVerdict,
        MessageType::DebateEscalation,
        MessageType::DebateResolution,
    ];

    /// The wire name (`finding_with_precedent`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            MessageType::Finding => "finding",
            MessageType::FindingWithPrecedent => "finding_with_precedent",
            MessageType::Request => "request",
            MessageType::Challenge => "challenge",
            MessageType::Confirmation => "confirmation",
            MessageType::Alert => "alert",
            MessageType::PauseRequest => "pause_request",
            MessageType::PauseComplete => "pause_complete",
            MessageType::ResumeCommand => "resume_command",
            MessageType::BatchPauseRequest => "batch_pause_request",
            MessageType::AgentFailureEvent => "agent_failure_event",
            MessageType::CorrelationDetected => "correlation_detected",
            MessageType::BatchTrigger => "batch_trigger",
            MessageType::TaskDispatch => "task_dispatch",
            MessageType::TaskEvent => "task_event",
            MessageType::DebateAck => "debate_ack",
            MessageType::DebateEvidence => "debate_evidence",
            MessageType::DebateVerdict => "debate_verdict",
            MessageType::DebateEscalation => "debate_escalation",
            MessageType::DebateResolution => "debate_resolution",
        }
    }

    /// True for the debate lifecycle types published on `caucus.debates.…`
    /// (a challenge opens a debate, so it counts).
    pub fn is_debate_event(self) -> bool {
        matches!(
            self,
            MessageType::Challenge
                | MessageType::DebateAck
                | MessageType::DebateEvidence
                | MessageType::DebateVerdict
                | MessageType::DebateEscalation
                | MessageType::DebateResolution
        )
    }

    /// The known type a near-miss spelling probably meant (`Finding`,
    /// `pause-request`), for error messages.
    pub fn suggest(name: &str) -> Option<MessageType> {
        let folded = name.trim().to_ascii_lowercase().replace(['-', ' '], "_");
        MessageType::ALL.into_iter().find(|t| t.as_str() == folded)
    }
}

impl fmt::Display for MessageType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MessageType {
    type Err = DecodeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        MessageType::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| DecodeError::UnknownMessageType(s.to_string()))
    }
}
