//! `submit` and `submission`: creating workflows, idempotently.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::{Operation, OperationDoc, CODE_NOT_FOUND, CODE_STANDBY, CODE_TIMEOUT};

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[
    OperationDoc::of::<Submit>(),
    OperationDoc::of::<Submission>(),
];

/// `caucus.api.coordinator.submit`: one workflow per item (the leader
/// answers).
#[derive(Debug, Clone, Copy)]
pub struct Submit;

impl Operation for Submit {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "submit";
    const MUTATES: bool = true;
    const SUMMARY: &'static str =
        "items + pipeline name or inline spec → the submission: workflow ids (the first 1,000)";
    const ERRORS: &'static [&'static str] = &[
        "unknown_pipeline",
        "invalid_pipeline",
        "idempotency_conflict",
        "store_failed",
        CODE_STANDBY,
        "unavailable",
        CODE_TIMEOUT,
    ];
    type Request = SubmitRequest;
    type Reply = SubmitReply;
}

/// The body of `submit`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitRequest {
    /// The items, one workflow each (1 to 100,000, each 1–200 characters).
    pub items: Vec<String>,
    /// A built-in pipeline's name (a string) or an inline spec (an object);
    /// null is refused.
    #[serde(default)]
    pub pipeline: Value,
    /// Wall time of one pipeline time unit in ms for these workflows
    /// (default: `coordinator.time_unit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_unit_ms: Option<u64>,
    /// Human gates approve themselves when nothing needs review.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto_approve_gates: bool,
    /// A retry with the same key (1–256 characters) returns the same
    /// workflows and creates nothing new.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// Where a submission stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubmissionState {
    /// Workflow records are being created (or a coordinator stopped
    /// half-way: a retry with the key finishes it).
    Creating,
    /// Every workflow record is stored.
    Complete,
}

impl SubmissionState {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SubmissionState::Creating => "creating",
            SubmissionState::Complete => "complete",
        }
    }
}

impl std::fmt::Display for SubmissionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A submission and one page of its workflow ids (the reply of
/// `submission`, and the start of `submit`'s).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmissionSummary {
    /// The submission's id (a UUID; derived from the key when there is one).
    pub submission_id: String,
    /// The key it was submitted with, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// The pipeline's name.
    pub pipeline: String,
    /// Workflows in the submission (one per item).
    pub count: usize,
    /// Workflow records stored so far.
    pub stored: usize,
    /// Where it stands.
    pub state: SubmissionState,
    /// When it was first submitted.
    pub created_at: DateTime<Utc>,
    /// Index of the first id in `workflow_ids`.
    pub cursor: usize,
    /// Workflow ids from `cursor` on, in item order.
    pub workflow_ids: Vec<String>,
    /// The `cursor` of the next page; null on the last.
    pub next_cursor: Option<usize>,
}

/// One workflow of a `submit` reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmittedWorkflow {
    /// Its id.
    pub workflow_id: String,
    /// Its item.
    pub item: String,
}

/// The reply of `submit`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmitReply {
    /// The submission, with the first 1,000 workflow ids.
    #[serde(flatten)]
    pub summary: SubmissionSummary,
    /// The first 1,000 workflows with their items, in item order.
    pub workflows: Vec<SubmittedWorkflow>,
    /// Workflow records this request created.
    pub created: usize,
    /// Workflow records an earlier attempt of the same submission stored
    /// (kept as they are).
    pub existing: usize,
    /// The submission was complete already: nothing was created.
    pub replayed: bool,
}

/// `caucus.api.coordinator.submission`: a submission read back (any
/// instance answers: it reads KV).
#[derive(Debug, Clone, Copy)]
pub struct Submission;

impl Operation for Submission {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "submission";
    const SUMMARY: &'static str = "a submission's state and its workflow ids, page by page";
    const ERRORS: &'static [&'static str] = &[CODE_NOT_FOUND, "unavailable"];
    type Request = SubmissionRequest;
    type Reply = SubmissionSummary;
}

/// The body of `submission`: exactly one of `submission_id` and
/// `idempotency_key`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmissionRequest {
    /// The submission's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission_id: Option<String>,
    /// The key it was submitted with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Index of the first workflow id to list (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<usize>,
    /// Ids per page (default 1,000, at most 10,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}
