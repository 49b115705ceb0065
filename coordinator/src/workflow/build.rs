//! Instantiating a pipeline's stages into a fresh workflow record.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{TaskRecord, TaskRunState, WorkflowRecord, WorkflowState, WORKFLOW_SCHEMA_VERSION};
pub use crate::pipeline::StageKind;

/// Retry policy of a stage.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct StageRetry {
    /// Attempts in all, including the first.
    pub max_attempts: u32,
    /// First backoff.
    pub backoff_initial_ms: u64,
    /// Backoff ceiling.
    pub backoff_max_ms: u64,
}

impl Default for StageRetry {
    fn default() -> Self {
        StageRetry {
            max_attempts: 3,
            backoff_initial_ms: 200,
            backoff_max_ms: 5000,
        }
    }
}

impl StageRetry {
    /// Whether this is the default policy (left out of stored records).
    pub fn is_default(&self) -> bool {
        *self == StageRetry::default()
    }

    /// Backoff before attempt `next_attempt` (2, 3, …): doubling from the initial.
    pub fn backoff_ms(&self, next_attempt: u32) -> u64 {
        let exp = next_attempt.saturating_sub(2).min(20);
        self.backoff_initial_ms
            .saturating_mul(1u64 << exp)
            .min(self.backoff_max_ms)
    }
}

/// One stage as the runtime needs it (validated pipeline spec → this).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StageDef {
    /// Stage name.
    pub name: String,
    /// Agent type that runs it.
    pub agent_type: String,
    /// Stages it waits for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// Expected duration in time units.
    pub expected: f64,
    /// Hard limit in time units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// Retry policy.
    #[serde(default, skip_serializing_if = "StageRetry::is_default")]
    pub retry: StageRetry,
    /// Copies of the stage (1 = no fan-out).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub fan_out: u32,
    /// Parameters passed to the task (for a gate: its reminder settings).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub params: Value,
    /// `task` (dispatched to an agent) or `gate` (decided by a person).
    #[serde(default, skip_serializing_if = "StageKind::is_task")]
    pub kind: StageKind,
}

impl StageDef {
    /// Whether this stage is a human gate.
    pub fn is_gate(&self) -> bool {
        self.kind == StageKind::Gate
    }
}

fn one() -> u32 {
    1
}

// Defaults are left out of stored records: every workflow record carries
// its stages and is rewritten as its tasks progress, so each byte is
// written many times.
fn is_one(n: &u32) -> bool {
    *n == 1
}

/// Longest remaining path (own duration included) per stage.
pub(crate) fn remaining_paths(stages: &[StageDef]) -> HashMap<String, f64> {
    let mut dependents: HashMap<&str, Vec<&StageDef>> = HashMap::new();
    for s in stages {
        for d in &s.depends_on {
            dependents.entry(d.as_str()).or_default().push(s);
        }
    }
    fn go<'a>(
        s: &'a StageDef,
        dependents: &HashMap<&str, Vec<&'a StageDef>>,
        memo: &mut HashMap<String, f64>,
    ) -> f64 {
        if let Some(v) = memo.get(&s.name) {
            return *v;
        }
        let tail = dependents
            .get(s.name.as_str())
            .map(|ds| {
                ds.iter()
                    .map(|d| go(d, dependents, memo))
                    .fold(0.0, f64::max)
            })
            .unwrap_or(0.0);
        let v = s.expected + tail;
        memo.insert(s.name.clone(), v);
        v
    }
    let mut memo = HashMap::new();
    for s in stages {
        go(s, &dependents, &mut memo);
    }
    memo
}

/// Task key of a stage copy.
pub(crate) fn task_key(stage: &str, shard: Option<u32>) -> String {
    match shard {
        Some(i) => format!("{stage}#{i}"),
        None => stage.to_string(),
    }
}

