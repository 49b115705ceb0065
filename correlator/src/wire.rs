//! From the wire to the engine: an `agent_failure_event` envelope on
//! `caucus.failures.<agent_type>` becomes a library [`FailureEvent`].
//!
//! - `event_id` is the envelope's `id`. An envelope sent without one is
//!   given `<stream>:<sequence>` by the consumer instead of the id the
//!   decoder invents, so a replayed or redelivered copy is still recognised.
//! - `timestamp` is the content's `timestamp`, else the envelope's.
//! - `workflow_id` is the content's `workflow_id`, else the envelope's
//!   `correlation_id` (a coordinator publishing on behalf of a workflow).

use caucus_shared::envelope::{DecodeError, Envelope, MessageType, Priority, SCHEMA_VERSION};
use caucus_shared::messages::AgentFailureEvent;
use caucus_shared::messages::MessageContent;
use caucus_shared::nats::dlq::DlqReason;
use chrono::{DateTime, Utc};
use serde::de::IgnoredAny;
use serde::Deserialize;

use crate::event::{FailureEvent, InvalidFailureEvent, FAILURE_EVENT_SCHEMA_VERSION};

/// Why a message on the failures subjects cannot be correlated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WireError {
    /// The body is not a valid envelope (size, JSON, fields, content).
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A valid envelope of another type was published on a failures subject.
    #[error("expected message_type `agent_failure_event` on a failures subject, found `{0}`")]
    WrongMessageType(MessageType),
    /// The failure lacks something the correlator relies on.
    #[error(transparent)]
    Invalid(#[from] InvalidFailureEvent),
}

impl DlqReason for WireError {
    fn code(&self) -> &str {
        match self {
            WireError::Decode(e) => e.code(),
            WireError::WrongMessageType(_) => "unexpected_message_type",
            WireError::Invalid(_) => "invalid_failure_event",
        }
    }
}

/// A decoded failure and whether its envelope carried its own `id`.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedFailure {
    /// The event for the engine.
    pub event: FailureEvent,
    /// False when the sender left `id` out (the consumer then derives one
    /// from the stream position).
    pub has_id: bool,
}

#[derive(Deserialize)]
struct IdProbe {
    #[serde(default)]
    id: Option<IgnoredAny>,
}

/// The envelope with its content typed, for the fast path: one serde pass
/// instead of the generic decoder's four. Field types match [`Envelope`]'s
/// so it accepts nothing the generic decoder would refuse.
#[derive(Deserialize)]
struct FailureEnvelope {
    id: Option<String>,
    message_type: MessageType,
    #[allow(dead_code)]
    from_agent: String,
    #[serde(default)]
    #[allow(dead_code)]
    to_agent: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    priority: Priority,
    content: AgentFailureEvent,
    #[serde(default)]
    timestamp: Option<DateTime<Utc>>,
    #[serde(default)]
    #[allow(dead_code)]
    requires_response: bool,
    #[serde(default)]
    correlation_id: Option<String>,
    #[serde(default)]
    schema_version: Option<u32>,
}

/// Decodes and checks one body from `caucus.failures.>`.
///
/// Well-formed failures take a fast path; anything it does not accept
/// outright (including every invalid body) goes through
/// [`Envelope::decode`], whose specific error is what the DLQ reports.
pub fn decode_failure(bytes: &[u8], max_bytes: usize) -> Result<DecodedFailure, WireError> {
    if bytes.len() <= max_bytes {
        if let Ok(f) = serde_json::from_slice::<FailureEnvelope>(bytes) {
            let accepted = f.message_type == MessageType::AgentFailureEvent
                && f.schema_version.is_none_or(|v| v == SCHEMA_VERSION)
                && f.content.validate().is_ok();
            if let (true, Some(id)) = (accepted, f.id) {
                // As the generic decoder does: an absent timestamp is "now".
                let sent_at = f.timestamp.unwrap_or_else(Utc::now);
                let event = event_from(id, sent_at, f.correlation_id, f.content);
                event.validate()?;
                return Ok(DecodedFailure {
                    event,
                    has_id: true,
                });
            }
        }
    }
    let envelope = Envelope::decode(bytes, max_bytes)?;
    if envelope.message_type != MessageType::AgentFailureEvent {
        return Err(WireError::WrongMessageType(envelope.message_type));
    }
    // Decode succeeded, so the body is a JSON object and the probe parses.
    let has_id = serde_json::from_slice::<IdProbe>(bytes).is_ok_and(|p| p.id.is_some());
    let content: AgentFailureEvent = envelope.content_as()?;
    let event = to_failure_event(&envelope, content);
    event.validate()?;
    Ok(DecodedFailure { event, has_id })
}

/// Maps a failure envelope and its content to the engine's event.
pub fn to_failure_event(envelope: &Envelope, content: AgentFailureEvent) -> FailureEvent {
    event_from(
        envelope.id.clone(),
        envelope.timestamp,
        envelope.correlation_id.clone(),
        content,
    )
}

fn event_from(
    id: String,
    sent_at: DateTime<Utc>,
    correlation_id: Option<String>,
    content: AgentFailureEvent,
) -> FailureEvent {
    FailureEvent {
        schema_version: FAILURE_EVENT_SCHEMA_VERSION,
        event_id: id,
        timestamp: content.occurred_at(sent_at),
        workflow_id: content.workflow_id.or(correlation_id),
        stock_ticker: content.stock_ticker,
        agent_type: content.agent_type,
        error_type: content.error_type,
        error_message: content.error_message,
        data_source: content.data_source.unwrap_or_default(),
    }
}

