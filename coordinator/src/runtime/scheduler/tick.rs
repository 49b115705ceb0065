//! The periodic tick: lazily recorded starts, overdue tasks, silent
//! attempts, gate timers, pause/resume and research time limits, eviction,
//! and the gauges' snapshot.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::json;

use super::Scheduler;
use crate::runtime::metrics;
use crate::workflow::{TaskRunState, WorkflowState};

/// How often the gauges' snapshot is rebuilt: it walks every workflow
/// held, and a scrape interval is seconds anyway.
const GAUGES_EVERY: Duration = Duration::from_secs(1);

impl Scheduler {
    pub(super) async fn on_tick(&mut self) {
        if !self.may_act() {
            metrics::stand_by(self.partition.index);
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
        self.refresh_gauges(now);
    }

    /// Publishes the gauges (load, capacity, workflows by state, open
    /// gates) at most every [`GAUGES_EVERY`], and counts the finished
    /// workflows no event ended (a gate's rejection, a request's deadline,
    /// research limits).
    fn refresh_gauges(&mut self, now: chrono::DateTime<chrono::Utc>) {
        if self.gauges_at.is_some_and(|at| at.elapsed() < GAUGES_EVERY) {
            return;
        }
        self.gauges_at = Some(Instant::now());
        let mut states: HashMap<WorkflowState, u64> = HashMap::new();
        let mut gates_open = 0u64;
        let mut finished = Vec::new();
        for r in self.engine.workflows() {
            *states.entry(r.state).or_default() += 1;
            if r.state.is_terminal() {
                if !self.finished_seen.contains(&r.workflow_id) {
                    finished.push((r.workflow_id.clone(), r.state));
                }
            } else {
                // Re-run after it finished: its next finish counts again.
                self.finished_seen.remove(&r.workflow_id);
                gates_open += r
                    .tasks
                    .values()
                    .filter(|t| t.state == TaskRunState::AwaitingApproval)
                    .count() as u64;
            }
        }
        for (id, state) in finished {
            metrics::workflow_finished(state);
            self.finished_seen.insert(id);
        }
        let caps = self.capacity_snapshot();
        metrics::publish(
            self.partition.index,
            metrics::Snapshot::new(&self.engine.load(now), &caps, &states, gates_open),
        );
    }
}