/// A new workflow: tasks without dependencies are `Ready`, the rest `Waiting`.
/// The stages must already be validated (acyclic, known dependencies).
pub fn instantiate(
    workflow_id: String,
    item: String,
    pipeline: String,
    stages: impl Into<std::sync::Arc<Vec<StageDef>>>,
    unit_ms: u64,
    now: DateTime<Utc>,
) -> WorkflowRecord {
    // Workflows of one submission share one stage list (an `Arc`).
    let stages: std::sync::Arc<Vec<StageDef>> = stages.into();
    let paths = remaining_paths(&stages);
    let mut tasks = BTreeMap::new();
    for s in stages.iter() {
        let shards: Vec<Option<u32>> = if s.fan_out > 1 {
            (0..s.fan_out).map(Some).collect()
        } else {
            vec![None]
        };
        for shard in shards {
            tasks.insert(
                task_key(&s.name, shard),
                TaskRecord::new(
                    s.name.clone(),
                    s.agent_type.clone(),
                    shard,
                    if s.depends_on.is_empty() {
                        TaskRunState::Ready
                    } else {
                        TaskRunState::Waiting
                    },
                    paths.get(&s.name).copied().unwrap_or(s.expected),
                ),
            );
        }
    }
    let mut rec = WorkflowRecord {
        schema_version: WORKFLOW_SCHEMA_VERSION,
        workflow_id,
        item,
        pipeline,
        state: WorkflowState::Pending,
        stages,
        tasks,
        unit_ms,
        created_at: now,
        updated_at: now,
        finished_at: None,
        failure: None,
        pause: None,
        pause_count: 0,
        research: None,
        level_review: None,
        resolved_assumptions: BTreeMap::new(),
        reruns: Vec::new(),
        auto_approve_gates: false,
        flags: Vec::new(),
        epoch: 0,
        trace_parent: None,
        trace_state: None,
    };
    // A gate without dependencies waits for its person from the start.
    rec.open_gates(now);
    rec
}

/// Equal stage lists of reloaded workflows made one shared list again
/// (one `Arc` per distinct list of a pipeline).
#[derive(Debug, Default)]
pub struct StageLists {
    by_pipeline: HashMap<String, Vec<std::sync::Arc<Vec<StageDef>>>>,
}

impl StageLists {
    /// The shared list equal to `stages`, remembering it when it is new.
    pub fn intern(
        &mut self,
        pipeline: &str,
        stages: std::sync::Arc<Vec<StageDef>>,
    ) -> std::sync::Arc<Vec<StageDef>> {
        let known = self.by_pipeline.entry(pipeline.to_string()).or_default();
        if let Some(same) = known.iter().find(|k| **k == stages) {
            return same.clone();
        }
        known.push(stages.clone());
        stages
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_stages_leave_out_defaults_and_read_back_either_way() {
        let plain = StageDef {
            name: "b".into(),
            agent_type: "a".into(),
            depends_on: Vec::new(),
            expected: 2.0,
            timeout: None,
            retry: StageRetry::default(),
            fan_out: 1,
            params: Value::Null,
            kind: StageKind::default(),
        };
        let json = serde_json::to_value(&plain).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"name": "b", "agent_type": "a", "expected": 2.0})
        );
        // A record written before defaults were left out reads the same.
        let old = serde_json::json!({"name": "b", "agent_type": "a", "depends_on": [],
            "expected": 2.0, "retry": {"max_attempts": 3, "backoff_initial_ms": 200,
            "backoff_max_ms": 5000}, "fan_out": 1});
        assert_eq!(serde_json::from_value::<StageDef>(old).unwrap(), plain);
        let custom = StageDef {
            depends_on: vec!["x".into()],
            retry: StageRetry {
                max_attempts: 5,
                ..StageRetry::default()
            },
            fan_out: 3,
            ..plain
        };
        let back: StageDef = serde_json::from_slice(&serde_json::to_vec(&custom).unwrap()).unwrap();
        assert_eq!(back, custom, "values that are not defaults are kept");
    }
}
