//! Alert cards: one per affected item of a correlation (DD-015), each with a
//! "Resume all" action that resumes the whole batch.
//!
//! A card is content of an `alert` envelope on `caucus.alerts.<severity>`:
//!
//! ```json
//! {"event_type": "correlated_failure", "item": "AAPL",
//!  "title": "AAPL paused: Koyfin API quota exceeded",
//!  "root_cause": "Koyfin API quota exceeded", "root_cause_kind": "quota",
//!  "correlation_id": "…", "batch_id": "…", "signature": "…", "severity": "high",
//!  "stock_tickers": ["AAPL", "MSFT", "GOOGL"], "first_seen": "…",
//!  "workflow_ids": ["…"],
//!  "action": {"label": "Resume all", "operation": "coordinator.batch_resume",
//!             "body": {"batch_id": "…"}}}
//! ```
//!
//! `stock_tickers` lists the items known when
//! the card was made; the `batch_id` names the whole batch, including items
//! that join later, and `correlator.alerts` rebuilds cards with every item.

use caucus_shared::messages::Alert;
use serde_json::{json, Map, Value};

use crate::store::CorrelationRecord;

/// `event_type` of a correlated-failure card.
pub const EVENT_TYPE: &str = "correlated_failure";
/// Label of the card's action.
pub const RESUME_ALL_LABEL: &str = "Resume all";
/// API operation the action calls.
pub const RESUME_ALL_OPERATION: &str = "coordinator.batch_resume";

/// The card of `item` in `rec`.
pub fn card(rec: &CorrelationRecord, item: &str, severity: &str) -> Alert {
    let mut extra = Map::new();
    let mut put = |k: &str, v: Value| {
        extra.insert(k.to_string(), v);
    };
    put("item", json!(item));
    put(
        "title",
        json!(format!("{item} paused: {}", rec.root_cause.text)),
    );
    put("root_cause", json!(rec.root_cause.text));
    put("root_cause_kind", json!(rec.root_cause.kind));
    put("correlation_id", json!(rec.correlation_id));
    put("batch_id", json!(rec.batch_id));
    put("signature", json!(rec.signature.hash));
    put("severity", json!(severity));
    put("stock_tickers", json!(rec.items));
    put("first_seen", json!(rec.first_seen));
    if let Some(ids) = rec.workflow_ids.get(item) {
        put("workflow_ids", json!(ids));
    }
    put("action", resume_all_action(rec));
    Alert {
        event_type: Some(EVENT_TYPE.to_string()),
        extra,
        ..Alert::default()
    }
}

/// `{"label": "Resume all", "operation": "coordinator.batch_resume", "body": …}`.
pub fn resume_all_action(rec: &CorrelationRecord) -> Value {
    json!({
        "label": RESUME_ALL_LABEL,
        "operation": RESUME_ALL_OPERATION,
        // Exactly the request `coordinator.batch_resume` takes: the batch
        // names every item, including those that join after this card.
        "body": { "batch_id": rec.batch_id }
    })
}
