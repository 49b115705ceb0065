//! The level review (docs/LEVEL-REVIEW.md): the params a review task is
//! dispatched with, what the built-in reviewer answers, and the normalised
//! review next-level tasks receive as `inputs.level_review`.
//!
//! A reviewer's answer itself is free-form (caucus names, the seed's names,
//! a bare text): the coordinator normalises whatever JSON it gets into a
//! [`LevelReview`], so that answer is read as JSON there, not through a
//! struct here.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::lenient;

/// The `params.kind` of every review task.
pub const REVIEW_KIND: &str = "level_review";

/// One resource modified by two or more tasks of a level.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Conflict {
    /// The resource (file path, table, key… as the tasks reported it).
    pub resource: String,
    /// Task keys that modified it, sorted.
    pub tasks: Vec<String>,
}

/// A conflict as the review left it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReviewedConflict {
    /// The resource.
    pub resource: String,
    /// Task keys that modified it (empty for one only the reviewer found).
    #[serde(default)]
    pub tasks: Vec<String>,
    /// The reviewer resolved it.
    pub resolved: bool,
    /// How, in the reviewer's words.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resolution: String,
}

/// The review of one level, as next-level tasks receive it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LevelReview {
    /// The level reviewed.
    pub level: u32,
    /// Every detected conflict (plus any the reviewer reported) with its
    /// `resolved` flag.
    #[serde(default)]
    pub conflicts: Vec<ReviewedConflict>,
    /// The reviewer's analysis.
    #[serde(default)]
    pub summary: String,
    /// Fixes the reviewer applied.
    #[serde(default)]
    pub fixes_applied: Vec<String>,
    /// What the next level's tasks must take into account.
    #[serde(default)]
    pub warnings_for_next_level: Vec<String>,
    /// How long the review took, in milliseconds (the reviewer's figure,
    /// else measured).
    pub duration_ms: u64,
    /// What the coordinator had to correct in the reviewer's answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub issues: Vec<String>,
}

/// What one task of a level produced, as the reviewer sees it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskSummary {
    /// Task key (`stage` or `stage#shard`).
    pub task: String,
    /// Its stage.
    pub stage: String,
    /// The agent type that ran it.
    pub agent_type: String,
    /// Resources it reports having modified (sorted, de-duplicated).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modified_resources: Vec<String>,
    /// Its output's `summary`, cut to 500 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// When it finished (a reviewer may prefer the later change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
}

/// The mechanical context of a completed level.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LevelContext {
    /// The level (0 = the roots).
    pub level: u32,
    /// Its tasks, by key.
    pub tasks: Vec<TaskSummary>,
}

/// The params of a review task, as the coordinator dispatches them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReviewParams {
    /// Always [`REVIEW_KIND`].
    pub kind: String,
    /// The level to review.
    pub level: u32,
    /// The level that waits for the review (`null` after the last level).
    pub next_level: Option<u32>,
    /// The review mode that asked for it (`always`, `conflicts`).
    pub mode: String,
    /// The level's context.
    pub context: LevelContext,
    /// The conflicts detected in the level.
    pub conflicts: Vec<Conflict>,
}

/// [`ReviewParams`] as a reviewer reads them: leniently, so that it names
/// what is missing instead of failing on the first odd field.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ReviewParamsView {
    /// Always [`REVIEW_KIND`].
    #[serde(default, deserialize_with = "lenient")]
    pub kind: Option<String>,
    /// The level to review.
    #[serde(default, deserialize_with = "lenient")]
    pub level: Option<u64>,
    /// The level that waits for the review (`null` after the last level).
    #[serde(default, deserialize_with = "lenient")]
    pub next_level: Option<u64>,
    /// The review mode that asked for it (`always`, `conflicts`).
    #[serde(default, deserialize_with = "lenient")]
    pub mode: Option<String>,
    /// The level's context.
    #[serde(default, deserialize_with = "lenient")]
    pub context: Option<ReviewContext>,
    /// The conflicts detected in the level.
    #[serde(default, deserialize_with = "lenient")]
    pub conflicts: Option<Vec<ConflictEntry>>,
}

/// [`LevelContext`] as a reviewer reads it: only what it needs, each part
/// optional.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ReviewContext {
    /// The level.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub level: Option<u64>,
    /// The level's tasks.
    #[serde(default, deserialize_with = "lenient")]
    pub tasks: Option<Vec<ReviewedTask>>,
}

/// A [`TaskSummary`] as a reviewer reads it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ReviewedTask {
    /// Task key.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub task: Option<String>,
    /// When it finished (RFC 3339 text: one clock's times sort as text).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub finished_at: Option<String>,
}

/// A [`Conflict`] as a reviewer reads it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ConflictEntry {
    /// The resource.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub resource: Option<String>,
    /// Task keys that modified it.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub tasks: Option<Vec<String>>,
}

/// What the built-in reviewer answers (one of the shapes
/// [`LevelReview`] is normalised from).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReviewerOutput {
    /// The level reviewed.
    pub level: u64,
    /// Each detected conflict, resolved.
    pub conflicts: Vec<ReviewedConflict>,
    /// One line: tasks reviewed, conflicts resolved.
    pub summary: String,
    /// One line per conflict: whose version was kept.
    pub fixes_applied: Vec<String>,
    /// What the next level must check.
    pub warnings_for_next_level: Vec<String>,
    /// Who reviewed (`builtin`).
    pub reviewer: String,
}
