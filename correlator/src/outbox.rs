//! Everything the correlator publishes, with the `Nats-Msg-Id` that makes a
//! repeat a no-op. The envelope `id` equals the message id, so a consumer
//! that de-duplicates by envelope id sees the same identity.
//!
//! | what | subject | `Nats-Msg-Id` / envelope id |
//! |---|---|---|
//! | `correlation_detected` | `caucus.correlations` | `correlation_detected:<correlation_id>` |
//! | first `batch_trigger` (items at detection) | `caucus.control.batch_trigger` | `batch_trigger:<correlation_id>` |
//! | `batch_trigger` for an item that joined later | `caucus.control.batch_trigger` | `batch_trigger:<correlation_id>:<item>` |
//! | `alert` card of one item | `caucus.alerts.<severity>` | `alert:<correlation_id>:<item>` |

use std::collections::{BTreeMap, BTreeSet};

use caucus_shared::envelope::{Envelope, Priority};
use caucus_shared::messages::{BatchTrigger, CorrelationDetected};
use caucus_shared::subjects::Subjects;
use serde_json::{json, Value};

use crate::alerts;
use crate::store::CorrelationRecord;

/// `from_agent` of everything the correlator sends.
pub const FROM_AGENT: &str = "correlator";
/// Control subject token of batch triggers.
pub const BATCH_TRIGGER: &str = "batch_trigger";

/// One message to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    /// Subject.
    pub subject: String,
    /// `Nats-Msg-Id` (also the envelope id).
    pub msg_id: String,
    /// The envelope.
    pub envelope: Envelope,
}

/// Message id of the `correlation_detected` of `correlation_id`.
pub fn detected_msg_id(correlation_id: &str) -> String {
    format!("correlation_detected:{correlation_id}")
}

/// Message id of a batch trigger: the first (`item` none) or one item's.
pub fn trigger_msg_id(correlation_id: &str, item: Option<&str>) -> String {
    match item {
        None => format!("batch_trigger:{correlation_id}"),
        Some(i) => format!("batch_trigger:{correlation_id}:{i}"),
    }
}

/// Message id of `item`'s alert card.
pub fn alert_msg_id(correlation_id: &str, item: &str) -> String {
    format!("alert:{correlation_id}:{item}")
}

fn outgoing(
    subject: String,
    msg_id: String,
    envelope: Envelope,
    rec: &CorrelationRecord,
) -> Outgoing {
    Outgoing {
        subject,
        envelope: envelope
            .with_id(msg_id.clone())
            .with_correlation_id(rec.correlation_id.clone()),
        msg_id,
    }
}

/// `correlation_detected` of `rec`, listing the items at detection (later
/// items arrive as per-item triggers and cards; the record has them all).
pub fn correlation_detected(subjects: &Subjects, rec: &CorrelationRecord) -> Outgoing {
    let content = CorrelationDetected {
        correlation_id: rec.correlation_id.clone(),
        stock_tickers: rec.initial_items.clone(),
        root_cause: rec.root_cause.text.clone(),
        signature: rec.signature.hash.clone(),
        batch_triggered: true,
        batch_id: Some(rec.batch_id.clone()),
        first_seen: Some(rec.first_seen),
        last_seen: Some(rec.last_seen),
    };
    let envelope = Envelope::with_content(FROM_AGENT, &content)
        .expect("a detected correlation has items and an id")
        .with_priority(Priority::Critical);
    outgoing(
        subjects.correlations(),
        detected_msg_id(&rec.correlation_id),
        envelope,
        rec,
    )
}

/// A `batch_trigger` for `items` of `rec`; `single` names the one item that
/// joined later (it selects the message id).
///
/// Content: `{stock_ids, root_cause, correlation_id, batch_id}` plus
/// `workflow_ids: {item: [workflow ids]}` when the failures named them.
pub fn batch_trigger(
    subjects: &Subjects,
    rec: &CorrelationRecord,
    items: &[String],
    single: Option<&str>,
) -> Outgoing {
    let content = BatchTrigger {
        stock_ids: items.to_vec(),
        root_cause: rec.root_cause.text.clone(),
        correlation_id: rec.correlation_id.clone(),
        batch_id: Some(rec.batch_id.clone()),
    };
    let mut envelope = Envelope::with_content(FROM_AGENT, &content)
        .expect("a trigger has items and a correlation id")
        .with_priority(Priority::Critical);
    let workflows: BTreeMap<&String, &BTreeSet<String>> = items
        .iter()
        .filter_map(|i| rec.workflow_ids.get(i).map(|w| (i, w)))
        .collect();
    if !workflows.is_empty() {
        if let Value::Object(map) = &mut envelope.content {
            map.insert("workflow_ids".into(), json!(workflows));
        }
    }
    outgoing(
        subjects.control(BATCH_TRIGGER),
        trigger_msg_id(&rec.correlation_id, single),
        envelope,
        rec,
    )
}

/// `item`'s alert card on `caucus.alerts.<severity>`.
pub fn alert(
    subjects: &Subjects,
    rec: &CorrelationRecord,
    item: &str,
    severity: &str,
    priority: Priority,
) -> Outgoing {
    let card = alerts::card(rec, item, severity);
    let envelope = Envelope::with_content(FROM_AGENT, &card)
        .expect("a card has no confidence to be out of range")
        .with_priority(priority);
    outgoing(
        subjects.alerts(severity),
        alert_msg_id(&rec.correlation_id, item),
        envelope,
        rec,
    )
}
