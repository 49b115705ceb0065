//! The stored record of a pattern run (KV bucket `pattern_runs`, key = run
//! id), rewritten after every round so a run can be followed while it goes.

use async_nats::jetstream::kv;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::result::{AgentResult, RoundRecord};
use super::runner::StopReason;

/// KV bucket of pattern runs.
pub const PATTERN_RUNS_BUCKET: &str = "pattern_runs";

/// Version of the run record.
pub const RUN_SCHEMA_VERSION: u32 = 1;

fn schema_v1() -> u32 {
    RUN_SCHEMA_VERSION
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Rounds still to go.
    Running,
    /// Every planned round ran (agents may still have failed).
    Completed,
    /// The run itself stopped (the coordinator shut down mid-run).
    Failed,
}

/// Counts over all results.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Results so far.
    pub results: usize,
    /// Successful ones.
    pub succeeded: usize,
    /// Failed ones.
    pub failed: usize,
}

/// One pattern run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatternRun {
    /// Wire version of this body.
    #[serde(default = "schema_v1")]
    pub schema_version: u32,
    /// Run id (UUID v7).
    pub run_id: String,
    /// Workflow id its dispatches carry (`pattern-<run_id>`).
    pub workflow_id: String,
    /// Pattern name.
    pub pattern: String,
    /// Agent types by position.
    pub agents: Vec<String>,
    /// The task.
    pub task: String,
    /// Effective parameters (defaults filled in).
    pub params: Value,
    /// Where it stands.
    pub state: RunState,
    /// Rounds finished so far, in order.
    pub rounds: Vec<RoundRecord>,
    /// Counts over all results.
    pub summary: Summary,
    /// Consensus: whether it was reached (set when the run ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consensus_reached: Option<bool>,
    /// Why the run ended before its last planned round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<StopReason>,
    /// Why the run itself failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
}

impl PatternRun {
    /// Adds a finished round and updates the counts.
    pub fn push_round(&mut self, round: RoundRecord) {
        for r in &round.results {
            self.summary.results += 1;
            if r.success {
                self.summary.succeeded += 1;
            } else {
                self.summary.failed += 1;
            }
        }
        self.rounds.push(round);
    }

    /// All results in the seed's order.
    pub fn results(&self) -> impl Iterator<Item = &AgentResult> {
        self.rounds.iter().flat_map(|r| r.results.iter())
    }

    /// The API form: the record plus a flat `results` list.
    pub fn to_reply(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            let results: Vec<&AgentResult> = self.results().collect();
            m.insert(
                "results".into(),
                serde_json::to_value(results).unwrap_or(Value::Null),
            );
        }
        v
    }
}

/// Errors of the run store.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// NATS KV failed.
    #[error("pattern run store: {0}")]
    Kv(String),
    /// A stored record does not parse.
    #[error("pattern run `{0}` is corrupt: {1}")]
    Corrupt(String, String),
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
        let body = serde_json::to_vec(run).map_err(|e| RecordError::Kv(e.to_string()))?;
        self.kv
            .put(&run.run_id, Bytes::from(body))
            .await
            .map(|_| ())
            .map_err(|e| RecordError::Kv(e.to_string()))
    }

    /// Reads a run.
    pub async fn get(&self, run_id: &str) -> Result<Option<PatternRun>, RecordError> {
        let Some(bytes) = self
            .kv
            .get(run_id)
            .await
            .map_err(|e| RecordError::Kv(e.to_string()))?
        else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| RecordError::Corrupt(run_id.to_string(), e.to_string()))
    }
}
