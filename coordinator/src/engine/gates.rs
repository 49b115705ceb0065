//! Gate decisions, re-runs and gate timers across the held workflows.
//!
//! Each change goes through [`Engine::mutate`], which takes the workflow out
//! of the queues and in-flight counts before the change and puts it back
//! after: a re-run may renew tasks that were in flight, so counting from the
//! record before and after is the only bookkeeping that stays right.

use chrono::{DateTime, Utc};

use super::Engine;
use crate::workflow::{
    GateError, GateNotice, GateOutcome, GateRequest, GateTimers, RerunOutcome, RerunRequest,
    WorkflowRecord,
};

impl Engine {
    /// Applies `f` to a held workflow, keeping queues and counts right.
    pub fn mutate<T>(&mut self, id: &str, f: impl FnOnce(&mut WorkflowRecord) -> T) -> Option<T> {
        let mut rec = self.workflows.remove(id)?;
        self.forget(&rec);
        let out = f(&mut rec);
        self.insert(rec);
        Some(out)
    }

    /// A person's decision at an open gate of workflow `id`.
    pub fn decide_gate(
        &mut self,
        id: &str,
        gate: Option<&str>,
        req: GateRequest,
        now: DateTime<Utc>,
    ) -> Option<Result<GateOutcome, GateError>> {
        self.mutate(id, |rec| rec.decide_gate(gate, req, now))
    }

    /// Runs the listed tasks of workflow `id` again.
    pub fn request_rerun(
        &mut self,
        id: &str,
        req: RerunRequest,
        now: DateTime<Utc>,
    ) -> Option<Result<RerunOutcome, GateError>> {
        self.mutate(id, |rec| rec.request_rerun(req, now))
    }

    /// Reminders and escalations due now, by workflow; `timers` gives each
    /// gate's settings (config, overridden by the gate stage's params).
    pub fn gate_notices(
        &mut self,
        now: DateTime<Utc>,
        timers: impl Fn(&WorkflowRecord, &str) -> GateTimers,
    ) -> Vec<(String, GateNotice)> {
        let mut out = Vec::new();
        for rec in self.workflows.values_mut() {
            let open = rec.open_gate_keys();
            if open.is_empty() {
                continue;
            }
            for key in open {
                let t = timers(rec, &key);
                // Per gate: timers differ between gates of one workflow.
                let notices = rec.gate_notices_for(&key, now, &t);
                out.extend(notices.into_iter().map(|n| (rec.workflow_id.clone(), n)));
            }
        }
        out
    }

    /// Open gates: (workflow, gate key), oldest opening first.
    pub fn open_gates(&self) -> Vec<(String, String)> {
        let mut v: Vec<(DateTime<Utc>, String, String)> = self
            .workflows
            .values()
            .flat_map(|r| {
                r.open_gate_keys().into_iter().map(move |k| {
                    let at = r.tasks[&k]
                        .gate
                        .as_ref()
                        .map(|g| g.opened_at)
                        .unwrap_or(r.updated_at);
                    (at, r.workflow_id.clone(), k)
                })
            })
            .collect();
        v.sort();
        v.into_iter().map(|(_, w, k)| (w, k)).collect()
    }
}
