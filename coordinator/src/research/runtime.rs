//! The coordinator side of research runs, called by the scheduler (the
//! only writer of workflow records):
//!
//! - accepted writes go to the KV bucket `research` under
//!   `<workflow_id>/<key>` (puts are idempotent, so a crash between the put
//!   and the record's persist only repeats them);
//! - a failed or escalated run's alert card goes to `caucus.alerts.<severity>`
//!   (`Nats-Msg-Id` `alert:research:<workflow_id>`, so once);
//! - time limits are applied every tick and a checkpoint is stored in the
//!   `checkpoints` bucket every `research_checkpoint_interval`;
//! - `coordinator.audit` reads the audit trail from the stored record.

use std::collections::HashSet;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use caucus_shared::api::coordinator::audit::{
    Audit, AuditEntry, AuditReply, AuditRequest, CODE_NOT_RESEARCH,
};
use caucus_shared::nats::ApiError;
use caucus_shared::subjects::Subjects;

use super::state::ResearchSettings;
use crate::engine::Engine;
use crate::runtime::checkpoints::CheckpointStore;
use crate::runtime::store::WorkflowStore;
use crate::runtime::views::state_view;
use crate::workflow::{Checkpoint, WorkflowRecord};

/// KV bucket of the research runs' accepted writes.
pub const RESEARCH_BUCKET: &str = "research";

/// Research side effects of the leading coordinator.
pub struct ResearchRuntime {
    js: jetstream::Context,
    subjects: Subjects,
    writes: kv::Store,
    checkpoints: CheckpointStore,
    settings: ResearchSettings,
}

/// The research-bucket key of a run's `key`.
pub fn stored_key(workflow_id: &str, key: &str) -> String {
    format!("{workflow_id}/{key}")
}

impl ResearchRuntime {
    /// A runtime storing writes in `writes` and checkpoints in `checkpoints`.
    pub fn new(
        js: jetstream::Context,
        subjects: Subjects,
        writes: kv::Store,
        checkpoints: CheckpointStore,
        settings: ResearchSettings,
    ) -> Self {
        ResearchRuntime {
            js,
            subjects,
            writes,
            checkpoints,
            settings,
        }
    }

    /// Stores pending writes and publishes pending alerts of the changed
    /// workflows (`dirty`); call before persisting them.
    pub async fn flush(&mut self, engine: &mut Engine, dirty: &HashSet<String>) {
        for id in dirty {
            let Some(r) = engine.get(id).and_then(|r| r.research.as_ref()) else {
                continue;
            };
            let writes = r.pending_writes.clone();
            let alert = r.alert.clone().filter(|a| !a.sent);
            if !writes.is_empty() {
                let mut stored = 0usize;
                for w in &writes {
                    let body = match &w.value {
                        Value::String(s) => Bytes::from(s.clone()),
                        v => Bytes::from(v.to_string()),
                    };
                    match self.writes.put(stored_key(id, &w.key), body).await {
                        Ok(_) => stored += 1,
                        Err(e) => {
                            tracing::warn!(workflow_id = %id, key = %w.key, error = %e, "research write not stored yet; will retry");
                            break;
                        }
                    }
                }
                if let Some(r) = engine.get_mut(id).and_then(|r| r.research.as_mut()) {
                    r.pending_writes.drain(..stored);
                    r.stored_keys += stored as u32;
                }
            }
            if let Some(a) = alert {
                let Some(rec) = engine.get(id) else {
                    continue;
                };
                if self.publish_alert(rec, &a).await {
                    if let Some(r) = engine.get_mut(id).and_then(|r| r.research.as_mut()) {
                        if let Some(a) = r.alert.as_mut() {
                            a.sent = true;
                        }
                    }
                }
            }
        }
    }

