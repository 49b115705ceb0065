//! The in-memory scheduler over many workflows: per-agent-type ready queues
//! ordered by longest remaining path, in-flight counts, and capacity-bounded
//! dispatch. Pure (the caller passes `now` and the capacities), so the
//! ordering guarantees are tested without servers.

mod gates;
mod queue;

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Utc};

use caucus_shared::task::{TaskDispatch, TaskEvent};

use crate::workflow::{
    EventOutcome, IllegalTransition, PauseOutcome, PauseSpec, ResumeError, RetryDecision,
    TaskRecord, TaskRunState, TierRules, WorkflowRecord, WorkflowState,
};
use caucus_shared::messages::ResumePlan;
pub use queue::ReadyEntry;
use queue::ReadyQueue;

/// Per-agent-type load, for status and the live bottleneck.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct AgentLoad {
    /// Tasks ready and waiting for capacity.
    pub ready: usize,
    /// Tasks dispatched or running.
    pub in_flight: usize,
    /// How long the oldest ready task has waited (ms).
    pub oldest_wait_ms: i64,
}

/// Many workflows, scheduled together.
#[derive(Debug, Default)]
pub struct Engine {
    workflows: HashMap<String, WorkflowRecord>,
    queues: HashMap<String, ReadyQueue>,
    in_flight: HashMap<String, usize>,
    /// Retries waiting for their backoff: (not_before, workflow, key).
    delayed: Vec<(DateTime<Utc>, String, String)>,
    seq: u64,
    tiers: TierRules,
    /// Workflows that reached PAUSED and still need their checkpoint.
    newly_paused: Vec<String>,
}

impl Engine {
    /// An empty engine.
    pub fn new() -> Self {
        Self::default()
    }

    /// Failure tier rules for task events (default: the built-in rules).
    pub fn set_tiers(&mut self, tiers: TierRules) {
        self.tiers = tiers;
    }

    /// Workflows that reached PAUSED without a stored checkpoint yet
    /// (drained: the caller stores the checkpoints).
    pub fn take_newly_paused(&mut self) -> Vec<String> {
        std::mem::take(&mut self.newly_paused)
    }

    /// Puts `id` back on the newly-paused list (its checkpoint failed).
    pub fn mark_paused_pending(&mut self, id: &str) {
        if !self.newly_paused.iter().any(|x| x == id) {
            self.newly_paused.push(id.to_string());
        }
    }

    /// Adds a new or reloaded workflow and queues what it can run (nothing
    /// while it is pausing or paused).
    pub fn insert(&mut self, rec: WorkflowRecord) {
        let id = rec.workflow_id.clone();
        if let Some(old) = self.workflows.remove(&id) {
            self.forget(&old);
        }
        for t in rec.tasks.values() {
            if matches!(t.state, TaskRunState::Dispatched | TaskRunState::Running) {
                *self.in_flight.entry(t.agent_type.clone()).or_default() += 1;
            }
        }
        let ready: Vec<String> = rec
            .tasks
            .iter()
            .filter(|(_, t)| t.state == TaskRunState::Ready)
            .map(|(k, _)| k.clone())
            .collect();
        if rec.state == WorkflowState::Paused
            && rec
                .pause
                .as_ref()
                .is_some_and(|p| p.checkpoint_id.is_none())
        {
            self.newly_paused.push(id.clone());
        }
        self.workflows.insert(id.clone(), rec);
        for k in ready {
            self.enqueue(&id, &k);
        }
    }

    fn forget(&mut self, old: &WorkflowRecord) {
        for t in old.tasks.values() {
            if matches!(t.state, TaskRunState::Dispatched | TaskRunState::Running) {
                if let Some(n) = self.in_flight.get_mut(&t.agent_type) {
                    *n = n.saturating_sub(1);
                }
            }
        }
        for q in self.queues.values_mut() {
            q.remove_workflow(&old.workflow_id);
        }
        self.delayed.retain(|(_, w, _)| w != &old.workflow_id);
    }

    /// Removes a workflow (e.g. finished and persisted).
    pub fn remove(&mut self, id: &str) -> Option<WorkflowRecord> {
        let rec = self.workflows.remove(id)?;
        self.forget(&rec);
        Some(rec)
    }

