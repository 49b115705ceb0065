//! Workflow records in the `workflows` KV bucket, written with revision
//! checks so two writers can never silently clobber each other.

use async_nats::jetstream::kv;
use bytes::Bytes;
use futures::StreamExt;

use crate::workflow::WorkflowRecord;

/// Errors of the workflow store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The record changed under us (another writer).
    #[error("workflow {0}: revision conflict (another coordinator wrote it)")]
    Conflict(String),
    /// NATS failed.
    #[error("workflow store: {0}")]
    Nats(String),
    /// A stored record does not parse.
    #[error("workflow {0}: stored record does not parse: {1}")]
    Corrupt(String, String),
}

/// KV-backed store of workflow records.
#[derive(Clone)]
pub struct WorkflowStore {
    kv: kv::Store,
}

impl std::fmt::Debug for WorkflowStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkflowStore")
    }
}

fn encode(rec: &WorkflowRecord) -> Bytes {
    Bytes::from(serde_json::to_vec(rec).expect("workflow records serialise"))
}

impl WorkflowStore {
    /// Wraps a bucket.
    pub fn new(kv: kv::Store) -> Self {
        WorkflowStore { kv }
    }

    /// Creates a new record; fails if the id exists.
    pub async fn create(&self, rec: &WorkflowRecord) -> Result<u64, StoreError> {
        self.kv
            .create(&rec.workflow_id, encode(rec))
            .await
            .map_err(|e| StoreError::Nats(format!("create {}: {e}", rec.workflow_id)))
    }

    /// Writes `rec` if the stored revision is still `revision`.
    pub async fn update(&self, rec: &WorkflowRecord, revision: u64) -> Result<u64, StoreError> {
        self.kv
            .update(&rec.workflow_id, encode(rec), revision)
            .await
            .map_err(|e| {
                if e.kind() == kv::UpdateErrorKind::WrongLastRevision {
                    StoreError::Conflict(rec.workflow_id.clone())
                } else {
                    StoreError::Nats(format!("update {}: {e}", rec.workflow_id))
                }
            })
    }

    /// One record and its revision.
    pub async fn get(&self, id: &str) -> Result<Option<(WorkflowRecord, u64)>, StoreError> {
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

    /// Every stored record (for start-up and status of old workflows).
    pub async fn load_all(&self) -> Result<Vec<(WorkflowRecord, u64)>, StoreError> {
        let mut keys = self
            .kv
            .keys()
            .await
            .map_err(|e| StoreError::Nats(format!("list keys: {e}")))?;
        let mut out = Vec::new();
        let mut ids = Vec::new();
        while let Some(k) = keys.next().await {
            ids.push(k.map_err(|e| StoreError::Nats(format!("list keys: {e}")))?);
        }
        for id in ids {
            match self.get(&id).await {
                Ok(Some(r)) => out.push(r),
                Ok(None) => {}
                Err(StoreError::Corrupt(id, e)) => {
                    tracing::error!(workflow_id = %id, error = %e, "skipping unreadable workflow record");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}
