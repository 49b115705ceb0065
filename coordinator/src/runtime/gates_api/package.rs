//! `gate`: the decision package, everything a person needs to decide at a
//! gate: the workflow's tasks and findings, its open debates, provisional
//! decisions and their precedents, its re-runs, and what blocks approval.

use futures::StreamExt;

use caucus_shared::api::coordinator::gates::{
    DecisionPackage, GateAction, GateRequest, PackageFinding, PackageTask,
};
use caucus_shared::api::facilitator::{Debates, DebatesRequest, ProvisionalReply};
use caucus_shared::nats::api::ApiError;
use caucus_shared::outputs::{lenient, or_default};
use caucus_shared::subjects::StreamKind;

use super::super::commands::SchedulerHandle;
use super::super::gates::open_gate;
use super::super::gates_package::{finding_id, push_finding, rerun_view};
use super::super::views::task_state_view;
use super::GateApi;
use crate::workflow::WorkflowRecord;

/// Findings read into one decision package, at most.
pub const MAX_PACKAGE_FINDINGS: usize = 500;

/// Why the package lists no findings (the package is still answered).
#[derive(Debug, thiserror::Error)]
enum FindingsError {
    /// The findings stream cannot be read.
    #[error("findings stream: {0}")]
    Stream(#[from] async_nats::jetstream::context::GetStreamError),
    /// No consumer could be made on it.
    #[error("findings consumer: {0}")]
    Consumer(#[from] async_nats::jetstream::stream::ConsumerError),
    /// Its messages cannot be fetched.
    #[error("reading findings: {0}")]
    Read(#[from] async_nats::jetstream::consumer::StreamError),
}

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

    /// The item's findings published by this workflow's tasks, oldest first.
    async fn findings(&self, rec: &WorkflowRecord) -> Result<Vec<PackageFinding>, FindingsError> {
        let js = async_nats::jetstream::new(self.client.clone());
        let stream = js
            .get_stream(self.subjects.stream(StreamKind::Findings))
            .await?;
        let subject = self.subjects.findings(&rec.item);
        let consumer = stream
            .create_consumer(async_nats::jetstream::consumer::pull::OrderedConfig {
                filter_subject: subject,
                ..Default::default()
            })
            .await?;
        let pending = consumer.cached_info().num_pending as usize;
        let mut out = Vec::new();
        if pending == 0 {
            return Ok(out);
        }
        let mut msgs = consumer.messages().await?;
        let mut seen = 0usize;
        while seen < pending {
            let next = tokio::time::timeout(self.timeout, msgs.next()).await;
            let Ok(Some(Ok(m))) = next else { break };
            seen += 1;
            // Read leniently: a person reviews this package, so a finding
            // of an outside service with an odd field is listed with that
            // field empty rather than left out.
            let Ok(env) = serde_json::from_slice::<LooseMessage>(&m.payload) else {
                continue;
            };
            let c = env.content;
            let ours = env.correlation_id.as_deref() == Some(&rec.workflow_id)
                || c.workflow_id.as_deref() == Some(&rec.workflow_id);
            if !ours {
                continue;
            }
            let msg_id = m
                .headers
                .as_ref()
                .and_then(|h| h.get("Nats-Msg-Id"))
                .map(|id| id.as_str());
            let f = PackageFinding {
                from_agent: env.from_agent.unwrap_or_default(),
                finding: c.finding.unwrap_or_default(),
                confidence: c.confidence,
                evidence: c.evidence.unwrap_or_default(),
                impact: c.impact,
                metric: c.metric,
                value: c.value,
                timestamp: env.timestamp,
                finding_id: msg_id.and_then(finding_id),
            };
            push_finding(&mut out, f);
            if out.len() >= MAX_PACKAGE_FINDINGS {
                break;
            }
        }
        Ok(out)
    }
}

/// A message on `caucus.findings.<item>` as the package reads it: any
/// field may be missing or odd (outside services publish there too).
#[derive(Debug, Default, serde::Deserialize)]
struct LooseMessage {
    #[serde(default, deserialize_with = "lenient")]
    from_agent: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    correlation_id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    timestamp: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(default, deserialize_with = "or_default")]
    content: LooseFinding,
}

/// A finding's content as the package reads it.
#[derive(Debug, Default, serde::Deserialize)]
struct LooseFinding {
    #[serde(default, deserialize_with = "lenient")]
    workflow_id: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    finding: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    confidence: Option<f64>,
    #[serde(default, deserialize_with = "lenient")]
    evidence: Option<Vec<String>>,
    #[serde(default, deserialize_with = "lenient")]
    impact: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    metric: Option<String>,
    #[serde(default)]
    value: Option<serde_json::Value>,
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