    fn enqueue(&mut self, wf: &str, key: &str) {
        let Some(rec) = self.workflows.get(wf) else {
            return;
        };
        if !rec.state.accepts_dispatch() {
            return;
        }
        let Some(t) = rec.tasks.get(key) else { return };
        if let Some(nb) = t.not_before {
            self.delayed.push((nb, wf.to_string(), key.to_string()));
            return;
        }
        self.seq += 1;
        let entry = ReadyEntry {
            priority: t.priority,
            created_at: rec.created_at,
            workflow_id: wf.to_string(),
            key: key.to_string(),
            seq: self.seq,
            enqueued_at: rec.updated_at,
        };
        self.queues
            .entry(t.agent_type.clone())
            .or_default()
            .push(entry);
    }

    /// A workflow by id.
    pub fn get(&self, id: &str) -> Option<&WorkflowRecord> {
        self.workflows.get(id)
    }

    /// Mutable access for control operations (pause etc.); call
    /// [`Engine::insert`] again afterwards if queued tasks changed.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut WorkflowRecord> {
        self.workflows.get_mut(id)
    }

    /// Every workflow held.
    pub fn workflows(&self) -> impl Iterator<Item = &WorkflowRecord> {
        self.workflows.values()
    }

    /// Number of workflows held.
    pub fn len(&self) -> usize {
        self.workflows.len()
    }

    /// Whether no workflow is held.
    pub fn is_empty(&self) -> bool {
        self.workflows.is_empty()
    }

    /// Applies a task event; returns the outcome when the record changed.
    pub fn apply_event(&mut self, ev: &TaskEvent, now: DateTime<Utc>) -> Option<EventOutcome> {
        let rec = self.workflows.get_mut(&ev.workflow_id)?;
        let before = rec.state;
        let outcome = rec.apply_event_with(ev, now, &self.tiers);
        let after = rec.state;
        if before != WorkflowState::Paused && after == WorkflowState::Paused {
            self.newly_paused.push(ev.workflow_id.clone());
        }
        let agent = ev.agent_type.clone();
        let finished_attempt = |this: &mut Self| {
            if let Some(n) = this.in_flight.get_mut(&agent) {
                *n = n.saturating_sub(1);
            }
        };
        match &outcome {
            EventOutcome::Ignored(_) => return None,
            EventOutcome::Started => {}
            EventOutcome::Completed { newly_ready, .. } => {
                finished_attempt(self);
                let ready = newly_ready.clone();
                for k in ready {
                    self.enqueue(&ev.workflow_id, &k);
                }
            }
            EventOutcome::Failed(RetryDecision::Retry { at, .. }) => {
                finished_attempt(self);
                let key = ev
                    .task_id
                    .strip_prefix(&format!("{}/", ev.workflow_id))
                    .unwrap_or_default()
                    .to_string();
                self.delayed.push((*at, ev.workflow_id.clone(), key));
            }
            EventOutcome::Failed(RetryDecision::Halt { .. }) => {
                finished_attempt(self);
            }
            EventOutcome::Failed(RetryDecision::Isolated { newly_ready }) => {
                finished_attempt(self);
                for k in newly_ready.clone() {
                    self.enqueue(&ev.workflow_id, &k);
                }
            }
        }
        if before.accepts_dispatch() && !after.accepts_dispatch() {
            self.unqueue(&ev.workflow_id);
        }
        Some(outcome)
    }

    fn unqueue(&mut self, wf: &str) {
        for q in self.queues.values_mut() {
            q.remove_workflow(wf);
        }
    }

    /// Pauses a workflow: its queued tasks leave the ready queues; in-flight
    /// ones finish (or not, with `cancel_in_flight`).
    pub fn pause(
        &mut self,
        id: &str,
        spec: PauseSpec,
        now: DateTime<Utc>,
    ) -> Option<Result<PauseOutcome, IllegalTransition>> {
        let rec = self.workflows.get_mut(id)?;
        let r = rec.request_pause(spec, now);
        if let Ok(o) = &r {
            if *o == PauseOutcome::Paused {
                self.newly_paused.push(id.to_string());
            }
            if *o != PauseOutcome::AlreadyPaused {
                self.unqueue(id);
            }
        }
        Some(r)
    }

    /// Resumes a paused workflow following `plan` and queues what is ready;
    /// returns the task keys given a new attempt.
    pub fn resume(
        &mut self,
        id: &str,
        plan: &ResumePlan,
        now: DateTime<Utc>,
    ) -> Option<Result<Vec<String>, ResumeError>> {
        let mut rec = self.remove(id)?;
        let r = rec.resume(plan, now);
        self.insert(rec);
        Some(r)
    }

    /// Puts a dispatched task back in its queue (its publish failed).
    pub fn requeue(&mut self, workflow_id: &str, task_id: &str) {
        let Some((key, t)) = self.dispatched_mut(workflow_id, task_id) else {
            return;
        };
        t.state = TaskRunState::Ready;
        let agent = t.agent_type.clone();
        if let Some(n) = self.in_flight.get_mut(&agent) {
            *n = n.saturating_sub(1);
        }
        self.enqueue(workflow_id, &key);
    }

    /// Puts a dispatched task back to be dispatched again, same attempt,
    /// no sooner than `at` (its publish found no JetStream to store it:
    /// the stream is electing a leader, or NATS is out of reach).
    pub fn requeue_at(&mut self, workflow_id: &str, task_id: &str, at: DateTime<Utc>) {
        if let Some((_, t)) = self.dispatched_mut(workflow_id, task_id) {
            t.not_before = Some(at);
            self.requeue(workflow_id, task_id);
        }
    }

    /// The task `task_id` of `workflow_id` (and its key in the record)
    /// while it is dispatched; `None` otherwise.
    fn dispatched_mut(
        &mut self,
        workflow_id: &str,
        task_id: &str,
    ) -> Option<(String, &mut TaskRecord)> {
        let key = task_id
            .strip_prefix(&format!("{workflow_id}/"))
            .unwrap_or(task_id)
            .to_string();
        let t = self.workflows.get_mut(workflow_id)?.tasks.get_mut(&key)?;
        (t.state == TaskRunState::Dispatched).then_some((key, t))
    }

    /// Moves retries whose backoff elapsed into the ready queues.
    pub fn release_delayed(&mut self, now: DateTime<Utc>) {
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.delayed)
            .into_iter()
            .partition(|(at, _, _)| *at <= now);
        self.delayed = later;
        for (_, wf, key) in due {
            if let Some(t) = self
                .workflows
                .get_mut(&wf)
                .and_then(|r| r.tasks.get_mut(&key))
            {
                t.not_before = None;
            }
            self.enqueue(&wf, &key);
        }
    }

    /// Pops the highest-priority ready tasks of every agent type while its
    /// in-flight count is below `capacity(agent_type)`, marks them
    /// dispatched and returns the bodies to publish (and the workflows
    /// changed).
    pub fn next_dispatches(
        &mut self,
        now: DateTime<Utc>,
        capacity: impl Fn(&str) -> usize,
    ) -> (Vec<TaskDispatch>, HashSet<String>) {
        self.release_delayed(now);
        let mut out = Vec::new();
        let mut dirty = HashSet::new();
        let agents: Vec<String> = self.queues.keys().cloned().collect();
        for agent in agents {
            let cap = capacity(&agent);
            loop {
                let busy = self.in_flight.get(&agent).copied().unwrap_or(0);
                if busy >= cap {
                    break;
                }
                let Some(entry) = self.queues.get_mut(&agent).and_then(ReadyQueue::pop) else {
                    break;
                };
                let Some(rec) = self.workflows.get_mut(&entry.workflow_id) else {
                    continue;
                };
                if let Some(d) = rec.dispatch(&entry.key, now) {
                    if let Some(t) = rec.tasks.get_mut(&entry.key) {
                        t.ready_at = Some(entry.enqueued_at.min(now));
                    }
                    *self.in_flight.entry(agent.clone()).or_default() += 1;
                    dirty.insert(entry.workflow_id.clone());
                    out.push(d);
                }
            }
        }
        (out, dirty)
    }

    /// Load per agent type.
    pub fn load(&self, now: DateTime<Utc>) -> BTreeMap<String, AgentLoad> {
        let mut m: BTreeMap<String, AgentLoad> = BTreeMap::new();
        for (a, q) in &self.queues {
            let l = m.entry(a.clone()).or_default();
            l.ready = q.len();
            l.oldest_wait_ms = q
                .oldest_enqueued()
                .map(|t| (now - t).num_milliseconds().max(0))
                .unwrap_or(0);
        }
        for (a, n) in &self.in_flight {
            m.entry(a.clone()).or_default().in_flight = *n;
        }
        for (_, wf, key) in &self.delayed {
            if let Some(t) = self.workflows.get(wf).and_then(|r| r.tasks.get(key)) {
                m.entry(t.agent_type.clone()).or_default().ready += 1;
            }
        }
        m
    }

    /// Flags overdue tasks; returns (workflow, task key) pairs newly flagged.
    pub fn flag_overdue(&mut self, now: DateTime<Utc>, factor: f64) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (id, rec) in self.workflows.iter_mut() {
            for k in rec.flag_overdue(now, factor) {
                out.push((id.clone(), k));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
