//! DD-017 failure correlation messages: `agent_failure_event`,
//! `correlation_detected`, `batch_trigger`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::validate::{non_empty, non_empty_list};
use super::{MessageContent, ValidationError};
use crate::envelope::MessageType;

/// An agent failed on an item (published on `caucus.failures.<agent_type>`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentFailureEvent {
    /// The item, e.g. `AAPL`.
    pub stock_ticker: String,
    /// The failing agent type.
    pub agent_type: String,
    /// Short kind, e.g. `quota_exceeded`, `timeout`, `not_found`.
    pub error_type: String,
    /// The vendor's message as received (normalised by the correlator).
    pub error_message: String,
    /// External data source involved, e.g. `koyfin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_source: Option<String>,
    /// When it failed; consumers fall back to the envelope timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<DateTime<Utc>>,
    /// The workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// The task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
}

impl AgentFailureEvent {
    /// When it failed: its own timestamp, else the envelope's.
    pub fn occurred_at(&self, envelope_timestamp: DateTime<Utc>) -> DateTime<Utc> {
        self.timestamp.unwrap_or(envelope_timestamp)
    }
}

impl MessageContent for AgentFailureEvent {
    const MESSAGE_TYPE: MessageType = MessageType::AgentFailureEvent;

    fn validate(&self) -> Result<(), ValidationError> {
        non_empty("stock_ticker", &self.stock_ticker)?;
        non_empty("agent_type", &self.agent_type)?;
        non_empty("error_type", &self.error_type)
    }
}

/// Correlated failures were found (published on `caucus.correlations`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorrelationDetected {
    /// Id of this correlation.
    pub correlation_id: String,
    /// The affected items.
    pub stock_tickers: Vec<String>,
    /// Inferred root cause, e.g. "koyfin API quota exceeded".
    pub root_cause: String,
    /// The shared error signature (hex hash).
    pub signature: String,
    /// Whether a batch pause was triggered.
    pub batch_triggered: bool,
    /// The batch it triggered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
    /// First failure of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seen: Option<DateTime<Utc>>,
    /// Last failure of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen: Option<DateTime<Utc>>,
}

impl MessageContent for CorrelationDetected {
    const MESSAGE_TYPE: MessageType = MessageType::CorrelationDetected;

    fn validate(&self) -> Result<(), ValidationError> {
        non_empty("correlation_id", &self.correlation_id)?;
        non_empty_list("stock_tickers", &self.stock_tickers)
    }
}

/// The correlator asks the coordinator for a batch pause
/// (published on `caucus.control.batch_trigger`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchTrigger {
    /// The items to pause.
    pub stock_ids: Vec<String>,
    /// Inferred root cause (becomes the pause reason).
    pub root_cause: String,
    /// The correlation behind it.
    pub correlation_id: String,
    /// Batch id to use (derived from the correlation when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
}

impl MessageContent for BatchTrigger {
    const MESSAGE_TYPE: MessageType = MessageType::BatchTrigger;

    fn validate(&self) -> Result<(), ValidationError> {
        non_empty_list("stock_ids", &self.stock_ids)?;
        non_empty("correlation_id", &self.correlation_id)
    }
}
