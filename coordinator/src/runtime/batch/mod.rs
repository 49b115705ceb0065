//! The BatchManager: pause and resume many workflows as one operation.
//!
//! Batches live in the KV bucket `batches` (written by the leader only,
//! with revision checks). A batch pause pauses the latest workflow of each
//! item in waves of `max_concurrency`, stopping if more than the failure
//! ratio of a wave fails. A batch resume moves the paused items to a queue
//! and [`BatchManager::drive`] resumes them in order (gate time-outs
//! first, then the oldest pause) while fewer than `concurrency_limit` of
//! them are resumed-and-unfinished and the capacity rule allows
//! ([`logic::capacity_blocker`]); it stops the batch if more than the
//! failure ratio of the resumes fail (the workflow pauses again).
//!
//! With several partitions each partition's manager holds its part of a
//! batch (its own workflows, stored as `<batch id>.p<partition>`), and
//! the concurrency limit is kept across the parts in Redis
//! ([`spread`]); the router splits and merges (`route/batches.rs`).

pub mod logic;
mod part;
mod pause;
mod resume;
pub mod spread;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use async_nats::jetstream::kv;
use bytes::Bytes;
use futures::StreamExt;

use caucus_shared::api::coordinator::control::BatchStatusReply;
use caucus_shared::nats::ApiError;

use crate::engine::Engine;
use crate::workflow::WorkflowRecord;
use logic::BatchRecord;

pub use part::{PartPause, PartResume};
pub use pause::{batch_id_for_correlation, trigger_reason, valid_id};

// The request bodies are the API's types (`caucus_shared::api::coordinator::control`).
pub use caucus_shared::api::coordinator::control::{
    BatchPauseRequest as BatchPauseArgs, BatchResumeRequest as BatchResumeArgs,
};

/// KV bucket of batches.
pub const BATCHES_BUCKET: &str = "batches";

/// Why the stored batches could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BatchLoadError {
    /// The bucket's keys could not be listed.
    #[error("batches: {0}")]
    Keys(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// One batch could not be read.
    #[error("batch {id}: {source}")]
    Entry {
        /// The batch.
        id: String,
        /// What the store said.
        #[source]
        source: kv::EntryError,
    },
}

/// The latest workflow of each item held by the engine.
fn latest_by_item(engine: &Engine) -> HashMap<&str, &WorkflowRecord> {
    let mut m: HashMap<&str, &WorkflowRecord> = HashMap::new();
    for r in engine.workflows() {
        let e = m.entry(r.item.as_str()).or_insert(r);
        if (r.created_at, &r.workflow_id) > (e.created_at, &e.workflow_id) {
            *e = r;
        }
    }
    m
}

/// Batches held by the leader.
pub struct BatchManager {
    kv: kv::Store,
    batches: BTreeMap<String, (BatchRecord, Option<u64>)>,
    dirty: BTreeSet<String>,
    default_concurrency: u32,
    ratio: f64,
    /// With several partitions: this part's share of the batches' slots.
    spread: Option<spread::Spread>,
}

impl BatchManager {
    /// Over the `batches` bucket.
    pub fn new(kv: kv::Store, default_concurrency: u32, ratio: f64) -> Self {
        BatchManager {
            kv,
            batches: BTreeMap::new(),
            dirty: BTreeSet::new(),
            default_concurrency: default_concurrency.max(1),
            ratio,
            spread: None,
        }
    }

    /// Serves partition `part` of several: holds only the parts of batches
    /// whose workflows it owns, and takes their running slots from Redis.
    /// With one partition nothing changes.
    pub fn with_partition(
        mut self,
        part: crate::runtime::partition::Partition,
        redis: caucus_shared::redis::RedisPool,
        prefix: &str,
    ) -> Self {
        if part.count <= 1 {
            return self;
        }
        match caucus_shared::redis::BatchSlots::new(redis, prefix) {
            Ok(slots) => self.spread = Some(spread::Spread::new(part, slots)),
            // The prefix was checked when the coordinator started.
            Err(e) => tracing::error!(error = %e, "batch slots unusable"),
        }
        self
    }

    /// Whether this manager holds parts of batches that span partitions.
    pub fn is_spread(&self) -> bool {
        self.spread.is_some()
    }

