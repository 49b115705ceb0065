//! Correlation records in the JetStream KV bucket `correlations`, keyed by
//! correlation id.
//!
//! A record is created create-only, so of two writers exactly one creates
//! it, and every later write is revision-checked. Besides the incident it
//! remembers which side effects are done (`detection_published`,
//! `triggered_items`), which is what makes a replay after a restart, or a
//! second instance, skip what was already published.

use std::collections::{BTreeMap, BTreeSet};

use async_nats::jetstream::kv;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::engine::Correlation;
use crate::root_cause::RootCause;
use crate::signature::Signature;

/// KV bucket of correlation records (`<prefix>_correlations`).
pub const CORRELATIONS_BUCKET: &str = caucus_shared::nats::buckets::CORRELATIONS;

/// Schema version of [`CorrelationRecord`].
pub const RECORD_SCHEMA_VERSION: u32 = 1;

fn schema_v1() -> u32 {
    RECORD_SCHEMA_VERSION
}

/// Whether an incident may still grow (the API's type: the record and
/// the `status` filter share it).
pub use caucus_shared::api::correlator::RecordStatus;

/// One incident as stored (the seed's `failure_correlations` row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorrelationRecord {
    /// Version of this shape.
    #[serde(default = "schema_v1")]
    pub schema_version: u32,
    /// Deterministic id (see [`crate::engine::correlation_id`]).
    pub correlation_id: String,
    /// Batch id sent in `batch_trigger` (equal to the correlation id).
    pub batch_id: String,
    /// `open` or `closed`.
    pub status: RecordStatus,
    /// The shared signature.
    pub signature: Signature,
    /// Inferred root cause, refined as items join.
    pub root_cause: RootCause,
    /// Affected items in order of first failure.
    pub items: Vec<String>,
    /// Items at detection: the first `batch_trigger` and the
    /// `correlation_detected` carry exactly these, whoever sends them.
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
    /// Ids of the incident's failure events (bounded by the engine).
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

impl CorrelationRecord {
    /// A fresh record of `c`, nothing published yet.
    pub fn new(c: &Correlation, now: DateTime<Utc>, instance: &str) -> Self {
        CorrelationRecord {
            schema_version: RECORD_SCHEMA_VERSION,
            correlation_id: c.correlation_id.clone(),
            batch_id: c.correlation_id.clone(),
            status: RecordStatus::Open,
            signature: c.signature.clone(),
            root_cause: c.root_cause.clone(),
            items: c.items.clone(),
            initial_items: c.items.clone(),
            workflow_ids: BTreeMap::new(),
            first_seen: c.first_seen,
            last_seen: c.last_seen,
            failure_count: c.failure_count,
            event_ids: c.event_ids.clone(),
            detected_at: now,
            detected_by: instance.to_string(),
            detection_published: false,
            triggered_items: Vec::new(),
            closed_at: None,
        }
    }

    /// Takes in the engine's current view of the incident. Items are only
    /// ever added and counts only grow, so merging an older view (a replay
    /// that has not caught up yet) never loses anything.
    pub fn merge(&mut self, c: &Correlation) {
        for item in &c.items {
            if !self.items.contains(item) {
                self.items.push(item.clone());
            }
        }
        if c.items.len() >= self.items.len() {
            self.root_cause = c.root_cause.clone();
        }
        self.first_seen = self.first_seen.min(c.first_seen);
        self.last_seen = self.last_seen.max(c.last_seen);
        if c.failure_count > self.failure_count {
            self.failure_count = c.failure_count;
            self.event_ids = c.event_ids.clone();
        }
    }

    /// Adds workflow ids per item.
    pub fn merge_workflows(&mut self, workflows: &BTreeMap<String, BTreeSet<String>>) {
        for (item, ids) in workflows {
            self.workflow_ids
                .entry(item.clone())
                .or_default()
                .extend(ids.iter().cloned());
        }
    }

    /// Whether `item`'s card and trigger are out.
    pub fn is_triggered(&self, item: &str) -> bool {
        self.triggered_items.iter().any(|i| i == item)
    }
}

/// What went wrong with the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The record changed since it was read (another writer).
    #[error("correlation {0}: revision conflict")]
    Conflict(String),
    /// NATS failed.
    #[error("correlation store: {0}")]
    Nats(String),
    /// A stored record does not parse.
    #[error("correlation {0}: stored record does not parse: {1}")]
    Corrupt(String, String),
}

/// Result of a create-only write.
#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    /// This writer created it, at this revision.
    Created(u64),
    /// It already existed.
    Exists,
}

/// The `correlations` bucket.
#[derive(Clone)]
pub struct CorrelationStore {
    kv: kv::Store,
}

impl std::fmt::Debug for CorrelationStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CorrelationStore")
    }
}

fn encode(rec: &CorrelationRecord) -> Bytes {
    Bytes::from(serde_json::to_vec(rec).expect("correlation records serialise"))
}

impl CorrelationStore {
    /// Wraps a bucket.
    pub fn new(kv: kv::Store) -> Self {
        CorrelationStore { kv }
    }

    /// Creates the record unless its id exists.
    pub async fn create(&self, rec: &CorrelationRecord) -> Result<Created, StoreError> {
        match self.kv.create(&rec.correlation_id, encode(rec)).await {
            Ok(rev) => Ok(Created::Created(rev)),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => Ok(Created::Exists),
            Err(e) => Err(StoreError::Nats(format!(
                "create {}: {e}",
                rec.correlation_id
            ))),
        }
    }

    /// Writes `rec` if the stored revision is still `revision`.
    pub async fn update(&self, rec: &CorrelationRecord, revision: u64) -> Result<u64, StoreError> {
        self.kv
            .update(&rec.correlation_id, encode(rec), revision)
            .await
            .map_err(|e| {
                if e.kind() == kv::UpdateErrorKind::WrongLastRevision {
                    StoreError::Conflict(rec.correlation_id.clone())
                } else {
                    StoreError::Nats(format!("update {}: {e}", rec.correlation_id))
                }
            })
    }

    /// One record and its revision.
    pub async fn get(&self, id: &str) -> Result<Option<(CorrelationRecord, u64)>, StoreError> {
        let entry = self
            .kv
            .entry(id)
            .await
            .map_err(|e| StoreError::Nats(format!("get {id}: {e}")))?;
        match entry {
            Some(e) if e.operation == kv::Operation::Put => {
                let rec = serde_json::from_slice(&e.value)
                    .map_err(|err| StoreError::Corrupt(id.to_string(), err.to_string()))?;
                Ok(Some((rec, e.revision)))
            }
            _ => Ok(None),
        }
    }

    /// Every record (unreadable ones are logged and skipped).
    pub async fn list(&self) -> Result<Vec<CorrelationRecord>, StoreError> {
        let mut keys = match self.kv.keys().await {
            Ok(k) => k,
            Err(e) => return Err(StoreError::Nats(format!("list keys: {e}"))),
        };
        let mut ids = Vec::new();
        while let Some(k) = keys.next().await {
            ids.push(k.map_err(|e| StoreError::Nats(format!("list keys: {e}")))?);
        }
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            match self.get(&id).await {
                Ok(Some((rec, _))) => out.push(rec),
                Ok(None) => {}
                Err(StoreError::Corrupt(id, e)) => {
                    tracing::error!(correlation_id = %id, error = %e, "skipping unreadable correlation record");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}
