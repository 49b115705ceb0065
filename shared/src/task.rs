//! Task dispatch and task events: the coordinator ↔ worker contract.
//!
//! A [`TaskDispatch`] is published on `caucus.tasks.<agent_type>` with
//! `Nats-Msg-Id` = [`TaskDispatch::msg_id`]; workers answer with
//! [`TaskEvent`]s on `caucus.events.task.<agent_type>.<status>`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Version of the task wire types.
pub const TASK_SCHEMA_VERSION: u32 = 1;

fn schema_v1() -> u32 {
    TASK_SCHEMA_VERSION
}

/// One task of one workflow, sent to the workers of its agent type.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskDispatch {
    /// Wire version of this body.
    #[serde(default = "schema_v1")]
    pub schema_version: u32,
    /// `<workflow_id>/<stage>` (plus `#<shard>` for fan-out copies).
    pub task_id: String,
    /// The workflow this task belongs to.
    pub workflow_id: String,
    /// The item (e.g. ticker) the workflow analyses.
    pub item: String,
    /// Pipeline name.
    pub pipeline: String,
    /// Stage name within the pipeline.
    pub stage: String,
    /// Agent type that must run it.
    pub agent_type: String,
    /// 1 for the first run, +1 per retry or re-run.
    pub attempt: u32,
    /// Shard index for fan-out stages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u32>,
    /// Outputs of the stages it depends on, keyed by stage name.
    #[serde(default)]
    pub inputs: BTreeMap<String, Value>,
    /// Stage parameters from the pipeline spec.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub params: Value,
    /// Expected run time in milliseconds (for pacing and overdue flags).
    #[serde(default)]
    pub expected_ms: u64,
    /// Hard time limit in milliseconds; 0 = none.
    #[serde(default)]
    pub timeout_ms: u64,
    /// Longest remaining path from this task to the end of its workflow
    /// (time units): larger runs first.
    #[serde(default)]
    pub priority: f64,
    /// When the coordinator dispatched it.
    pub dispatched_at: DateTime<Utc>,
    /// The coordinator partition that owns the workflow; absent with one
    /// partition. The attempt's events go to that partition's subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
}

impl TaskDispatch {
    /// De-duplication id: one per task attempt.
    pub fn msg_id(&self) -> String {
        format!("{}@{}", self.task_id, self.attempt)
    }
}

/// Lifecycle status of a task attempt.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// A worker holds a lease and started it.
    Started,
    /// Still running (optional heartbeat with a message).
    Progress,
    /// Finished with an output.
    Completed,
    /// Finished with an error.
    Failed,
}

impl TaskStatus {
    /// The subject token.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Started => "started",
            TaskStatus::Progress => "progress",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
        }
    }
}

/// How a failure should be treated.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// May succeed if retried (timeouts, connection errors).
    #[default]
    Transient,
    /// Retrying will not help (bad input, handler bug).
    Permanent,
}

/// `error_type`s the coordinator itself records for an attempt (the worker
/// never sent a result). The first two are infrastructure trouble (a lost
/// worker or event, NATS unwell) and are retried; they say nothing about the
/// agent or its data sources, so they are not reported to the correlator.
pub mod coordinator_errors {
    /// No `started`/`progress` for `ack_wait + lease_ttl`.
    pub const SILENT: &str = "silent";
    /// JetStream did not confirm the dispatch.
    pub const DISPATCH_FAILED: &str = "dispatch_failed";
    /// JetStream gave up delivering the task (`max_deliver`).
    pub const MAX_DELIVERIES: &str = "max_deliveries";
    /// The worker's event about the attempt was dead-lettered.
    pub const EVENT_DEAD_LETTERED: &str = "event_dead_lettered";

    /// Whether `error_type` is infrastructure trouble, not the agent's.
    pub fn is_infrastructure(error_type: &str) -> bool {
        matches!(error_type, SILENT | DISPATCH_FAILED)
    }
}

