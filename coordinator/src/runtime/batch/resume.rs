//! Batch resumes: queueing a batch's paused items (`batch_resume`) and
//! [`BatchManager::drive`], which resumes them in order while the
//! concurrency limit and the capacity rule allow, and follows them.

use std::collections::{BTreeSet, HashMap, HashSet};

use chrono::{DateTime, Utc};

use caucus_shared::nats::ApiError;

use super::logic::{
    capacity_blocker, BatchItem, BatchRecord, BatchState, ItemState, BATCH_SCHEMA_VERSION,
};
use super::{latest_by_item, BatchManager, BatchResumeArgs};
use crate::engine::Engine;
use crate::workflow::{InFlightPolicy, TaskRunState, WorkflowRecord, WorkflowState};

/// Agent types a workflow needs right after its resume (its first ready
/// tasks), or in flight if none.
pub(super) fn first_wave_agents(
    rec: &WorkflowRecord,
    policy: InFlightPolicy,
    now: DateTime<Utc>,
) -> Vec<String> {
    let mut probe = rec.clone();
    let plan = probe.resume_plan(policy, now);
    if probe.resume(&plan, now).is_err() {
        return Vec::new();
    }
    let set: BTreeSet<String> = probe
        .tasks
        .values()
        .filter(|t| t.state == TaskRunState::Ready)
        .map(|t| t.agent_type.clone())
        .collect();
    set.into_iter().collect()
}

/// Agent types a running workflow currently occupies or waits for.
pub(super) fn busy_agents(rec: &WorkflowRecord) -> BTreeSet<String> {
    rec.tasks
        .values()
        .filter(|t| {
            matches!(
                t.state,
                TaskRunState::Ready | TaskRunState::Dispatched | TaskRunState::Running
            )
        })
        .map(|t| t.agent_type.clone())
        .collect()
}

impl BatchManager {
    /// A batch resume: by id, or by items (a new batch of their latest
    /// paused workflows). Returns the batch status; the resumes themselves
    /// happen in [`BatchManager::drive`].
    pub fn resume(
        &mut self,
        args: BatchResumeArgs,
        engine: &Engine,
        now: DateTime<Utc>,
    ) -> Result<String, ApiError> {
        if args.concurrency_limit == Some(0) {
            return Err(ApiError::bad_request(
                "concurrency_limit must be at least 1",
            ));
        }
        let limit = args.concurrency_limit.unwrap_or(self.default_concurrency);
        let batch_id = match (&args.batch_id, args.items.is_empty()) {
            (Some(id), _) => {
                if !self.batches.contains_key(id) {
                    return Err(ApiError::not_found(format!("no batch `{id}`")));
                }
                id.clone()
            }
            (None, false) => {
                let id = format!("resume-{}", uuid::Uuid::now_v7());
                let latest = latest_by_item(engine);
                let items = args
                    .items
                    .iter()
                    .map(|item| resume_item(item, latest.get(item.as_str()).copied()))
                    .collect();
                self.batches.insert(
                    id.clone(),
                    (
                        new_resume_batch(&id, items, limit, args.in_flight, now),
                        None,
                    ),
                );
                id
            }
            (None, true) => {
                return Err(ApiError::bad_request(
                    "name a `batch_id` or the `items` to resume",
                ))
            }
        };
        self.queue(&batch_id, limit, args.in_flight, now);
        Ok(batch_id)
    }

    /// Queues the paused items of `batch_id` (present) for resuming; a
    /// stopped batch is taken up again.
    pub(super) fn queue(
        &mut self,
        batch_id: &str,
        limit: u32,
        in_flight: InFlightPolicy,
        now: DateTime<Utc>,
    ) {
        let Some((b, _)) = self.batches.get_mut(batch_id) else {
            return;
        };
        if b.state == BatchState::Stopped {
            // A person resuming a stopped batch takes responsibility again.
            b.state = BatchState::Paused;
            b.stop_reason = None;
            for i in b.items.iter_mut() {
                if i.state == ItemState::ResumeFailed {
                    i.state = ItemState::Paused;
                }
            }
        }
        b.concurrency_limit = limit;
        b.in_flight = in_flight;
        for i in b.items.iter_mut() {
            if matches!(i.state, ItemState::Paused | ItemState::Pausing) {
                i.state = ItemState::ResumeQueued;
            }
        }
        b.refresh_state();
        b.updated_at = now;
        self.dirty.insert(batch_id.to_string());
    }

