//! The correlator's API, answered by any instance (active or standby) from
//! the `correlations` KV bucket.
//!
//! - `correlator.correlations` `{status?: "open"|"closed", item?, correlation_id?, limit?}`
//!   → `{"correlations": [CorrelationRecord…]}`, newest first (default limit 100).
//! - `correlator.alerts` `{correlation_id?, item?, status?, limit?}` →
//!   `{"alerts": [{"subject", "msg_id", "published", "card"}…]}`: one card
//!   per affected item, rebuilt from the record with every item known now;
//!   `published` says whether the card has gone out on `subject`.

use serde::Deserialize;
use serde_json::{json, Value};

use caucus_shared::nats::ApiError;
use caucus_shared::subjects::Subjects;

use crate::alerts;
use crate::outbox;
use crate::store::{CorrelationRecord, CorrelationStore, RecordStatus};

/// Default and largest page.
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 10_000;

/// Filters shared by both operations.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Query {
    /// Only incidents in this state.
    #[serde(default)]
    pub status: Option<RecordStatus>,
    /// Only incidents affecting this item (case-insensitive).
    #[serde(default)]
    pub item: Option<String>,
    /// Only this incident.
    #[serde(default)]
    pub correlation_id: Option<String>,
    /// Most entries returned (default 100, at most 10 000).
    #[serde(default)]
    pub limit: Option<usize>,
}

fn parse(body: Value) -> Result<Query, ApiError> {
    if body.is_null() {
        return Ok(Query::default());
    }
    serde_json::from_value(body).map_err(|e| ApiError::bad_request(format!("query: {e}")))
}

async fn matching(store: &CorrelationStore, q: &Query) -> Result<Vec<CorrelationRecord>, ApiError> {
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

fn limit(q: &Query) -> usize {
    q.limit.unwrap_or(DEFAULT_LIMIT).min(MAX_LIMIT)
}

/// `correlator.correlations`.
pub async fn correlations(store: CorrelationStore, body: Value) -> Result<Value, ApiError> {
    let q = parse(body)?;
    let mut recs = matching(&store, &q).await?;
    recs.truncate(limit(&q));
    Ok(json!({ "correlations": recs }))
}

/// `correlator.alerts`.
pub async fn alerts(
    store: CorrelationStore,
    subjects: Subjects,
    severity: String,
    body: Value,
) -> Result<Value, ApiError> {
    let q = parse(body)?;
    let item = q.item.as_deref().map(|i| i.trim().to_uppercase());
    let mut out = Vec::new();
    for rec in matching(&store, &q).await? {
        for i in &rec.items {
            if item.as_ref().is_some_and(|want| want != i) {
                continue;
            }
            out.push(json!({
                "subject": subjects.alerts(&severity),
                "msg_id": outbox::alert_msg_id(&rec.correlation_id, i),
                "published": rec.is_triggered(i),
                "card": alerts::card(&rec, i, &severity),
            }));
        }
    }
    out.truncate(limit(&q));
    Ok(json!({ "alerts": out }))
}
