//! The correlator's API ([`caucus_shared::api::correlator`]), answered by
//! any instance (active or standby) from the `correlations` KV bucket.
//!
//! - `correlator.correlations` → the matching records, newest first
//!   (default limit 100).
//! - `correlator.alerts` → one card per affected item, rebuilt from the
//!   record with every item known now; `published` says whether the card
//!   has gone out on `subject`.

use caucus_shared::api::correlator::{
    AlertCard, AlertsReply, Correlation, CorrelationQuery, CorrelationsReply, FailureSignature,
    RootCause,
};
use caucus_shared::nats::ApiError;
use caucus_shared::subjects::Subjects;
use serde::Serialize;

use crate::alerts;
use crate::outbox;
use crate::store::{CorrelationRecord, CorrelationStore};

/// Default and largest page.
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 10_000;

async fn matching(
    store: &CorrelationStore,
    q: &CorrelationQuery,
) -> Result<Vec<CorrelationRecord>, ApiError> {
    let item = q.item.as_deref().map(|i| i.trim().to_uppercase());
    let mut recs: Vec<CorrelationRecord> = match &q.correlation_id {
        Some(id) => store
            .get(id)
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?
            .map(|(r, _)| vec![r])
            .unwrap_or_default(),
        None => store
            .list()
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?,
    };
    recs.retain(|r| q.status.is_none_or(|s| r.status == s));
    if let Some(item) = &item {
        recs.retain(|r| r.items.contains(item));
    }
    recs.sort_by(|a, b| (b.first_seen, &b.correlation_id).cmp(&(a.first_seen, &a.correlation_id)));
    Ok(recs)
}

fn limit(q: &CorrelationQuery) -> usize {
    q.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT)
}

/// `correlator.correlations`.
pub async fn correlations(
    store: CorrelationStore,
    q: CorrelationQuery,
) -> Result<CorrelationsReply, ApiError> {
    let mut recs = matching(&store, &q).await?;
    recs.truncate(limit(&q));
    Ok(CorrelationsReply {
        correlations: recs.iter().map(view).collect(),
    })
}

/// `correlator.alerts`.
pub async fn alerts(
    store: CorrelationStore,
    subjects: Subjects,
    severity: String,
    q: CorrelationQuery,
) -> Result<AlertsReply, ApiError> {
    let item = q.item.as_deref().map(|i| i.trim().to_uppercase());
    let mut out = Vec::new();
    for rec in matching(&store, &q).await? {
        for i in &rec.items {
            if item.as_ref().is_some_and(|want| want != i) {
                continue;
            }
            out.push(AlertCard {
                subject: subjects.alerts(&severity),
                msg_id: outbox::alert_msg_id(&rec.correlation_id, i),
                published: rec.is_triggered(i),
                card: alerts::card(&rec, i, &severity),
            });
        }
    }
    out.truncate(limit(&q));
    Ok(AlertsReply { alerts: out })
}

/// The record as the API shows it (the same JSON as the stored record).
pub fn view(r: &CorrelationRecord) -> Correlation {
    let s = &r.signature;
    Correlation {
        schema_version: r.schema_version,
        correlation_id: r.correlation_id.clone(),
        batch_id: r.batch_id.clone(),
        status: r.status,
        signature: FailureSignature {
            hash: s.hash.clone(),
            agent_type: s.agent_type.clone(),
            error_type: s.error_type.clone(),
            data_source: s.data_source.clone(),
            normalized_message: s.normalized_message.clone(),
            pattern: s.pattern.as_ref().map(wire_name),
        },
        root_cause: RootCause {
            kind: wire_name(&r.root_cause.kind),
            text: r.root_cause.text.clone(),
        },
        items: r.items.clone(),
        initial_items: r.initial_items.clone(),
        workflow_ids: r.workflow_ids.clone(),
        first_seen: r.first_seen,
        last_seen: r.last_seen,
        failure_count: r.failure_count,
        event_ids: r.event_ids.clone(),
        detected_at: r.detected_at,
        detected_by: r.detected_by.clone(),
        detection_published: r.detection_published,
        triggered_items: r.triggered_items.clone(),
        closed_at: r.closed_at,
    }
}

/// A unit enum's wire name (its snake_case serde name).
fn wire_name<T: Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_view_is_the_stored_record_as_json() {
        let stored = json!({
            "schema_version": 1,
            "correlation_id": "c-1",
            "batch_id": "c-1",
            "status": "closed",
            "signature": {
                "hash": "0123456789abcdef0123456789abcdef",
                "agent_type": "valuation",
                "error_type": "api_error",
                "data_source": "koyfin",
                "normalized_message": "quota exceeded for ITEM",
                "pattern": "api_quota_exceeded"
            },
            "root_cause": {"kind": "quota", "text": "Koyfin API quota exceeded"},
            "items": ["AAPL", "MSFT", "NVDA"],
            "initial_items": ["AAPL", "MSFT", "NVDA"],
            "workflow_ids": {"AAPL": ["w1"]},
            "first_seen": "2026-01-01T00:00:00Z",
            "last_seen": "2026-01-01T00:01:00Z",
            "failure_count": 3,
            "event_ids": ["e1", "e2", "e3"],
            "detected_at": "2026-01-01T00:01:01Z",
            "detected_by": "correlator-1",
            "detection_published": true,
            "triggered_items": ["AAPL"],
            "closed_at": "2026-01-01T00:20:00Z"
        });
        let rec: CorrelationRecord = serde_json::from_value(stored).unwrap();
        let as_stored = serde_json::to_value(&rec).unwrap();
        assert_eq!(serde_json::to_value(view(&rec)).unwrap(), as_stored);
        let mut open = rec.clone();
        open.signature.pattern = None;
        open.workflow_ids.clear();
        open.closed_at = None;
        assert_eq!(
            serde_json::to_value(view(&open)).unwrap(),
            serde_json::to_value(&open).unwrap()
        );
    }
}