    /// Follows the workflows of every active batch and starts the resumes
    /// that are due. Returns the workflows resumed.
    pub fn drive(
        &mut self,
        engine: &mut Engine,
        capacity: &HashMap<String, usize>,
        dirty: &mut HashSet<String>,
        now: DateTime<Utc>,
    ) -> Vec<String> {
        let ratio = self.ratio;
        let batches = self.batches.values().map(|(b, _)| b);
        let mut to = Resumes::new(batches, engine, dirty, capacity, now);
        for (id, (b, _)) in self.batches.iter_mut() {
            if matches!(b.state, BatchState::Completed) {
                continue;
            }
            let before = b.clone();
            follow(b, to.engine);
            stop_if_failing(b, ratio);
            if b.state != BatchState::Stopped {
                let mut running = b
                    .items
                    .iter()
                    .filter(|i| i.state == ItemState::Resuming)
                    .count();
                for idx in b.resume_order() {
                    if running >= b.concurrency_limit as usize {
                        break;
                    }
                    match to.step(b, idx, id) {
                        Step::Next => continue,
                        Step::Wait => break,
                        Step::Resume { wf, needs } => {
                            if to.resume(b, idx, wf, needs) {
                                running += 1;
                            }
                        }
                    }
                }
            }
            b.refresh_state();
            if *b != before {
                b.updated_at = now;
                self.dirty.insert(id.clone());
            }
        }
        to.resumed
    }
}

/// Agent types held by the resumed-and-unfinished workflows of `batches`
/// (the capacity rule counts them before a resume).
fn active_agents<'a>(
    batches: impl Iterator<Item = &'a BatchRecord>,
    engine: &Engine,
) -> HashMap<String, usize> {
    let mut active: HashMap<String, usize> = HashMap::new();
    for b in batches {
        for i in b.items.iter().filter(|i| i.state == ItemState::Resuming) {
            if let Some(r) = i.workflow_id.as_deref().and_then(|id| engine.get(id)) {
                for a in busy_agents(r) {
                    *active.entry(a).or_default() += 1;
                }
            }
        }
    }
    active
}

/// What the item next in resume order allows.
pub(super) enum Step {
    /// Nothing to resume here (no workflow, resumed or finished
    /// meanwhile): go on with the next item.
    Next,
    /// Wait (a workflow still pausing keeps the order; capacity is full).
    Wait,
    /// Resume this workflow, which needs these agent types first.
    Resume {
        /// The item's workflow.
        wf: String,
        /// Agent types of its first ready tasks.
        needs: Vec<String>,
    },
}

/// One drive's resumes: where they are applied and counted, and what the
/// capacity rule checks them against.
pub(super) struct Resumes<'a> {
    /// The workflows.
    pub engine: &'a mut Engine,
    /// Workflows to persist.
    dirty: &'a mut HashSet<String>,
    /// Workflows resumed by this drive.
    pub resumed: Vec<String>,
    /// Agent types held by resumed workflows (see [`active_agents`]).
    active: HashMap<String, usize>,
    /// Each agent type's capacity.
    capacity: &'a HashMap<String, usize>,
    now: DateTime<Utc>,
}

impl<'a> Resumes<'a> {
    /// A drive over `batches` (every batch the manager holds: their
    /// resumed workflows count against the capacity).
    pub fn new<'b>(
        batches: impl Iterator<Item = &'b BatchRecord>,
        engine: &'a mut Engine,
        dirty: &'a mut HashSet<String>,
        capacity: &'a HashMap<String, usize>,
        now: DateTime<Utc>,
    ) -> Self {
        let active = active_agents(batches, engine);
        Resumes {
            engine,
            dirty,
            resumed: Vec::new(),
            active,
            capacity,
            now,
        }
    }

    /// Checks the item at `idx` of batch `id` for a resume, and notes on
    /// it what makes it no candidate.
    pub fn step(&self, b: &mut BatchRecord, idx: usize, id: &str) -> Step {
        let Some(wf) = b.items[idx].workflow_id.clone() else {
            return Step::Next;
        };
        let Some(rec) = self.engine.get(&wf) else {
            b.items[idx].state = ItemState::ResumeFailed;
            b.items[idx].error = Some(format!("workflow {wf} is not held"));
            return Step::Next;
        };
        match rec.state {
            WorkflowState::Pausing => return Step::Wait, // keep the order: wait for it
            WorkflowState::Paused => {}
            s => {
                // Resumed by someone else, or finished meanwhile.
                b.items[idx].state = if s == WorkflowState::Completed {
                    ItemState::Resumed
                } else {
                    ItemState::Resuming
                };
                return Step::Next;
            }
        }
        let needs = first_wave_agents(rec, b.in_flight, self.now);
        if let Some(full) = capacity_blocker(&needs, &self.active, self.capacity) {
            tracing::debug!(batch_id = %id, workflow_id = %wf, agent_type = %full, "resume waits for capacity");
            return Step::Wait;
        }
        Step::Resume { wf, needs }
    }

    /// Resumes `wf`, the workflow of item `idx` that [`Self::step`] let
    /// through; `true` if it resumed (a refusal is noted on the item).
    pub fn resume(
        &mut self,
        b: &mut BatchRecord,
        idx: usize,
        wf: String,
        needs: Vec<String>,
    ) -> bool {
        let now = self.now;
        let Some(rec) = self.engine.get(&wf) else {
            return false;
        };
        let seq = rec.pause.as_ref().map(|p| p.seq);
        let plan = rec.resume_plan(b.in_flight, now);
        match self.engine.resume(&wf, &plan, now) {
            Some(Ok(_)) => {
                b.items[idx].state = ItemState::Resuming;
                b.items[idx].resumed_from_pause = seq;
                self.dirty.insert(wf.clone());
                self.resumed.push(wf);
                for a in needs {
                    *self.active.entry(a).or_default() += 1;
                }
                true
            }
            Some(Err(e)) => {
                b.items[idx].state = ItemState::ResumeFailed;
                b.items[idx].error = Some(e.to_string());
                false
            }
            None => false,
        }
    }
}

