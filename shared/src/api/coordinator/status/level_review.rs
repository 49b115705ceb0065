//! The level review gate as a workflow view shows it
//! (docs/LEVEL-REVIEW.md).

use serde::{Deserialize, Serialize};

use crate::config::LevelReviewMode;

/// A workflow's review settings and the outcome of each level so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelReviewView {
    /// The settings, fixed at submit.
    pub policy: LevelReviewPolicyView,
    /// One entry per completed level, in level order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<LevelOutcomeView>,
}

/// The review settings of one workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelReviewPolicyView {
    /// When to review.
    pub mode: LevelReviewMode,
    /// The agent type that runs review tasks.
    pub agent: String,
    /// Expected duration of a review (time units).
    pub expected: f64,
    /// Time limit per review attempt (time units).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// Retry policy of review tasks.
    pub retry: RetryView,
}

/// A retry policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetryView {
    /// Attempts in all, including the first.
    pub max_attempts: u32,
    /// First backoff (ms).
    pub backoff_initial_ms: u64,
    /// Backoff ceiling (ms).
    pub backoff_max_ms: u64,
}

/// What the gate found and decided for one completed level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelOutcomeView {
    /// The level (0 = the roots).
    pub level: u32,
    /// Resources modified by two or more of its tasks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<ConflictView>,
    /// Key of the review task, when the mode asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_task: Option<String>,
    /// The normalised review, once its task completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<LevelReviewResultView>,
}

/// One resource modified by two or more tasks of a level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConflictView {
    /// The resource (file path, table, key… as the tasks reported it).
    pub resource: String,
    /// Task keys that modified it, sorted.
    pub tasks: Vec<String>,
}

/// The review of one level, as next-level tasks receive it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelReviewResultView {
    /// The level reviewed.
    pub level: u32,
    /// Every conflict with its `resolved` flag.
    #[serde(default)]
    pub conflicts: Vec<ReviewedConflictView>,
    /// The reviewer's analysis.
    #[serde(default)]
    pub summary: String,
    /// Fixes the reviewer applied.
    #[serde(default)]
    pub fixes_applied: Vec<String>,
    /// What the next level's tasks must take into account.
    #[serde(default)]
    pub warnings_for_next_level: Vec<String>,
    /// How long the review took (ms).
    pub duration_ms: u64,
    /// What the coordinator had to correct in the reviewer's answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub issues: Vec<String>,
}

/// A conflict as the review left it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewedConflictView {
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