    /// The KV key of batch `id`: the id with one partition, `<id>.p<k>`
    /// (this partition's part) with several.
    fn kv_key(&self, id: &str) -> String {
        match &self.spread {
            Some(s) => s.kv_key(id),
            None => id.to_string(),
        }
    }

    /// The batch id stored under `key`, when it is this manager's: every
    /// plain id with one partition, this partition's parts with several.
    fn id_of_key(&self, key: &str) -> Option<String> {
        match &self.spread {
            Some(s) => s.id_of_key(key),
            // A batch id never holds `.`: such keys are parts of
            // partitioned batches, not batches of one partition.
            None => (!key.contains('.')).then(|| key.to_string()),
        }
    }

    /// Loads every stored batch.
    pub async fn load(&mut self) -> Result<usize, BatchLoadError> {
        let mut keys = self
            .kv
            .keys()
            .await
            .map_err(|e| BatchLoadError::Keys(Box::new(e)))?;
        let mut ids = Vec::new();
        while let Some(k) = keys.next().await {
            let key = k.map_err(|e| BatchLoadError::Keys(Box::new(e)))?;
            if let Some(id) = self.id_of_key(&key) {
                ids.push((id, key));
            }
        }
        for (id, key) in ids {
            match self.kv.entry(&key).await {
                Ok(Some(e)) if e.operation == kv::Operation::Put => {
                    match serde_json::from_slice::<BatchRecord>(&e.value) {
                        Ok(b) => {
                            if let Some(s) = self.spread.as_mut() {
                                s.loaded(&id);
                            }
                            self.batches.insert(id, (b, Some(e.revision)));
                        }
                        Err(err) => {
                            tracing::error!(batch_id = %id, error = %err, "skipping unreadable batch")
                        }
                    }
                }
                Ok(_) => {}
                Err(source) => return Err(BatchLoadError::Entry { id, source }),
            }
        }
        Ok(self.batches.len())
    }

    /// Writes changed batches (revision-checked).
    pub async fn persist(&mut self) {
        let ids: Vec<String> = std::mem::take(&mut self.dirty).into_iter().collect();
        for id in ids {
            let Some((rec, rev)) = self.batches.get(&id) else {
                continue;
            };
            let body = Bytes::from(serde_json::to_vec(rec).expect("batch serialises"));
            let key = self.kv_key(&id);
            // Either error only goes to the log: the batch stays dirty.
            let r: Result<u64, Box<dyn std::error::Error + Send + Sync>> = match rev {
                Some(rev) => self.kv.update(&key, body, *rev).await.map_err(Into::into),
                None => self.kv.create(&key, body).await.map_err(Into::into),
            };
            match r {
                Ok(new_rev) => {
                    if let Some(e) = self.batches.get_mut(&id) {
                        e.1 = Some(new_rev);
                    }
                }
                Err(e) => {
                    tracing::warn!(batch_id = %id, error = %e, "cannot store batch; will retry");
                    self.dirty.insert(id);
                }
            }
        }
    }

    /// The `batch_status` reply of `batch_id`.
    pub fn status(&self, batch_id: &str) -> Result<BatchStatusReply, ApiError> {
        let (b, _) = self
            .batches
            .get(batch_id)
            .ok_or_else(|| ApiError::not_found(format!("no batch `{batch_id}`")))?;
        Ok(status_reply(b))
    }
}

/// `{batch_id, state, total, paused, resumed, failed, skipped, …}`.
fn status_reply(b: &BatchRecord) -> BatchStatusReply {
    let c = b.counts();
    BatchStatusReply {
        batch_id: b.batch_id.clone(),
        state: b.state,
        reason: b.reason.clone(),
        correlation_id: b.correlation_id.clone(),
        total: c.total,
        paused: c.paused,
        resumed: c.resumed,
        failed: c.failed,
        skipped: c.skipped,
        max_concurrency: b.max_concurrency,
        concurrency_limit: b.concurrency_limit,
        stop_reason: b.stop_reason.clone(),
        items: b.items.clone(),
        created_at: b.created_at,
        updated_at: b.updated_at,
    }
}
