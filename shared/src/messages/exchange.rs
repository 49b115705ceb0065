//! `request` and `confirmation`: asking another agent for work or agreement.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::validate::{non_empty, opt_unit_interval};
use super::{MessageContent, ValidationError};
use crate::envelope::MessageType;

/// The `query` of the facilitator's pre-debate flush request, which
/// agents answer themselves (every other request becomes a task).
pub const FLUSH_WORKING_MEMORY: &str = "flush_working_memory";

/// A request for specific analysis (seed: targeted query, scope and
/// parameters, priority and deadline, context and rationale; the priority is
/// the envelope's).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// The targeted question.
    pub query: String,
    /// What is in and out of scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// Parameters of the requested analysis (any JSON).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub parameters: Value,
    /// When the answer is needed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DateTime<Utc>>,
    /// Why it is asked, and the context the answer should consider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
    /// The item concerned, e.g. a ticker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    /// The workflow concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
}

impl MessageContent for Request {
    const MESSAGE_TYPE: MessageType = MessageType::Request;

    fn validate(&self) -> Result<(), ValidationError> {
        non_empty("query", &self.query)
    }
}

/// Validation of a finding, datum or assumption (seed: verify, cross-check,
/// seek agreement, build consensus). Without `agrees` it asks for a
/// confirmation; with it, it gives one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Confirmation {
    /// The finding, datum or assumption being confirmed.
    pub finding: String,
    /// The answer: true agrees, false disagrees; absent asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agrees: Option<bool>,
    /// Confidence in the answer, 0..=1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Evidence for the answer.
    #[serde(default)]
    pub evidence: Vec<String>,
    /// Whether the addressee used the confirmed finding in its work
    /// (absent: received, use not reported).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used: Option<bool>,
    /// Id of the message being confirmed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<String>,
    /// Free-text remark.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl MessageContent for Confirmation {
    const MESSAGE_TYPE: MessageType = MessageType::Confirmation;

    fn validate(&self) -> Result<(), ValidationError> {
        non_empty("finding", &self.finding)?;
        opt_unit_interval("confidence", self.confidence)
    }
}