/// The event id of a message whose envelope had no `id`: its stream
/// position, stable across redeliveries and replays.
pub fn positional_event_id(stream: &str, sequence: u64) -> String {
    format!("{stream}:{sequence}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    #[test]
    fn maps_content_and_falls_back_to_the_envelope() {
        let b = body(json!({
            "id": "ev-1", "message_type": "agent_failure_event", "from_agent": "w",
            "timestamp": "2025-11-16T14:47:00Z", "correlation_id": "wf-9",
            "content": {"stock_ticker": "AAPL", "agent_type": "valuation",
                        "error_type": "QuotaError", "error_message": "quota exceeded",
                        "data_source": "koyfin"}
        }));
        let d = decode_failure(&b, 1 << 20).unwrap();
        assert!(d.has_id);
        assert_eq!(d.event.event_id, "ev-1");
        assert_eq!(d.event.workflow_id.as_deref(), Some("wf-9"));
        assert_eq!(d.event.data_source, "koyfin");
        assert_eq!(d.event.timestamp.to_rfc3339(), "2025-11-16T14:47:00+00:00");
    }

    #[test]
    fn content_timestamp_and_workflow_win() {
        let b = body(json!({
            "message_type": "agent_failure_event", "from_agent": "w",
            "timestamp": "2025-11-16T14:47:00Z", "correlation_id": "wf-9",
            "content": {"stock_ticker": "AAPL", "agent_type": "valuation",
                        "error_type": "QuotaError", "error_message": "x",
                        "timestamp": "2025-11-16T14:40:00Z", "workflow_id": "wf-1"}
        }));
        let d = decode_failure(&b, 1 << 20).unwrap();
        assert!(!d.has_id);
        assert_eq!(d.event.workflow_id.as_deref(), Some("wf-1"));
        assert_eq!(d.event.timestamp.to_rfc3339(), "2025-11-16T14:40:00+00:00");
        assert_eq!(d.event.data_source, "");
    }

    #[test]
    fn the_fast_path_agrees_with_the_generic_decoder() {
        let b = body(json!({
            "id": "ev-2", "message_type": "agent_failure_event", "from_agent": "w",
            "priority": "high", "to_agent": "correlator", "requires_response": false,
            "timestamp": "2025-11-16T14:47:00Z", "correlation_id": "wf-9", "schema_version": 1,
            "extra": {"ignored": true},
            "content": {"stock_ticker": "MSFT", "agent_type": "valuation",
                        "error_type": "QuotaError", "error_message": "quota exceeded",
                        "data_source": "koyfin", "task_id": "t"}
        }));
        let fast = decode_failure(&b, 1 << 20).unwrap();
        let env = Envelope::decode(&b, 1 << 20).unwrap();
        let slow = to_failure_event(&env, env.content_as().unwrap());
        assert_eq!(fast.event, slow);
        // What the fast path does not take outright still gets its own error.
        for (bad, code) in [
            (
                json!({"id": "x", "message_type": "agent_failure_event", "from_agent": "w",
                    "priority": "urgent", "content": {"stock_ticker": "A", "agent_type": "v",
                    "error_type": "E", "error_message": "m"}}),
                "invalid_field",
            ),
            (
                json!({"id": "x", "message_type": "agent_failure_event", "from_agent": "w",
                    "schema_version": 2, "content": {"stock_ticker": "A", "agent_type": "v",
                    "error_type": "E", "error_message": "m"}}),
                "unsupported_schema_version",
            ),
            (
                json!({"id": null, "message_type": "agent_failure_event", "from_agent": "w",
                    "content": {"stock_ticker": "A", "agent_type": "v",
                    "error_type": "E", "error_message": "m"}}),
                "invalid_field",
            ),
            (
                json!({"id": "x", "message_type": "agent_failure_event", "from_agent": "w",
                    "content": {"stock_ticker": " ", "agent_type": "v",
                    "error_type": "E", "error_message": "m"}}),
                "invalid_content",
            ),
        ] {
            let e = decode_failure(&body(bad.clone()), 1 << 20).unwrap_err();
            assert_eq!(DlqReason::code(&e), code, "{bad}");
        }
    }

    #[test]
    fn rejections_carry_specific_codes() {
        let wrong = body(json!({"message_type": "batch_trigger", "from_agent": "a",
            "content": {"stock_ids": ["AAPL"], "root_cause": "r", "correlation_id": "c"}}));
        let e = decode_failure(&wrong, 1 << 20).unwrap_err();
        assert_eq!(DlqReason::code(&e), "unexpected_message_type");
        let e = decode_failure(b"{not json", 1 << 20).unwrap_err();
        assert_eq!(DlqReason::code(&e), "malformed_json");
        let e = decode_failure(
            &body(json!({"message_type": "gossip", "from_agent": "a"})),
            1 << 20,
        )
        .unwrap_err();
        assert_eq!(DlqReason::code(&e), "unknown_message_type");
        let empty_id = body(json!({"id": " ", "message_type": "agent_failure_event",
            "from_agent": "w", "content": {"stock_ticker": "AAPL", "agent_type": "v",
            "error_type": "E", "error_message": "m"}}));
        let e = decode_failure(&empty_id, 1 << 20).unwrap_err();
        assert_eq!(DlqReason::code(&e), "invalid_failure_event");
        let e = decode_failure(&[b' '; 64], 10).unwrap_err();
        assert_eq!(DlqReason::code(&e), "oversize");
    }
}
