//! The correlator's input: one agent failure (the seed's AGENT_FAILURE_EVENT).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Schema version written by this crate.
pub const FAILURE_EVENT_SCHEMA_VERSION: u32 = 1;

fn default_schema_version() -> u32 {
    FAILURE_EVENT_SCHEMA_VERSION
}

/// One agent failure, as reported by an agent or the coordinator.
///
/// Mirrors the seed's `AGENT_FAILURE_EVENT {stock_ticker, agent_type,
/// error_type, error_message, data_source, timestamp}` plus an `event_id` for
/// replay safety and the owning workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureEvent {
    /// Version of this shape; absent means 1.
    #[serde(default = "default_schema_version")]
    pub schema_version: u32,
    /// Unique id of this failure report; the same id seen twice is one failure.
    pub event_id: String,
    /// Workflow the failed task belonged to, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// The item (stock ticker) whose task failed, e.g. `AAPL`.
    pub stock_ticker: String,
    /// Agent type that failed, e.g. `valuation`.
    pub agent_type: String,
    /// Error class as reported, e.g. `QuotaError`, `HTTPError`.
    pub error_type: String,
    /// Vendor or library error text, verbatim.
    pub error_message: String,
    /// Data source the agent was calling, e.g. `koyfin`; empty when none.
    #[serde(default)]
    pub data_source: String,
    /// When the failure happened (not when it was received).
    pub timestamp: DateTime<Utc>,
}

/// Why a [`FailureEvent`] was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidFailureEvent {
    /// A field that identifies the failure is empty or only whitespace.
    #[error("failure event {event_id:?}: field `{field}` must not be empty")]
    EmptyField {
        /// The event's id (may itself be empty).
        event_id: String,
        /// Name of the empty field.
        field: &'static str,
    },
    /// The event was written by a newer, unknown schema.
    #[error("failure event {event_id:?}: unsupported schema_version {version} (max {max})")]
    UnsupportedSchema {
        /// The event's id.
        event_id: String,
        /// Version found in the event.
        version: u32,
        /// Highest version this crate understands.
        max: u32,
    },
}

impl FailureEvent {
    /// Checks the fields the correlator relies on.
    pub fn validate(&self) -> Result<(), InvalidFailureEvent> {
        if self.schema_version > FAILURE_EVENT_SCHEMA_VERSION {
            return Err(InvalidFailureEvent::UnsupportedSchema {
                event_id: self.event_id.clone(),
                version: self.schema_version,
                max: FAILURE_EVENT_SCHEMA_VERSION,
            });
        }
        let required = [
            ("event_id", &self.event_id),
            ("stock_ticker", &self.stock_ticker),
            ("agent_type", &self.agent_type),
            ("error_type", &self.error_type),
        ];
        for (field, value) in required {
            if value.trim().is_empty() {
                return Err(InvalidFailureEvent::EmptyField {
                    event_id: self.event_id.clone(),
                    field,
                });
            }
        }
        Ok(())
    }
}
