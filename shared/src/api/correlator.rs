//! The correlator's operations (`caucus.api.correlator.<operation>`):
//! `correlations` and `alerts`, answered by any instance (active or
//! standby) from the `correlations` KV bucket.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{Operation, OperationDoc};
use crate::messages::Alert;

/// The service's name in API subjects.
pub const SERVICE: &str = "correlator";

/// Every operation of the correlator.
pub fn operations() -> Vec<OperationDoc> {
    DOCS.to_vec()
}

const DOCS: &[OperationDoc] = &[
    OperationDoc::of::<Correlations>(),
    OperationDoc::of::<Alerts>(),
];

/// `correlator.correlations`: the incidents, newest first.
pub struct Correlations;

impl Operation for Correlations {
    const SERVICE: &'static str = SERVICE;
    const NAME: &'static str = "correlations";
    const SUMMARY: &'static str = "correlation records (see CORRELATOR.md)";
    const ERRORS: &'static [&'static str] = &[];
    type Request = CorrelationQuery;
    type Reply = CorrelationsReply;
}

/// `correlator.alerts`: one alert card per affected item.
pub struct Alerts;

impl Operation for Alerts {
    const SERVICE: &'static str = SERVICE;
    const NAME: &'static str = "alerts";
    const SUMMARY: &'static str = "alert cards of correlated failures";
    const ERRORS: &'static [&'static str] = &[];
    type Request = CorrelationQuery;
    type Reply = AlertsReply;
}

/// Filters of both operations (all optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorrelationQuery {
    /// Only incidents in this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RecordStatus>,
    /// Only incidents affecting this item (case-insensitive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    /// Only this incident.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// Most entries returned (default 100, at most 10 000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// Whether an incident may still grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordStatus {
    /// Failures of its signature still join it.
    Open,
    /// A full window passed without a failure; final.
    Closed,
}

/// The incidents matching the query, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorrelationsReply {
    /// One record per incident.
    pub correlations: Vec<Correlation>,
}

/// One incident as stored (the seed's `failure_correlations` row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Correlation {
    /// Version of the record's shape.
    pub schema_version: u32,
    /// Deterministic id of the incident.
    pub correlation_id: String,
    /// Batch id sent in `batch_trigger` (equal to the correlation id).
    pub batch_id: String,
    /// `open` or `closed`.
    pub status: RecordStatus,
    /// The failure signature the incident's failures share.
    pub signature: FailureSignature,
    /// Inferred root cause, refined as items join.
    pub root_cause: RootCause,
    /// Affected items in order of first failure.
    pub items: Vec<String>,
    /// Items at detection.
    pub initial_items: Vec<String>,
    /// Workflows of the failed tasks per item, when the events named them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub workflow_ids: BTreeMap<String, BTreeSet<String>>,
    /// Earliest failure (event time).
    pub first_seen: DateTime<Utc>,
    /// Latest failure (event time).
    pub last_seen: DateTime<Utc>,
    /// Failures in the incident.
    pub failure_count: u64,
    /// Ids of the incident's failure events (bounded).
    pub event_ids: Vec<String>,
    /// Wall-clock time the record was created.
    pub detected_at: DateTime<Utc>,
    /// Instance that created it.
    pub detected_by: String,
    /// `correlation_detected` and the first `batch_trigger` are published.
    #[serde(default)]
    pub detection_published: bool,
    /// Items whose alert card and batch trigger are published.
    #[serde(default)]
    pub triggered_items: Vec<String>,
    /// Wall-clock time it was closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_at: Option<DateTime<Utc>>,
}

/// What makes two failures "the same" (see CORRELATOR.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureSignature {
    /// 32 hex characters: SHA-256 prefix over agent type, error type, data
    /// source and the normalised message (or its pattern).
    pub hash: String,
    /// Agent type, trimmed and lowercased.
    pub agent_type: String,
    /// Error type, trimmed and lowercased.
    pub error_type: String,
    /// Data source, trimmed and lowercased (empty when none).
    pub data_source: String,
    /// The message with ids, timestamps and numbers stripped.
    pub normalized_message: String,
    /// The recognised cause (e.g. `api_quota_exceeded`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
}

/// The inferred cause of an incident.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootCause {
    /// Which rule matched: `quota`, `network`, `data_unavailable`,
    /// `agent_bug` or `shared`.
    pub kind: String,
    /// Text for people, e.g. "Koyfin API quota exceeded".
    pub text: String,
}

/// The alert cards matching the query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertsReply {
    /// One per affected item of each matching incident.
    pub alerts: Vec<AlertCard>,
}

/// One item's alert card, rebuilt from the record with every item known
/// now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertCard {
    /// Where the card is published (`caucus.alerts.<severity>`).
    pub subject: String,
    /// Its `Nats-Msg-Id`.
    pub msg_id: String,
    /// Whether the card has gone out on `subject`.
    pub published: bool,
    /// The alert content.
    pub card: Alert,
}
