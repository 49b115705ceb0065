//! `track_record`, `credibility`, `regime`, `message`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::debates::{CODE_CONFLICT, CODE_STORE_UNAVAILABLE, CODE_UNAVAILABLE};
use super::record::DebateSummary;
use super::scores::{Context, CredibilityScore, TrackRecord};
use super::SERVICE;
use crate::api::{Empty, Operation, OperationDoc};

/// `facilitator.track_record`: adds outcomes to agents' track records.
pub struct AddTrackRecords;

impl Operation for AddTrackRecords {
    const SERVICE: &'static str = SERVICE;
    const NAME: &'static str = "track_record";
    const SUMMARY: &'static str = "add outcomes to agents' track records (see DEBATES.md)";
    const ERRORS: &'static [&'static str] = &[CODE_CONFLICT, CODE_STORE_UNAVAILABLE];
    type Request = TrackRecordRequest;
    type Reply = TrackRecordReply;
}

/// Records to add (any agents; each is validated first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrackRecordRequest {
    /// The records.
    pub records: Vec<TrackRecord>,
}

/// What `facilitator.track_record` stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrackRecordReply {
    /// Records added.
    pub added: usize,
    /// Agent → how many records it has now (the store keeps the newest).
    pub agents: BTreeMap<String, usize>,
}

/// `facilitator.credibility`: one agent's score with every factor.
pub struct Credibility;

impl Operation for Credibility {
    const SERVICE: &'static str = SERVICE;
    const NAME: &'static str = "credibility";
    const SUMMARY: &'static str = "one agent's credibility score (see DEBATES.md)";
    const ERRORS: &'static [&'static str] = &[CODE_STORE_UNAVAILABLE];
    type Request = CredibilityRequest;
    type Reply = CredibilityScore;
}

/// Whose credibility, in what context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredibilityRequest {
    /// The agent.
    pub agent: String,
    /// Context to match.
    #[serde(default)]
    pub context: Context,
    /// Regime (default: the current regime).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regime: Option<String>,
}

/// `facilitator.regime`: the current market regime.
pub struct Regime;

impl Operation for Regime {
    const SERVICE: &'static str = SERVICE;
    const NAME: &'static str = "regime";
    const SUMMARY: &'static str = "the current market regime (config, then broadcasts)";
    const ERRORS: &'static [&'static str] = &[];
    type Request = Empty;
    type Reply = RegimeReply;
}

/// The regime credibility queries use when a debate names none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegimeReply {
    /// Regime label, e.g. `BEAR_HIGH_RATES`; empty = none.
    pub regime: String,
    /// Where it came from: `config` or `broadcast`.
    pub source: String,
    /// Id of the broadcast that set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broadcast_id: Option<String>,
    /// Who sent that broadcast.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_agent: Option<String>,
    /// When the broadcast was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
}

/// `facilitator.message`: a debate message handed over the API instead of
/// the debates stream (same handling, errors come back).
pub struct Message;

/// Codes of [`Message`] besides a transition's: the envelope's decoding
/// errors, the pre-debate sync's, and the facilitator refusing a message
/// type or an id.
const MESSAGE_ERRORS: &[&str] = &[
    "not_found",
    "not_allowed",
    "wrong_state",
    "conflict",
    "store_unavailable",
    "invalid_challenge",
    "snapshot_missing",
    "snapshot_mismatch",
    "sync_lock_busy",
    "sync_failed",
    CODE_UNAVAILABLE,
    "oversize",
    "malformed_json",
    "not_an_object",
    "unknown_message_type",
    "missing_field",
    "invalid_field",
    "unsupported_schema_version",
    "invalid_content",
];

impl Operation for Message {
    const SERVICE: &'static str = SERVICE;
    const NAME: &'static str = "message";
    const SUMMARY: &'static str =
        "hand the facilitator a debate message (challenge, debate_ack, debate_evidence, debate_verdict)";
    const ERRORS: &'static [&'static str] = MESSAGE_ERRORS;
    /// A debate envelope. Kept as JSON so the facilitator decodes it with
    /// `Envelope::decode` and answers its specific codes
    /// (`missing_field`, `unsupported_schema_version`, …).
    type Request = Value;
    type Reply = MessageReply;
}

/// The debate after the message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageReply {
    /// The debate's summary.
    pub debate: DebateSummary,
    /// True while it is argued (levels 1–3).
    pub open: bool,
    /// True while a provisional decision awaits its gate.
    pub provisional: bool,
}

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[
    OperationDoc::of::<AddTrackRecords>(),
    OperationDoc::of::<Credibility>(),
    OperationDoc::of::<Regime>(),
    OperationDoc::of::<Message>(),
];

#[cfg(test)]
mod tests {
    use super::super::debates::TRANSITION_ERRORS;
    use super::*;

    #[test]
    fn message_errors_include_every_transition_error() {
        for c in TRANSITION_ERRORS {
            assert!(MESSAGE_ERRORS.contains(c), "{c}");
        }
    }
}
