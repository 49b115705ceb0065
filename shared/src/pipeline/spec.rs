//! The declarative pipeline spec: what a user writes in TOML (or sends as
//! JSON inline in an API request). Parsing only checks shape; call
//! `caucus_coordinator::pipeline::validate` for the semantic checks.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{LevelReviewSpec, PipelineError};

/// Current version of the spec format.
pub const SPEC_SCHEMA_VERSION: u32 = 1;

/// A pipeline: a DAG of stages, instantiated once per submitted item.
///
/// Durations are in abstract *time units*; the runtime maps one unit to a
/// configured wall-clock duration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineSpec {
    /// Version of this spec format (currently 1).
    #[serde(default = "schema_version")]
    pub schema_version: u32,
    /// Pipeline name, a subject token (`[a-z0-9_-]+`).
    pub name: String,
    /// Human description.
    #[serde(default)]
    pub description: String,
    /// Optional limit on a whole workflow (one item), in time units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// Default concurrent capacity per agent type (cluster-wide). Callers may
    /// override entries at plan/submit time.
    #[serde(default)]
    pub capacities: BTreeMap<String, u32>,
    /// The stages, in declaration order (which also breaks scheduling ties).
    #[serde(default)]
    pub stages: Vec<StageSpec>,
    /// Review gate between dependency levels; absent = the coordinator's
    /// configured default (docs/LEVEL-REVIEW.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level_review: Option<LevelReviewSpec>,
}

/// One stage of a pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageSpec {
    /// Stage name, unique in the pipeline, a subject token (`[a-z0-9_-]+`).
    pub name: String,
    /// Agent type that runs this stage; required for tasks, absent for gates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Stages that must complete (every fan-out copy) before this one starts.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// Expected duration in time units (default 1). Gates are planned as 0.
    #[serde(default = "default_duration")]
    pub expected_duration: f64,
    /// Time limit per attempt in time units; beyond it the task is failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// Retry policy for failed attempts.
    #[serde(default)]
    pub retry: RetryPolicy,
    /// Run this many copies, each with its shard index `0..fan_out`;
    /// dependents wait for all copies. When set, task ids carry `#<shard>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fan_out: Option<u32>,
    /// `task` (run by an agent) or `gate` (approved by a person).
    #[serde(default)]
    pub kind: StageKind,
    /// Free-form parameters handed to the task as JSON.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub params: serde_json::Map<String, serde_json::Value>,
}

/// What kind of work a stage is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageKind {
    /// Work dispatched to an agent of the stage's agent type.
    #[default]
    Task,
    /// A human approval point: needs no agent, planned with duration 0.
    Gate,
}

impl StageKind {
    /// Whether this is the default kind (skipped when serialising).
    pub fn is_task(&self) -> bool {
        *self == StageKind::Task
    }
}

/// How a failed attempt is retried, with exponential backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryPolicy {
    /// Attempts in total, including the first (default 3).
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// Delay before the first retry, in milliseconds (default 200).
    #[serde(default = "default_backoff_initial_ms")]
    pub backoff_initial_ms: u64,
    /// Upper bound on the delay between retries, in milliseconds (default 5000).
    #[serde(default = "default_backoff_max_ms")]
    pub backoff_max_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: default_max_attempts(),
            backoff_initial_ms: default_backoff_initial_ms(),
            backoff_max_ms: default_backoff_max_ms(),
        }
    }
}

fn schema_version() -> u32 {
    SPEC_SCHEMA_VERSION
}
fn default_duration() -> f64 {
    1.0
}
fn default_max_attempts() -> u32 {
    3
}
fn default_backoff_initial_ms() -> u64 {
    200
}
fn default_backoff_max_ms() -> u64 {
    5000
}

impl PipelineSpec {
    /// Parses a TOML spec. Checks shape only; see `caucus_coordinator::pipeline::validate`.
    pub fn from_toml(text: &str) -> Result<Self, PipelineError> {
        toml::from_str(text).map_err(|e| PipelineError::Parse {
            format: "toml",
            message: e.message().to_string(),
        })
    }

    /// Parses a JSON spec (the inline form in API requests, same shape as TOML).
    /// Checks shape only; see `caucus_coordinator::pipeline::validate`.
    pub fn from_json(value: serde_json::Value) -> Result<Self, PipelineError> {
        serde_json::from_value(value).map_err(|e| PipelineError::Parse {
            format: "json",
            message: e.to_string(),
        })
    }

    /// The stage with this name, if declared.
    pub fn stage(&self, name: &str) -> Option<&StageSpec> {
        self.stages.iter().find(|s| s.name == name)
    }
}

impl StageSpec {
    /// Number of task copies this stage creates per item.
    pub fn copies(&self) -> u32 {
        self.fan_out.unwrap_or(1)
    }

    /// Duration the planner uses: gates take no planned time.
    pub fn planned_duration(&self) -> f64 {
        match self.kind {
            StageKind::Task => self.expected_duration,
            StageKind::Gate => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_defaults_apply() {
        let spec = PipelineSpec::from_toml(
            r#"
            name = "p"
            [capacities]
            a = 2
            [[stages]]
            name = "one"
            agent = "a"
            [[stages]]
            name = "two"
            kind = "gate"
            depends_on = ["one"]
            expected_duration = 4.0
            [stages.params]
            note = "x"
            "#,
        )
        .unwrap();
        assert_eq!(spec.schema_version, 1);
        let one = &spec.stages[0];
        assert_eq!(one.expected_duration, 1.0);
        assert_eq!(one.retry, RetryPolicy::default());
        assert_eq!(one.retry.max_attempts, 3);
        assert_eq!(one.retry.backoff_initial_ms, 200);
        assert_eq!(one.retry.backoff_max_ms, 5000);
        assert_eq!(one.kind, StageKind::Task);
        let two = spec.stage("two").unwrap();
        assert_eq!(two.kind, StageKind::Gate);
        assert_eq!(two.planned_duration(), 0.0);
        assert_eq!(two.params["note"], "x");
    }

    #[test]
    fn json_has_the_same_shape() {
        let spec = PipelineSpec::from_json(serde_json::json!({
            "name": "p",
            "capacities": {"a": 1},
            "stages": [{"name": "s", "agent": "a", "fan_out": 3,
                        "retry": {"max_attempts": 1}}]
        }))
        .unwrap();
        assert_eq!(spec.stages[0].copies(), 3);
        assert_eq!(spec.stages[0].retry.max_attempts, 1);
        assert_eq!(spec.stages[0].retry.backoff_max_ms, 5000);
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err = PipelineSpec::from_toml(
            "name = \"p\"\n[[stages]]\nname = \"s\"\nagent = \"a\"\ndepend_on = []\n",
        )
        .unwrap_err();
        assert!(
            matches!(&err, PipelineError::Parse { format: "toml", message } if message.contains("depend_on")),
            "{err}"
        );
        let err = PipelineSpec::from_json(serde_json::json!({"name": 3})).unwrap_err();
        assert!(matches!(err, PipelineError::Parse { format: "json", .. }));
    }
}
