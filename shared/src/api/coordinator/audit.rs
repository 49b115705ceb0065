//! `audit`: a research run's audit trail (docs/RESEARCH.md).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::status::WorkflowState;
use crate::api::{Operation, OperationDoc, CODE_NOT_FOUND};

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[OperationDoc::of::<Audit>()];

/// Error code of `audit` for a workflow whose pipeline has no research
/// phases.
pub const CODE_NOT_RESEARCH: &str = "not_research";

/// `coordinator.audit`: any instance answers from the stored record.
#[derive(Debug, Clone, Copy)]
pub struct Audit;

impl Operation for Audit {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "audit";
    const SUMMARY: &'static str = "a research run's audit trail (see RESEARCH.md)";
    const ERRORS: &'static [&'static str] = &[CODE_NOT_FOUND, CODE_NOT_RESEARCH, "unavailable"];
    type Request = AuditRequest;
    type Reply = AuditReply;
}

/// The `audit` request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditRequest {
    /// The research run's workflow.
    pub workflow_id: String,
}

/// The `audit` reply: the run's audit trail as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditReply {
    /// The workflow.
    pub workflow_id: String,
    /// Its item.
    pub item: String,
    /// Its pipeline.
    pub pipeline: String,
    /// The workflow's state.
    pub state: WorkflowState,
    /// The research phase (`DISCOVERING`, …, `COMPLETE`, `FAILED`).
    pub phase: String,
    /// The trail, oldest first.
    pub entries: Vec<AuditEntry>,
    /// The same entries as `timestamp | agent | action | result` lines.
    pub lines: Vec<String>,
}

/// One entry of a research run's audit trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// When it happened.
    pub at: DateTime<Utc>,
    /// Who acted: `coordinator`, or the stream / stage (`stream-2`, `validate`).
    pub agent: String,
    /// What happened (`transition`, `quality_gate`, `write_refused`, …).
    pub action: String,
    /// The outcome, human-readable.
    pub result: String,
}
