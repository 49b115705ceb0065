//! Checkpoints in the KV bucket `checkpoints` (key = checkpoint id,
//! `<workflow_id>.<pause seq>`). A checkpoint is written once per pause; a
//! rewrite after a crash stores the same content again.

use async_nats::jetstream::kv;
use bytes::Bytes;

use crate::workflow::Checkpoint;

/// KV bucket of checkpoints.
pub const CHECKPOINTS_BUCKET: &str = "checkpoints";

/// KV-backed checkpoint store.
#[derive(Clone)]
pub struct CheckpointStore {
    kv: kv::Store,
}

impl std::fmt::Debug for CheckpointStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CheckpointStore")
    }
}

impl CheckpointStore {
    /// Wraps a bucket.
    pub fn new(kv: kv::Store) -> Self {
        CheckpointStore { kv }
    }

    /// Stores `cp` under its id.
    pub async fn put(&self, cp: &Checkpoint) -> Result<(), String> {
        let body = serde_json::to_vec(cp).map_err(|e| e.to_string())?;
        self.kv
            .put(&cp.checkpoint_id, Bytes::from(body))
            .await
            .map(|_| ())
            .map_err(|e| format!("checkpoint {}: {e}", cp.checkpoint_id))
    }

    /// One checkpoint.
    pub async fn get(&self, id: &str) -> Result<Option<Checkpoint>, String> {
        match self
            .kv
            .get(id)
            .await
            .map_err(|e| format!("checkpoint {id}: {e}"))?
        {
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| format!("checkpoint {id} does not parse: {e}")),
            None => Ok(None),
        }
    }
}
