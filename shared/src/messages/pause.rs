//! DD-012 pause/resume messages: `pause_request`, `pause_complete`,
//! `resume_command`, `batch_pause_request`. The seed's `stock_id` is the
//! item a workflow analyses (any item, not only stocks).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::validate::{non_empty, non_empty_list};
use super::{MessageContent, ValidationError};
use crate::envelope::MessageType;

fn default_max_concurrency() -> u32 {
    5
}

/// Pause one item's workflow (sent on a tier-2 failure, or by a person).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PauseRequest {
    /// The item, e.g. `AAPL`.
    pub stock_id: String,
    /// Why, shown to people.
    pub reason: String,
    /// Checkpoint to resume from, when one already exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_id: Option<String>,
    /// Who asked: e.g. `tier2_failure`, `human`, `correlator`.
    pub trigger_source: String,
    /// The workflow, when the item has several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
}

impl MessageContent for PauseRequest {
    const MESSAGE_TYPE: MessageType = MessageType::PauseRequest;

    fn validate(&self) -> Result<(), ValidationError> {
        non_empty("stock_id", &self.stock_id)
    }
}

/// A workflow reached PAUSED.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PauseComplete {
    /// The item.
    pub stock_id: String,
    /// When it was paused.
    pub paused_at: DateTime<Utc>,
    /// Stages that must be resolved before it can resume (e.g. the failed one).
    #[serde(default)]
    pub resume_dependencies: Vec<String>,
    /// The checkpoint saved on pause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_id: Option<String>,
    /// The workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
}

impl MessageContent for PauseComplete {
    const MESSAGE_TYPE: MessageType = MessageType::PauseComplete;

    fn validate(&self) -> Result<(), ValidationError> {
        non_empty("stock_id", &self.stock_id)
    }
}

/// Which stages a resume restarts, skips and waits for.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ResumePlan {
    /// The failed stage and all its dependents: run again.
    #[serde(default)]
    pub restart: Vec<String>,
    /// Completed stages: keep their outputs.
    #[serde(default)]
    pub skip: Vec<String>,
    /// Parallel stages still in flight: wait for them.
    #[serde(default)]
    pub wait: Vec<String>,
}

/// Resume a paused workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResumeCommand {
    /// The item.
    pub stock_id: String,
    /// The plan; when absent the coordinator computes it from the checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_plan: Option<ResumePlan>,
    /// Send an alert card when the resume happens.
    #[serde(default)]
    pub notify: bool,
    /// The workflow, when the item has several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
}

impl MessageContent for ResumeCommand {
    const MESSAGE_TYPE: MessageType = MessageType::ResumeCommand;

    fn validate(&self) -> Result<(), ValidationError> {
        non_empty("stock_id", &self.stock_id)
    }
}

/// Pause many items at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchPauseRequest {
    /// The items.
    pub stock_ids: Vec<String>,
    /// Why, shown to people.
    pub reason: String,
    /// Id of the batch operation.
    pub batch_id: String,
    /// How many pauses run at once (default 5).
    #[serde(default = "default_max_concurrency")]
    pub max_concurrency: u32,
}

impl MessageContent for BatchPauseRequest {
    const MESSAGE_TYPE: MessageType = MessageType::BatchPauseRequest;

    fn validate(&self) -> Result<(), ValidationError> {
        non_empty_list("stock_ids", &self.stock_ids)?;
        non_empty("batch_id", &self.batch_id)?;
        if self.max_concurrency == 0 {
            return Err(ValidationError::Rule {
                field: "max_concurrency",
                rule: "must be at least 1",
            });
        }
        Ok(())
    }
}
