//! Gates on the scheduler's side: decisions and re-runs (the `Gate`
//! command), reminders and escalations of open gates, and automatic
//! approvals.

use std::time::Duration;

use chrono::Utc;
use serde_json::{json, Value};

use super::Scheduler;
use crate::runtime::{gates, gates_api, publish};
use caucus_shared::nats::ApiError;

impl Scheduler {
    /// Gate decisions, re-runs and listings; the reply body or error.
    pub(super) async fn gate(&mut self, op: gates::GateOp) -> Result<Value, ApiError> {
        if let Some(id) = op.workflow_id() {
            self.ensure_loaded(id).await;
        }
        let now = self.clock.now();
        if let gates::GateOp::Decide {
            workflow_id,
            gate: Some(g),
            ..
        } = &op
        {
            self.auto_pending.remove(&(workflow_id.clone(), g.clone()));
        }
        // Automatic approvals are written with the next batch: nobody
        // waits on their reply, and under load they are frequent.
        match op {
            gates::GateOp::Decide {
                workflow_id,
                gate,
                req,
            } if req.decided_by == "auto" => gates::decide(
                &mut self.engine,
                &mut self.dirty,
                &workflow_id,
                gate.as_deref(),
                req,
                now,
            )
            .map(|_| Value::Null),
            op => self.gate_applied(op, now).await,
        }
    }

    /// [`Scheduler::gate`] for every operation but automatic approvals.
    async fn gate_applied(
        &mut self,
        op: gates::GateOp,
        now: chrono::DateTime<Utc>,
    ) -> Result<Value, ApiError> {
        let id = op.workflow_id().map(str::to_string);
        let mut r = gates::apply(op, &mut self.engine, &mut self.dirty, now);
        // A decision is stored before it is confirmed; if the store
        // is down it stays in memory, is retried, and the reply
        // says `persisted: false`.
        if let (Ok(Value::Object(m)), Some(id)) = (&mut r, id) {
            if self.dirty.contains(&id) {
                self.persist().await;
                m.insert("persisted".into(), json!(!self.dirty.contains(&id)));
            }
        }
        r
    }

    /// Reminders and escalations of open gates; automatic approvals.
    pub(super) async fn gate_timers(&mut self, now: chrono::DateTime<Utc>) {
        let cfg = self.cfg.clone();
        let notices = self
            .engine
            .gate_notices(now, |rec, key| gates::timers_for(&cfg, rec, key));
        for (wf, n) in notices {
            self.dirty.insert(wf.clone());
            let Some(rec) = self.engine.get(&wf) else {
                continue;
            };
            let (event, severity) = if n.escalation {
                ("gate_escalation", "critical")
            } else {
                ("gate_reminder", "warning")
            };
            tracing::warn!(workflow_id = %wf, gate = %n.gate, waiting_ms = n.waiting_ms, event, "gate waiting for a decision");
            let card = publish::alert(
                event,
                severity,
                gates::notice_fields(rec, &n.gate, n.waiting_ms, n.reminder),
            );
            let opened = rec.tasks[&n.gate]
                .gate
                .as_ref()
                .map(|g| g.opened_at.timestamp_millis())
                .unwrap_or_default();
            let msg_id = format!("alert:{event}:{wf}/{}@{opened}:{}", n.gate, n.reminder);
            if let Err(e) =
                publish::publish(&self.js, self.subjects.alerts(severity), &card, &msg_id).await
            {
                tracing::warn!(workflow_id = %wf, error = %e, "gate alert not sent");
            }
        }
        self.auto_approve().await;
    }

    /// Approves open gates of auto-approving workflows when the facilitator
    /// lists no provisional decision for them (checked off the loop; the
    /// decision comes back as a command).
    async fn auto_approve(&mut self) {
        let candidates = gates::auto_candidates(&self.engine, Utc::now());
        self.auto_pending.retain(|k, _| {
            candidates
                .iter()
                .any(|c| (&c.workflow_id, &c.gate) == (&k.0, &k.1))
        });
        self.auto_approve_these(candidates);
    }

    /// Starts the approval check of each candidate gate not already under
    /// way (or blocked less than the retry period ago).
    pub(super) fn auto_approve_these(&mut self, candidates: Vec<gates::AutoCandidate>) {
        let Some(handle) = self.self_handle.clone() else {
            return;
        };
        // A blocked approval (provisional decisions to review) is tried
        // again after a while: once a person reviewed them it goes through.
        let retry = (self.cfg.tick * 10).max(Duration::from_secs(1));
        for c in candidates {
            let key = (c.workflow_id.clone(), c.gate.clone());
            if self
                .auto_pending
                .get(&key)
                .is_some_and(|t| t.elapsed() < retry)
            {
                continue;
            }
            self.auto_pending.insert(key, std::time::Instant::now());
            let client = self.js.client();
            let subjects = self.subjects.clone();
            let handle = handle.clone();
            let timeout = self.cfg.tick.max(Duration::from_secs(5));
            self.tasks.spawn_named("auto-approve", async move {
                gates_api::auto_decide(client, subjects, timeout, handle, c).await;
            });
        }
    }
}
