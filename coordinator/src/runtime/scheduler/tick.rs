//! The periodic tick: lazily recorded starts, overdue tasks, silent
//! attempts, gate timers, pause/resume and research time limits, eviction.

use serde_json::json;

use super::Scheduler;

impl Scheduler {
    pub(super) async fn on_tick(&mut self) {
        if !self.may_act() {
            return;
        }
        self.flush_lazy();
        let now = self.clock.now();
        for (wf, key) in self.engine.flag_overdue(now, self.cfg.overdue_factor) {
            self.dirty.insert(wf.clone());
            if let Some(rec) = self.engine.get(&wf) {
                let t = &rec.tasks[&key];
                tracing::warn!(workflow_id = %wf, task = %key, "task overdue");
                let body = json!({
                    "kind": "task_overdue",
                    "workflow_id": wf,
                    "item": rec.item,
                    "task_id": rec.task_id(&key),
                    "agent_type": t.agent_type,
                    "started_at": t.started_at,
                    "at": now,
                });
                let _ = self
                    .js
                    .publish(self.subjects.alerts("warning"), body.to_string().into())
                    .await;
            }
        }
        self.reconcile_silent(now);
        self.gate_timers(now).await;
        if let Some(c) = self.control.as_mut() {
            let caps = self
                .capacities
                .read()
                .map(|c| c.clone())
                .unwrap_or_default();
            c.tick(&mut self.engine, &mut self.dirty, &caps, now).await;
        }
        if let Some(r) = self.research.as_mut() {
            r.tick(&mut self.engine, &mut self.dirty, now).await;
        }
        if let Some(r) = self.requests.as_mut() {
            r.on_tick(&mut self.engine, &mut self.dirty, now).await;
        }
        self.evict_finished(now);
    }
}
