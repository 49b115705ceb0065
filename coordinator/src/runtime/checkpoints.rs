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
    pub async fn put(&self, cp: &Checkpoint) -> Result<(), CheckpointError> {
        let id = &cp.checkpoint_id;
        let body = serde_json::to_vec(cp).map_err(|source| CheckpointError::Encode {
            id: id.clone(),
            source,
        })?;
        self.kv
            .put(id, Bytes::from(body))
            .await
            .map(|_| ())
            .map_err(|e| CheckpointError::Store {
                id: id.clone(),
                source: e.into(),
            })
    }

    /// One checkpoint.
    pub async fn get(&self, id: &str) -> Result<Option<Checkpoint>, CheckpointError> {
        let entry = self.kv.get(id).await.map_err(|e| CheckpointError::Store {
            id: id.to_string(),
            source: e.into(),
        })?;
        match entry {
            Some(b) => {
                serde_json::from_slice(&b)
                    .map(Some)
                    .map_err(|source| CheckpointError::Parse {
                        id: id.to_string(),
                        source,
                    })
            }
            None => Ok(None),
        }
    }
}

/// Why a checkpoint could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The bucket failed.
    #[error("checkpoint {id}: {source}")]
    Store {
        /// The checkpoint's id.
        id: String,
        /// The KV error.
        #[source]
        source: caucus_shared::error::BoxError,
    },
    /// The checkpoint did not serialise.
    #[error("checkpoint {id}: {source}")]
    Encode {
        /// The checkpoint's id.
        id: String,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// The stored checkpoint does not parse.
    #[error("checkpoint {id} does not parse: {source}")]
    Parse {
        /// The checkpoint's id.
        id: String,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
}