/// Why a task attempt failed.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct TaskError {
    /// Transient or permanent.
    #[serde(default)]
    pub class: ErrorClass,
    /// Short machine-readable kind, e.g. `quota_exceeded`, `timeout`.
    pub error_type: String,
    /// Human-readable message (vendor text kept as-is).
    pub message: String,
    /// External data source involved, e.g. `koyfin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_source: Option<String>,
}

/// A worker's report about one task attempt.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskEvent {
    /// Wire version of this body.
    #[serde(default = "schema_v1")]
    pub schema_version: u32,
    /// The task.
    pub task_id: String,
    /// Its workflow.
    pub workflow_id: String,
    /// Its stage.
    pub stage: String,
    /// Its agent type.
    pub agent_type: String,
    /// The attempt this event is about.
    pub attempt: u32,
    /// What happened.
    pub status: TaskStatus,
    /// The reporting worker.
    pub worker_id: String,
    /// The result, with `Completed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The error, with `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TaskError>,
    /// Free text with `Progress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When the attempt started (set on every event after start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    /// When this event was emitted.
    pub at: DateTime<Utc>,
    /// The partition of the dispatch it answers (absent with one
    /// partition); the event is published on that partition's subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
}

/// Splits a task id, `<workflow_id>/<task key>`, into its two parts.
pub fn split_task_id(task_id: &str) -> Option<(&str, &str)> {
    task_id.split_once('/')
}

impl TaskEvent {
    /// De-duplication id: one per task attempt and status, and one per
    /// heartbeat for `progress` (each says the attempt is still alive, so
    /// none may be dropped as a duplicate of the one before).
    pub fn msg_id(&self) -> String {
        match self.status {
            TaskStatus::Progress => format!(
                "{}@{}:progress:{}",
                self.task_id,
                self.attempt,
                self.at.timestamp_micros()
            ),
            s => format!("{}@{}:{}", self.task_id, self.attempt, s.as_str()),
        }
    }
}

impl TaskDispatch {
    /// Decodes a dispatch as PROTOCOL.md says: size, JSON, a
    /// `schema_version` of 1 (or none), then the fields; errors carry the
    /// documented DLQ codes (`unsupported_schema_version`, …).
    pub fn decode(bytes: &[u8], max_bytes: usize) -> Result<Self, crate::envelope::DecodeError> {
        crate::envelope::decode_versioned(bytes, max_bytes, |d: &Self| d.schema_version)
    }
}

impl TaskEvent {
    /// Decodes a task event with the checks of [`TaskDispatch::decode`].
    pub fn decode(bytes: &[u8], max_bytes: usize) -> Result<Self, crate::envelope::DecodeError> {
        crate::envelope::decode_versioned(bytes, max_bytes, |e: &Self| e.schema_version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatch_round_trips_and_defaults() {
        let json = serde_json::json!({
            "task_id": "wf1/valuation", "workflow_id": "wf1", "item": "BRK.B",
            "pipeline": "stock-analysis", "stage": "valuation", "agent_type": "valuation",
            "attempt": 1, "dispatched_at": "2025-11-16T10:30:00Z"
        });
        let d: TaskDispatch = serde_json::from_value(json).unwrap();
        assert_eq!(d.schema_version, 1);
        assert!(d.inputs.is_empty());
        assert_eq!(d.msg_id(), "wf1/valuation@1");
        let back: TaskDispatch = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
        assert_eq!(back, d);
    }

    #[test]
    fn bodies_of_another_schema_version_are_refused_with_the_documented_code() {
        let v2 = br#"{"schema_version": 2, "task_id": "w/s", "workflow_id": "w", "status": "completed"}"#;
        let err = TaskEvent::decode(v2, 1 << 20).unwrap_err();
        assert_eq!(err.code(), "unsupported_schema_version");
        let bad = br#"{"task_id": 5}"#;
        assert_eq!(
            TaskDispatch::decode(bad, 1 << 20).unwrap_err().code(),
            "invalid_field"
        );
        assert_eq!(
            TaskDispatch::decode(b"{nope", 1 << 20).unwrap_err().code(),
            "malformed_json"
        );
    }
}
