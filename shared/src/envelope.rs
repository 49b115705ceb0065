//! The envelope: the one JSON object shape every caucus message has.
//!
//! The seed's message shape parses as-is: absent fields take defaults (`id`
//! is a fresh UUID v7, `timestamp` is now, `priority` normal, `content` `{}`,
//! `schema_version` 1). [`Envelope::decode`] is the single entry point for
//! untrusted bytes: it refuses oversize bodies, malformed JSON, non-objects,
//! unknown `message_type`s, other schema versions and content that does not
//! fit its type, each with its own [`DecodeError`] code for the DLQ.
//! Unknown extra fields are ignored, so newer senders stay readable.

pub(crate) mod decode;
mod message_type;
mod priority;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use decode::{decode_json, decode_versioned, DecodeError};
pub use message_type::MessageType;
pub use priority::Priority;

use crate::messages::{typed, Content, MessageContent};
use decode::{check_schema_version, from_value_at, json_kind, parse_object};

/// The only envelope `schema_version` this build reads and writes.
pub const SCHEMA_VERSION: u32 = 1;

/// A fresh message id (UUID v7: time-ordered, so ids sort by creation).
pub fn new_message_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

fn schema_v1() -> u32 {
    SCHEMA_VERSION
}

/// One message on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// Unique message id; a UUID v7 is generated when absent.
    #[serde(default = "new_message_id")]
    pub id: String,
    /// What the message is; decides the shape of `content`.
    pub message_type: MessageType,
    /// The sending agent or service.
    pub from_agent: String,
    /// The addressee; `all` for a broadcast; absent for "whoever consumes
    /// the subject".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_agent: Option<String>,
    /// Urgency (default `normal`).
    #[serde(default)]
    pub priority: Priority,
    /// Type-specific body (default `{}`); see [`crate::messages`].
    #[serde(default = "empty_object")]
    pub content: Value,
    /// When the sender created it (default: when it was decoded).
    #[serde(default = "Utc::now")]
    pub timestamp: DateTime<Utc>,
    /// The sender expects an answer (default false).
    #[serde(default)]
    pub requires_response: bool,
    /// Ties a reply or a batch of related messages together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// Envelope wire version (default 1; only 1 is accepted).
    #[serde(default = "schema_v1")]
    pub schema_version: u32,
}

impl Envelope {
    /// A new envelope with a fresh id, the current time, normal priority and
    /// no addressee. The content is not checked here: see
    /// [`Envelope::with_content`] for a checked constructor.
    pub fn new(message_type: MessageType, from_agent: impl Into<String>, content: Value) -> Self {
        Envelope {
            id: new_message_id(),
            message_type,
            from_agent: from_agent.into(),
            to_agent: None,
            priority: Priority::Normal,
            content,
            timestamp: Utc::now(),
            requires_response: false,
            correlation_id: None,
            schema_version: SCHEMA_VERSION,
        }
    }

    /// A new envelope carrying typed content; the message type comes from
    /// the content type. Fails with the error a receiver would report when
    /// the content is invalid (e.g. a confidence outside 0..=1).
    pub fn with_content<C: MessageContent>(
        from_agent: impl Into<String>,
        content: &C,
    ) -> Result<Self, DecodeError> {
        let invalid = |reason: String| DecodeError::InvalidContent {
            message_type: C::MESSAGE_TYPE,
            reason,
        };
        content.validate().map_err(|e| invalid(e.to_string()))?;
        let value = serde_json::to_value(content).map_err(|e| invalid(e.to_string()))?;
        Ok(Envelope::new(C::MESSAGE_TYPE, from_agent, value))
    }

    /// Sets the addressee (`all` broadcasts).
    pub fn to(mut self, to_agent: impl Into<String>) -> Self {
        self.to_agent = Some(to_agent.into());
        self
    }

    /// Sets the priority.
    pub fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Marks the message as expecting an answer.
    pub fn with_requires_response(mut self, requires_response: bool) -> Self {
        self.requires_response = requires_response;
        self
    }

    /// Sets the correlation id.
    pub fn with_correlation_id(mut self, correlation_id: impl Into<String>) -> Self {
        self.correlation_id = Some(correlation_id.into());
        self
    }

    /// Sets the id (e.g. a deterministic one, so a re-publish de-duplicates).
    pub fn with_id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Sets the timestamp (e.g. from an injected clock).
    pub fn with_timestamp(mut self, timestamp: DateTime<Utc>) -> Self {
        self.timestamp = timestamp;
        self
    }

    /// An answer to this message: addressed to its sender, correlated by this
    /// message's `correlation_id` (or its `id` when it has none), same priority.
    pub fn reply(
        &self,
        message_type: MessageType,
        from_agent: impl Into<String>,
        content: Value,
    ) -> Self {
        Envelope::new(message_type, from_agent, content)
            .to(self.from_agent.clone())
            .with_priority(self.priority)
            .with_correlation_id(
                self.correlation_id
                    .clone()
                    .unwrap_or_else(|| self.id.clone()),
            )
    }

    /// True when addressed to every agent (`to_agent` = `all`).
    pub fn is_broadcast(&self) -> bool {
        self.to_agent.as_deref() == Some("all")
    }

