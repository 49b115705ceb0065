//! The link between a message type and its content type.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::*;
use crate::envelope::decode::{from_value_at, json_kind};
use crate::envelope::{DecodeError, MessageType};
use crate::task::{TaskDispatch, TaskEvent};

/// A content type of the wire contract.
pub trait MessageContent: Serialize + DeserializeOwned {
    /// The `message_type` this content goes with.
    const MESSAGE_TYPE: MessageType;

    /// Checks serde cannot express; the error text names the field.
    fn validate(&self) -> Result<(), ValidationError> {
        Ok(())
    }
}

impl MessageContent for TaskDispatch {
    const MESSAGE_TYPE: MessageType = MessageType::TaskDispatch;

    fn validate(&self) -> Result<(), ValidationError> {
        if self.attempt == 0 {
            return Err(ValidationError::Rule {
                field: "attempt",
                rule: "starts at 1",
            });
        }
        Ok(())
    }
}

impl MessageContent for TaskEvent {
    const MESSAGE_TYPE: MessageType = MessageType::TaskEvent;

    fn validate(&self) -> Result<(), ValidationError> {
        if self.attempt == 0 {
            return Err(ValidationError::Rule {
                field: "attempt",
                rule: "starts at 1",
            });
        }
        Ok(())
    }
}

/// Content parsed as the type its message type calls for. Serialises as the
/// bare content object (no tag: the envelope's `message_type` is the tag).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
// A short-lived parse result matched once by its consumer; boxing variants
// would only make every match clumsier.
#[allow(clippy::large_enum_variant)]
pub enum Content {
    /// `finding`.
    Finding(Finding),
    /// `finding_with_precedent`.
    FindingWithPrecedent(FindingWithPrecedent),
    /// `request`.
    Request(Request),
    /// `challenge`.
    Challenge(Challenge),
    /// `confirmation`.
    Confirmation(Confirmation),
    /// `alert`.
    Alert(Alert),
    /// `pause_request`.
    PauseRequest(PauseRequest),
    /// `pause_complete`.
    PauseComplete(PauseComplete),
    /// `resume_command`.
    ResumeCommand(ResumeCommand),
    /// `batch_pause_request`.
    BatchPauseRequest(BatchPauseRequest),
    /// `agent_failure_event`.
    AgentFailureEvent(AgentFailureEvent),
    /// `correlation_detected`.
    CorrelationDetected(CorrelationDetected),
    /// `batch_trigger`.
    BatchTrigger(BatchTrigger),
    /// `task_dispatch`.
    TaskDispatch(TaskDispatch),
    /// `task_event`.
    TaskEvent(TaskEvent),
    /// `debate_ack`.
    DebateAck(DebateAck),
    /// `debate_evidence`.
    DebateEvidence(DebateEvidence),
    /// `debate_verdict`.
    DebateVerdict(DebateVerdict),
    /// `debate_escalation`.
    DebateEscalation(DebateEscalation),
    /// `debate_resolution`.
    DebateResolution(DebateResolution),
}

/// Parses `value` as `T` for an envelope of `message_type`: must be an
/// object, must deserialise, must validate.
pub(crate) fn typed<T: MessageContent>(
    message_type: MessageType,
    value: &Value,
) -> Result<T, DecodeError> {
    let invalid = |reason: String| DecodeError::InvalidContent {
        message_type,
        reason,
    };
    if !value.is_object() {
        return Err(invalid(format!(
            "content must be a JSON object, found {}",
            json_kind(value)
        )));
    }
    let parsed: T = from_value_at(value).map_err(|e| invalid(e.to_string()))?;
    parsed.validate().map_err(|e| invalid(e.to_string()))?;
    Ok(parsed)
}

impl Content {
    /// Parses and validates `content` for `message_type`.
    pub fn parse(message_type: MessageType, content: &Value) -> Result<Content, DecodeError> {
        let t = message_type;
        Ok(match t {
            MessageType::Finding => Content::Finding(typed(t, content)?),
            MessageType::FindingWithPrecedent => Content::FindingWithPrecedent(typed(t, content)?),
            MessageType::Request => Content::Request(typed(t, content)?),
            MessageType::Challenge => Content::Challenge(typed(t, content)?),
            MessageType::Confirmation => Content::Confirmation(typed(t, content)?),
            MessageType::Alert => Content::Alert(typed(t, content)?),
            MessageType::PauseRequest => Content::PauseRequest(typed(t, content)?),
            MessageType::PauseComplete => Content::PauseComplete(typed(t, content)?),
            MessageType::ResumeCommand => Content::ResumeCommand(typed(t, content)?),
            MessageType::BatchPauseRequest => Content::BatchPauseRequest(typed(t, content)?),
            MessageType::AgentFailureEvent => Content::AgentFailureEvent(typed(t, content)?),
            MessageType::CorrelationDetected => Content::CorrelationDetected(typed(t, content)?),
            MessageType::BatchTrigger => Content::BatchTrigger(typed(t, content)?),
            MessageType::TaskDispatch => Content::TaskDispatch(typed(t, content)?),
            MessageType::TaskEvent => Content::TaskEvent(typed(t, content)?),
            MessageType::DebateAck => Content::DebateAck(typed(t, content)?),
            MessageType::DebateEvidence => Content::DebateEvidence(typed(t, content)?),
            MessageType::DebateVerdict => Content::DebateVerdict(typed(t, content)?),
            MessageType::DebateEscalation => Content::DebateEscalation(typed(t, content)?),
            MessageType::DebateResolution => Content::DebateResolution(typed(t, content)?),
        })
    }

    /// The message type this content belongs to.
    pub fn message_type(&self) -> MessageType {
        match self {
            Content::Finding(_) => MessageType::Finding,
            Content::FindingWithPrecedent(_) => MessageType::FindingWithPrecedent,
            Content::Request(_) => MessageType::Request,
            Content::Challenge(_) => MessageType::Challenge,
            Content::Confirmation(_) => MessageType::Confirmation,
            Content::Alert(_) => MessageType::Alert,
            Content::PauseRequest(_) => MessageType::PauseRequest,
            Content::PauseComplete(_) => MessageType::PauseComplete,
            Content::ResumeCommand(_) => MessageType::ResumeCommand,
            Content::BatchPauseRequest(_) => MessageType::BatchPauseRequest,
            Content::AgentFailureEvent(_) => MessageType::AgentFailureEvent,
            Content::CorrelationDetected(_) => MessageType::CorrelationDetected,
            Content::BatchTrigger(_) => MessageType::BatchTrigger,
            Content::TaskDispatch(_) => MessageType::TaskDispatch,
            Content::TaskEvent(_) => MessageType::TaskEvent,
            Content::DebateAck(_) => MessageType::DebateAck,
            Content::DebateEvidence(_) => MessageType::DebateEvidence,
            Content::DebateVerdict(_) => MessageType::DebateVerdict,
            Content::DebateEscalation(_) => MessageType::DebateEscalation,
            Content::DebateResolution(_) => MessageType::DebateResolution,
        }
    }
}
