//! The optional `level_review` table of a pipeline spec: the review gate
//! between dependency levels (docs/LEVEL-REVIEW.md). Its checks and the
//! fallbacks to the coordinator's configuration are in the coordinator.

use serde::{Deserialize, Serialize};

use crate::config::LevelReviewMode;

use super::RetryPolicy;

/// `level_review = { mode = "always", agent = "reviewer", … }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LevelReviewSpec {
    /// `conflicts`, `always` or `off`; absent = `coordinator.level_review_mode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<LevelReviewMode>,
    /// Agent type that runs the review; absent = `coordinator.level_review_agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Expected duration of one review in time units (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_duration: Option<f64>,
    /// Time limit per review attempt in time units (default none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// Retry policy of the review task (default: the stage default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<RetryPolicy>,
}