    /// Decodes and fully checks untrusted bytes (size, JSON, object,
    /// `schema_version`, `message_type`, fields, then content for its type).
    pub fn decode(bytes: &[u8], max_bytes: usize) -> Result<Envelope, DecodeError> {
        Envelope::decode_with_id(bytes, max_bytes, new_message_id)
    }

    /// Like [`Envelope::decode`], but a message sent without an `id` gets
    /// `default_id()` instead of a fresh UUID: a stored message read twice
    /// (a redelivery, a replay, another consumer) keeps one id when the
    /// default is derived from where it is stored.
    pub fn decode_with_id(
        bytes: &[u8],
        max_bytes: usize,
        default_id: impl FnOnce() -> String,
    ) -> Result<Envelope, DecodeError> {
        let mut object = parse_object(bytes, max_bytes)?;
        // Only an absent id: a null or a non-string one is still refused
        // as an invalid field, as before.
        if !object.contains_key("id") {
            object.insert("id".into(), Value::String(default_id()));
        }
        check_schema_version(&object)?;
        match object.get("message_type") {
            None | Some(Value::Null) => {
                return Err(DecodeError::MissingField("message_type".into()))
            }
            Some(Value::String(name)) => {
                name.parse::<MessageType>()?;
            }
            Some(other) => {
                return Err(DecodeError::InvalidField {
                    field: "message_type".into(),
                    reason: format!("expected a string, found {}", json_kind(other)),
                })
            }
        }
        let envelope: Envelope =
            from_value_at(&Value::Object(object)).map_err(|e| e.into_decode_error())?;
        envelope.validate_content()?;
        Ok(envelope)
    }

    /// The JSON body. Serialising strings, JSON values and timestamps cannot
    /// fail, so this is infallible.
    pub fn to_bytes(&self) -> Bytes {
        Bytes::from(serde_json::to_vec(self).expect("an envelope always serialises"))
    }

    /// The content as `T`, parsed and validated. Does not compare
    /// `T::MESSAGE_TYPE` with `message_type`, so a `finding_with_precedent`
    /// can be read as a plain [`crate::messages::Finding`].
    pub fn content_as<T: MessageContent>(&self) -> Result<T, DecodeError> {
        typed(self.message_type, &self.content)
    }

    /// The content parsed as the type its `message_type` calls for.
    pub fn typed_content(&self) -> Result<Content, DecodeError> {
        Content::parse(self.message_type, &self.content)
    }

    /// Checks that the content parses and validates for its `message_type`.
    pub fn validate_content(&self) -> Result<(), DecodeError> {
        self.typed_content().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_order_most_urgent_highest() {
        let mut all = Priority::ALL.to_vec();
        all.sort();
        assert_eq!(
            all,
            vec![
                Priority::Low,
                Priority::Normal,
                Priority::High,
                Priority::Critical,
                Priority::SystemCritical
            ]
        );
        assert!(Priority::SystemCritical.bypasses_queues());
        assert!(Priority::ALL[1..].iter().all(|p| !p.bypasses_queues()));
        assert_eq!(Priority::default(), Priority::Normal);
        for p in Priority::ALL {
            assert_eq!(p.as_str().parse::<Priority>().unwrap(), p);
            assert_eq!(serde_json::to_value(p).unwrap(), p.as_str());
        }
        assert!("urgent".parse::<Priority>().is_err());
    }

    #[test]
    fn message_type_names_match_serde() {
        for t in MessageType::ALL {
            assert_eq!(serde_json::to_value(t).unwrap(), t.as_str());
            assert_eq!(t.as_str().parse::<MessageType>().unwrap(), t);
        }
        assert_eq!(
            MessageType::suggest("Pause-Request"),
            Some(MessageType::PauseRequest)
        );
        assert_eq!(MessageType::suggest("gossip"), None);
    }

    #[test]
    fn reply_addresses_the_sender_and_correlates() {
        let ask = Envelope::new(
            MessageType::Request,
            "valuation",
            serde_json::json!({"query": "q"}),
        )
        .with_priority(Priority::High);
        let answer = ask.reply(MessageType::Finding, "financial", serde_json::json!({}));
        assert_eq!(answer.to_agent.as_deref(), Some("valuation"));
        assert_eq!(answer.correlation_id.as_deref(), Some(ask.id.as_str()));
        assert_eq!(answer.priority, Priority::High);
        assert_ne!(answer.id, ask.id);
    }

    #[test]
    fn a_missing_id_takes_the_default_and_a_given_one_stays() {
        let body = br#"{"message_type":"finding","from_agent":"a","content":{"finding":"f","confidence":0.5}}"#;
        let a = Envelope::decode_with_id(body, 1 << 20, || "stored-7".into()).unwrap();
        assert_eq!(a.id, "stored-7");
        let with = br#"{"id":"mine","message_type":"finding","from_agent":"a","content":{"finding":"f","confidence":0.5}}"#;
        let b = Envelope::decode_with_id(with, 1 << 20, || "stored-7".into()).unwrap();
        assert_eq!(b.id, "mine");
    }

    #[test]
    fn generated_ids_are_uuid_v7() {
        let id = new_message_id();
        let parsed = uuid::Uuid::parse_str(&id).unwrap();
        assert_eq!(parsed.get_version_num(), 7);
    }
}
