//! `gate`: the decision package, everything a person needs to decide at a
//! gate: the workflow's tasks and findings, its open debates, provisional
//! decisions and their precedents, its re-runs, what blocks approval, and
//! the findings that arrived after the analysis (they do not block it).

use serde::Deserialize;

use caucus_shared::api::coordinator::gates::{
    DecisionPackage, GateAction, GateRequest, LateFindingView, PackageTask,
};
use caucus_shared::api::facilitator::{Debates, DebatesRequest, ProvisionalReply};
use caucus_shared::nats::api::ApiError;

use super::super::commands::SchedulerHandle;
use super::super::gates::open_gate;
use super::super::gates_package::rerun_view;
use super::super::inbound::{LateFinding, LATE_FINDING};
use super::super::views::task_state_view;
use super::listing::{late_view, MAX_LATE_FINDINGS};
use super::GateApi;
use crate::workflow::WorkflowRecord;

/// Findings read into one decision package, at most.
pub const MAX_PACKAGE_FINDINGS: usize = 500;

impl GateApi {
    /// `gate`: everything a person needs to decide.
    pub async fn package(
        &self,
        handle: SchedulerHandle,
        r: GateRequest,
    ) -> Result<DecisionPackage, ApiError> {
        let rec = self.record(&handle, &r.workflow_id).await?;
        let gate = rec
            .pick_open_gate(r.gate.as_deref())
            .map_err(|e| ApiError::new(e.code(), e.to_string()))?;
        let listing = DebatesRequest {
            workflow_id: Some(rec.workflow_id.clone()),
            ..Default::default()
        };
        let (debates, provisional, findings) = tokio::join!(
            self.facilitator::<Debates>(&listing),
            self.provisional(&rec.workflow_id),
            self.findings(&rec),
        );
        let (debates, facilitator_note) = match debates {
            Ok(r) => (r.debates, None),
            Err(e) => (Vec::new(), Some(e.message)),
        };
        let precedents = debates
            .iter()
            .flat_map(|d| d.precedents.iter().cloned())
            .collect();
        let open = debates
            .into_iter()
            .filter(|d| d.resolution.is_none())
            .collect();
        let provisional = provisional
            .unwrap_or(None)
            .unwrap_or_else(|| ProvisionalReply {
                count: 0,
                message: "0 provisional decisions require review".into(),
                decisions: Vec::new(),
            });
        let pending = rec.pending_upstream(&gate);
        let mut blocking = Vec::new();
        if provisional.count > 0 {
            blocking.push(format!(
                "{} — each must be confirmed, overridden or re-debated (coordinator.gate_review)",
                provisional.message
            ));
        }
        if !pending.is_empty() {
            blocking.push(format!("re-runs in progress: {}", pending.join(", ")));
        }
        let findings = findings.unwrap_or_else(|e| {
            tracing::debug!(workflow_id = %rec.workflow_id, error = %e, "decision package without findings");
            Vec::new()
        });
        Ok(DecisionPackage {
            gate: open_gate(&rec, &gate, chrono::Utc::now()),
            workflow_id: rec.workflow_id.clone(),
            item: rec.item.clone(),
            pipeline: rec.pipeline.clone(),
            tasks: tasks(&rec),
            findings,
            late_findings: late_findings(&rec, &gate),
            open_debates: open,
            provisional,
            precedents,
            resolved_assumptions: rec.resolved_assumptions.clone(),
            reruns: rec.reruns.iter().map(rerun_view).collect(),
            can_approve: blocking.is_empty(),
            blocking,
            actions: GateAction::ALL.to_vec(),
            facilitator: facilitator_note,
        })
    }
}

/// The workflow's late-finding flags (the newest [`MAX_LATE_FINDINGS`]),
/// oldest first, each with the send-back from `gate` that applies it. A
/// flag whose detail does not read is left out (logged).
fn late_findings(rec: &WorkflowRecord, gate: &str) -> Vec<LateFindingView> {
    let upstream = rec
        .tasks
        .get(gate)
        .map(|t| rec.upstream_of(&t.stage))
        .unwrap_or_default();
    let flags: Vec<_> = rec
        .flags
        .iter()
        .filter(|f| f.kind == LATE_FINDING)
        .collect();
    let skip = flags.len().saturating_sub(MAX_LATE_FINDINGS);
    flags
        .into_iter()
        .skip(skip)
        .filter_map(|f| match LateFinding::deserialize(&f.detail) {
            Ok(lf) => Some(late_view(lf, &rec.workflow_id, gate, &upstream)),
            Err(e) => {
                tracing::warn!(workflow_id = %rec.workflow_id, error = %e, "a late-finding flag does not read");
                None
            }
        })
        .collect()
}

/// Every task of the workflow, by key.
fn tasks(rec: &WorkflowRecord) -> Vec<PackageTask> {
    rec.tasks
        .iter()
        .map(|(k, t)| PackageTask {
            task: k.clone(),
            stage: t.stage.clone(),
            agent_type: t.agent_type.clone(),
            state: task_state_view(t.state),
            finished_at: t.finished_at,
            rerun: t.previous_output.is_some(),
        })
        .collect()
}