    async fn publish_alert(&self, rec: &WorkflowRecord, a: &super::state::ResearchAlert) -> bool {
        let streams = rec
            .research
            .as_ref()
            .map(|r| {
                r.streams
                    .iter()
                    .map(|(n, s)| json!({"stream": n, "state": s.state, "sources": s.sources, "error": s.error}))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        let card = crate::runtime::publish::alert(
            &a.event_type,
            &a.severity,
            json!({
                "workflow_id": rec.workflow_id,
                "item": rec.item,
                "pipeline": rec.pipeline,
                "phase": "FAILED",
                "reason": a.reason,
                "escalated": a.event_type == "workflow_escalated",
                "streams": streams,
                "actions": ["review", "resubmit"],
            }),
        );
        let msg_id = format!("alert:research:{}", rec.workflow_id);
        match crate::runtime::publish::publish(
            &self.js,
            self.subjects.alerts(&a.severity),
            &card,
            &msg_id,
        )
        .await
        {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(workflow_id = %rec.workflow_id, error = %e, "research alert not sent yet; will retry");
                false
            }
        }
    }

    /// Time limits and periodic checkpoints of every research run; runs
    /// with unstored writes or unsent alerts are marked dirty so the next
    /// flush retries them.
    pub async fn tick(
        &mut self,
        engine: &mut Engine,
        dirty: &mut HashSet<String>,
        now: DateTime<Utc>,
    ) {
        let ids: Vec<String> = engine
            .workflows()
            .filter(|r| r.is_research())
            .map(|r| r.workflow_id.clone())
            .collect();
        for id in ids {
            if engine.get(&id).is_some_and(|r| r.research_due(now)) {
                // Remove and re-insert so the engine recounts in-flight
                // tasks and queues what the decision made ready.
                if let Some(mut rec) = engine.remove(&id) {
                    rec.research_tick(now);
                    engine.insert(rec);
                    dirty.insert(id.clone());
                }
            }
            let interval = self.settings.checkpoint_interval;
            if let Some(rec) = engine
                .get(&id)
                .filter(|r| r.research_checkpoint_due(now, interval))
            {
                let n = rec.research.as_ref().map_or(0, |r| r.checkpoints) + 1;
                let mut cp = Checkpoint::of(rec, now);
                cp.checkpoint_id = format!("{id}.r{n}");
                cp.reason = "periodic research checkpoint".into();
                cp.trigger_source = "research_checkpoint".into();
                match self.checkpoints.put(&cp).await {
                    Ok(()) => {
                        if let Some(rec) = engine.get_mut(&id) {
                            rec.research_checkpointed(&cp.checkpoint_id, now);
                        }
                        dirty.insert(id.clone());
                    }
                    Err(e) => {
                        tracing::warn!(workflow_id = %id, error = %e, "research checkpoint not stored; will retry")
                    }
                }
            }
            if let Some(r) = engine.get(&id).and_then(|r| r.research.as_ref()) {
                if !r.pending_writes.is_empty() || r.alert.as_ref().is_some_and(|a| !a.sent) {
                    dirty.insert(id);
                }
            }
        }
    }
}

/// `coordinator.audit`: `{workflow_id}` → the run's audit trail as stored.
pub async fn audit(req: AuditRequest, store: WorkflowStore) -> Result<AuditReply, ApiError> {
    let (rec, _) = store
        .get(&req.workflow_id)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?
        .ok_or_else(|| ApiError::not_found(format!("no workflow `{}`", req.workflow_id)))?;
    let Some(r) = rec.research.as_ref() else {
        return Err(ApiError::new(
            CODE_NOT_RESEARCH,
            format!(
                "workflow `{}` runs pipeline `{}`, which has no research phases (no audit trail)",
                rec.workflow_id, rec.pipeline
            ),
        ));
    };
    Ok(AuditReply {
        workflow_id: rec.workflow_id.clone(),
        item: rec.item.clone(),
        pipeline: rec.pipeline.clone(),
        state: state_view(rec.state),
        phase: r.phase.as_str().to_string(),
        entries: r
            .audit
            .iter()
            .map(|e| AuditEntry {
                at: e.at,
                agent: e.agent.clone(),
                action: e.action.clone(),
                result: e.result.clone(),
            })
            .collect(),
        lines: r.audit.iter().map(|e| e.to_string()).collect(),
    })
}

/// Registers `audit` (any instance answers: it reads the stored record).
pub fn audit_route(svc: &mut caucus_shared::service::Service) {
    let ctx = svc.context().clone();
    let retain = ctx.config.coordinator.retain_history;
    svc.op::<Audit, _, _>(move |req| {
        let js = ctx.js.clone();
        let subjects = ctx.subjects.clone();
        async move {
            let store = WorkflowStore::attach(&js, &subjects, retain)
                .await
                .map_err(|e| ApiError::new("unavailable", e.to_string()))?;
            audit(req, store).await
        }
    });
}
