//! The stored record of a pattern run (KV bucket `pattern_runs`, key = run
//! id), rewritten after every round so a run can be followed while it goes.

use async_nats::jetstream::kv;
use bytes::Bytes;
/// KV bucket of pattern runs.
pub const PATTERN_RUNS_BUCKET: &str = "pattern_runs";

// The record is the API's reply: its types live with the API.
pub use caucus_shared::api::coordinator::patterns::{
    PatternRun, RunState, Summary, RUN_SCHEMA_VERSION,
};

/// Errors of the run store.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// NATS KV failed.
    #[error("pattern run store: {0}")]
    Kv(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A record does not serialise.
    #[error("pattern run store: {0}")]
    Encode(#[source] serde_json::Error),
    /// A stored record does not parse.
    #[error("pattern run `{run_id}` is corrupt: {source}")]
    Corrupt {
        /// The run.
        run_id: String,
        /// What does not parse.
        #[source]
        source: serde_json::Error,
    },
}

/// The `pattern_runs` bucket.
#[derive(Clone)]
pub struct RunStore {
    kv: kv::Store,
}

impl RunStore {
    /// Wraps an opened bucket.
    pub fn new(kv: kv::Store) -> Self {
        RunStore { kv }
    }

    /// Writes `run` (one writer per run: the coordinator running it).
    pub async fn put(&self, run: &PatternRun) -> Result<(), RecordError> {
        let body = serde_json::to_vec(run).map_err(RecordError::Encode)?;
        self.kv
            .put(&run.run_id, Bytes::from(body))
            .await
            .map(|_| ())
            .map_err(|e| RecordError::Kv(Box::new(e)))
    }

    /// Reads a run.
    pub async fn get(&self, run_id: &str) -> Result<Option<PatternRun>, RecordError> {
        let Some(bytes) = self
            .kv
            .get(run_id)
            .await
            .map_err(|e| RecordError::Kv(Box::new(e)))?
        else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| RecordError::Corrupt {
                run_id: run_id.to_string(),
                source,
            })
    }
}