/// The item of a new resume batch for `item`, whose latest workflow is
/// `rec` (none: the item fails; not paused: skipped).
pub(super) fn resume_item(item: &str, rec: Option<&WorkflowRecord>) -> BatchItem {
    let (state, error) = match rec.map(|r| r.state) {
        None => (
            ItemState::Failed,
            Some(format!("no workflow for item `{item}`")),
        ),
        Some(WorkflowState::Paused) => (ItemState::Paused, None),
        Some(WorkflowState::Pausing) => (ItemState::Pausing, None),
        Some(s) => (
            ItemState::Skipped,
            Some(format!("not paused: workflow {s}")),
        ),
    };
    BatchItem {
        item: item.to_string(),
        workflow_id: rec.map(|r| r.workflow_id.clone()),
        state,
        error,
        paused_at: rec.and_then(|r| r.paused_at()),
        gate_timeout: rec
            .and_then(|r| r.pause.as_ref())
            .is_some_and(|p| p.is_gate_timeout()),
        resumed_from_pause: None,
    }
}

/// A new batch made by a resume of items.
pub(super) fn new_resume_batch(
    id: &str,
    items: Vec<BatchItem>,
    limit: u32,
    in_flight: InFlightPolicy,
    now: DateTime<Utc>,
) -> BatchRecord {
    BatchRecord {
        schema_version: BATCH_SCHEMA_VERSION,
        batch_id: id.to_string(),
        reason: "resume requested".into(),
        correlation_id: None,
        state: BatchState::Paused,
        max_concurrency: limit,
        concurrency_limit: limit,
        in_flight,
        items,
        stop_reason: None,
        created_at: now,
        updated_at: now,
    }
}

/// Stops a resuming batch when more than `ratio` of its resumes failed;
/// items still queued go back to paused.
pub(super) fn stop_if_failing(b: &mut BatchRecord, ratio: f64) {
    if b.state == BatchState::Resuming && b.resume_should_stop(ratio) {
        b.state = BatchState::Stopped;
        b.stop_reason = Some(format!(
            "more than {:.0} % of the resumes failed",
            ratio * 100.0
        ));
        for i in b.items.iter_mut() {
            if i.state == ItemState::ResumeQueued {
                i.state = ItemState::Paused;
            }
        }
    }
}

/// Updates items from their workflows.
pub(super) fn follow(b: &mut BatchRecord, engine: &Engine) {
    for i in b.items.iter_mut() {
        let Some(rec) = i.workflow_id.as_deref().and_then(|id| engine.get(id)) else {
            continue;
        };
        match (i.state, rec.state) {
            (ItemState::Pausing, WorkflowState::Paused) => {
                i.state = ItemState::Paused;
                i.paused_at = rec.paused_at();
            }
            (ItemState::Pausing, WorkflowState::Completed) => {
                i.state = ItemState::Skipped;
                i.error = Some("completed before it paused".into());
            }
            (ItemState::ResumeQueued, WorkflowState::Paused) => {
                i.paused_at = rec.paused_at();
            }
            (ItemState::Resuming, WorkflowState::Completed) => i.state = ItemState::Resumed,
            (ItemState::Resuming, WorkflowState::Failed) => {
                i.state = ItemState::ResumeFailed;
                i.error = rec.failure.clone();
            }
            (ItemState::Resuming, WorkflowState::Pausing | WorkflowState::Paused) => {
                let again = rec
                    .pause
                    .as_ref()
                    .is_some_and(|p| Some(p.seq) != i.resumed_from_pause);
                if again {
                    i.state = ItemState::ResumeFailed;
                    i.error = Some(format!(
                        "paused again: {}",
                        rec.pause.as_ref().map(|p| p.reason.as_str()).unwrap_or("")
                    ));
                }
            }
            _ => {}
        }
    }
}
