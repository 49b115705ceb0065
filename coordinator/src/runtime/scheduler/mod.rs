//! The one task that owns the [`Engine`]: it applies submissions and task
//! events, dispatches within capacity, persists what changed, and only then
//! acknowledges the events. Crash anywhere and the unacknowledged events
//! are redelivered against the last persisted records; re-dispatches reuse
//! the same `Nats-Msg-Id`, so JetStream drops the duplicates.
//!
//! Here: the state, the main loop and the dispatch of commands. The parts,
//! one concept each: `events` (applying task events), `dispatch` (the pump
//! and publishing), `persist` (storing records, then acknowledging),
//! `attempts` (in-flight attempts: silence, failing for a retry),
//! `records` (which workflows are held in memory), `gating` (gate
//! commands, timers and automatic approvals), `flags` (broadcast flags),
//! `status` (the status reply) and `tick` (the periodic work).

mod attempts;
mod dispatch;
mod events;
mod flags;
mod gating;
mod inbound;
mod persist;
mod records;
mod status;
mod tick;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_nats::jetstream;
use chrono::Utc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use caucus_shared::clock::SharedClock;
use caucus_shared::config::CoordinatorConfig;
use caucus_shared::subjects::Subjects;

use caucus_shared::redis::leadership::LeaderLease;

pub use super::commands::{
    ask, parse_status_cursor, status_cursor, AskError, Capacities, Command, SchedulerHandle,
    StatusFilter, SCHEDULER_REPLY_TIMEOUT, STATUS_DEFAULT_LIMIT, STATUS_MAX_LIMIT,
};
use super::control::Control;
use super::store::WorkflowStore;
use crate::engine::Engine;
use crate::workflow::TierRules;
use caucus_shared::nats::ApiError;

/// The scheduler's state.
pub struct Scheduler {
    engine: Engine,
    revisions: HashMap<String, u64>,
    dirty: HashSet<String>,
    /// When each workflow in `dirty` first changed since its last write
    /// (the pump writes it `persist_delay` later, see `persist`).
    dirty_since: HashMap<String, tokio::time::Instant>,
    /// When the first held-back write is due: the loop wakes for it.
    next_persist: Option<tokio::time::Instant>,
    /// Events applied in memory, by workflow, acknowledged only once that
    /// workflow's record is stored (or nak'ed when it cannot be: a
    /// revision conflict or a lost lease), so one record never holds back
    /// the events of another and no event is acked for an effect that was
    /// discarded.
    pending_acks: HashMap<String, Vec<jetstream::Message>>,
    /// `started` events whose only effect is not yet persisted, by
    /// workflow: written with the workflow's next change or at the next
    /// tick, and acknowledged only then.
    lazy: HashMap<String, Vec<jetstream::Message>>,
    store: WorkflowStore,
    js: jetstream::Context,
    subjects: Subjects,
    capacities: Capacities,
    clock: SharedClock,
    cfg: CoordinatorConfig,
    control: Option<Control>,
    /// This scheduler's own command channel (automatic gate approvals
    /// report back through it).
    self_handle: Option<SchedulerHandle>,
    /// Automatic approvals under way or blocked, since when: (workflow, gate).
    auto_pending: HashMap<(String, String), std::time::Instant>,
    /// Where the off-loop checks (automatic approvals) run: tracked, and a
    /// panic marks the process's health.
    tasks: caucus_shared::service::Tasks,
    /// Auto-approving workflows with a completion since the last pump.
    auto_due: Vec<String>,
    research: Option<crate::research::runtime::ResearchRuntime>,
    /// The fenced leader lease this scheduler acts under (`None` only in
    /// tests that run a scheduler without a lock).
    lease: Option<LeaderLease>,
    /// When the coordinator last heard of each in-flight task (dispatch,
    /// `started` or `progress`), by task id. In memory only: a takeover
    /// gives every in-flight task a fresh grace period.
    heard: HashMap<String, chrono::DateTime<Utc>>,
    /// How long an in-flight task may stay silent before its attempt is
    /// failed and retried (the workers' `ack_wait + lease_ttl`).
    silence: Duration,
    /// Outputs too large for the record, by workflow: written to the
    /// outputs bucket before the record that points at them.
    unsaved_outputs: HashMap<String, Vec<(String, bytes::Bytes)>>,
    /// Workflows read back from KV on demand (finished ones, for a re-run
    /// or a gate): their index entry is written again before a write that
    /// leaves them unfinished.
    unindexed: HashSet<String>,
    /// Addressed findings handed to the next tasks of their item.
    findings: Option<crate::runtime::inbound::FindingsIndex>,
    /// Answers finished request workflows.
    requests: Option<crate::runtime::requests::RequestAnswers>,
    /// Finished workflows already counted in `caucus_workflows_finished_total`
    /// (or finished before this scheduler held them): a finish is counted
    /// once, when an event ends the workflow or the next gauge refresh
    /// finds it finished, whichever comes first.
    finished_seen: HashSet<String>,
    /// When the gauges' snapshot was last refreshed.
    gauges_at: Option<std::time::Instant>,
    /// The partition whose workflows this scheduler owns (all of them
    /// with one partition).
    partition: super::partition::Partition,
    /// The index groups of this partition's unfinished workflows: a
    /// group's key is removed after its last member's finishing write.
    index_groups: crate::runtime::index_groups::ActiveGroups,
    /// Index keys to remove at the next write (groups found with nothing
    /// left unfinished).
    unindex_due: Vec<String>,
}

impl Scheduler {
    /// A scheduler over the stored workflows.
    pub fn new(
        store: WorkflowStore,
        js: jetstream::Context,
        subjects: Subjects,
        capacities: Capacities,
        clock: SharedClock,
        cfg: CoordinatorConfig,
    ) -> Self {
        let mut engine = Engine::new();
        engine.set_tiers(TierRules::new(cfg.failure_tiers.clone()));
        Scheduler {
            engine,
            revisions: HashMap::new(),
            dirty: HashSet::new(),
            dirty_since: HashMap::new(),
            next_persist: None,
            pending_acks: HashMap::new(),
            lazy: HashMap::new(),
            store,
            js,
            subjects,
            capacities,
            clock,
            cfg,
            control: None,
            self_handle: None,
            auto_pending: HashMap::new(),
            tasks: caucus_shared::service::Tasks::new(Default::default()),
            auto_due: Vec::new(),
            research: None,
            lease: None,
            heard: HashMap::new(),
            silence: Duration::from_secs(40),
            unsaved_outputs: HashMap::new(),
            unindexed: HashSet::new(),
            findings: None,
            requests: None,
            finished_seen: HashSet::new(),
            gauges_at: None,
            partition: super::partition::Partition::ONLY,
            index_groups: Default::default(),
            unindex_due: Vec::new(),
        }
    }

    /// Owns only the workflows of `partition`: loads, takes over and
    /// dispatches nothing else, and names it on every dispatch.
    pub fn with_partition(mut self, partition: super::partition::Partition) -> Self {
        self.partition = partition;
        self
    }

    /// In-flight tasks silent for longer than `silence` are failed and
    /// retried under their policy (set it to the workers' `ack_wait +
    /// lease_ttl`: by then JetStream has redelivered a dispatch whose
    /// worker died, and a live worker has reported progress).
    pub fn with_silence(mut self, silence: Duration) -> Self {
        self.silence = silence;
        self
    }

    /// Runs its off-loop checks on the process's `tasks` (by default its own
    /// tracker, whose panics no health report shows).
    pub fn with_tasks(mut self, tasks: caucus_shared::service::Tasks) -> Self {
        self.tasks = tasks;
        self
    }

    /// Acts only while `lease` is valid and stamps its epoch on every
    /// record it writes.
    pub fn with_lease(mut self, lease: LeaderLease) -> Self {
        self.lease = Some(lease);
        self
    }

    /// The fencing epoch written into records (0 without a lease).
    fn epoch(&self) -> u64 {
        self.lease.as_ref().map_or(0, LeaderLease::epoch)
    }

    /// Whether this scheduler may still write or dispatch: its lease is
    /// valid by its own clock (with the safety margin). The first time it
    /// is not, the tenure ends: everything watching the lease stops.
    fn may_act(&self) -> bool {
        match &self.lease {
            None => true,
            Some(l) if l.is_valid() => true,
            Some(l) => {
                l.step_down("leader lease expired (paused or cut off from Redis)");
                false
            }
        }
    }

    /// Gives the scheduler its own command channel (for automatic gate
    /// approvals, which are checked off the loop).
    pub fn set_handle(&mut self, handle: SchedulerHandle) {
        self.self_handle = Some(handle);
    }

    /// Adds pause/resume, batches and failure events.
    pub fn with_control(mut self, control: Control) -> Self {
        self.control = Some(control);
        self
    }

    /// Adds the research rules' side effects (writes, alerts, time
    /// limits, checkpoints).
    pub fn with_research(mut self, research: crate::research::runtime::ResearchRuntime) -> Self {
        self.research = Some(research);
        self
    }

    /// Answers finished request workflows (and ends those past their
    /// deadline).
    pub fn with_requests(mut self, requests: crate::runtime::requests::RequestAnswers) -> Self {
        self.requests = Some(requests);
        self
    }

    fn capacity_snapshot(&self) -> HashMap<String, usize> {
        self.capacities
            .read()
            .map(|c| c.clone())
            .unwrap_or_default()
    }

    /// Runs until `shutdown`; returns after persisting what it can.
    pub async fn run(mut self, mut rx: mpsc::Receiver<Command>, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.cfg.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let due = self.next_persist;
            let held_write = async move {
                match due {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            // The work of each arm is boxed: inline, every arm's future
            // sits in this loop's frame, which a debug build's deepest path
            // (a tick driving a batch across partitions into Redis) pushed
            // past a worker thread's 2 MiB stack.
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = held_write => {}
                cmd = rx.recv() => match cmd {
                    Some(cmd) => {
                        Box::pin(self.handle(cmd)).await;
                        // Drain what queued up meanwhile before the next pump.
                        while let Ok(more) = rx.try_recv() {
                            Box::pin(self.handle(more)).await;
                        }
                    }
                    None => break,
                },
                _ = tick.tick() => Box::pin(self.on_tick()).await,
            }
            Box::pin(self.pump()).await;
        }
        self.flush_lazy();
        self.persist().await;
        if self.lease.as_ref().is_some_and(|l| !l.is_valid()) {
            self.abandon().await;
        }
    }

    async fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::Submit { op, reply } => {
                let res = self.submit(op);
                let _ = reply.send(res);
            }
            Command::Events(batch) => self.apply_events(batch).await,
            Command::Status { filter, reply } => {
                let v = self.status(&filter).await;
                let _ = reply.send(v);
            }
            Command::Control { op, reply } => {
                let now = self.clock.now();
                let caps = self.capacity_snapshot();
                let r = match self.control.as_mut() {
                    Some(c) => c.handle(op, &mut self.engine, &mut self.dirty, &caps, now),
                    None => Err(ApiError::new(
                        "unavailable",
                        "pause/resume is not enabled on this scheduler",
                    )),
                };
                // Stored before the caller hears "done": a crash right
                // after the reply must not lose a person's command.
                if r.is_ok() {
                    self.persist().await;
                }
                let _ = reply.send(r);
            }
            Command::Gate { op, reply } => {
                let r = self.gate(op).await;
                let _ = reply.send(r);
            }
            Command::Poke => {}
            Command::Finding {
                item,
                addressee,
                finding,
                any_addressee,
                reply,
            } => {
                let r = self
                    .hold_finding(item, addressee, finding, any_addressee)
                    .await;
                let _ = reply.send(r);
            }
            Command::Flag { flag, reply } => {
                let n = self.flag_unfinished(flag).await;
                let _ = reply.send(n);
            }
            Command::FailTask {
                task_id,
                attempt,
                error,
            } => {
                let Some((wf, _)) = caucus_shared::task::split_task_id(&task_id) else {
                    return;
                };
                let wf = wf.to_string();
                self.ensure_loaded(&wf).await;
                self.fail_attempt(&wf, &task_id, attempt, error);
            }
            Command::AdoptIds { ids, group, reply } => {
                let mut held = 0;
                if self.may_act() {
                    for id in &ids {
                        let fresh = self.engine.get(id).is_none();
                        self.ensure_loaded(id).await;
                        if self.engine.get(id).is_some() {
                            held += 1;
                            if fresh {
                                crate::runtime::metrics::workflows_submitted(1);
                            }
                        }
                    }
                    if let Some(key) = group {
                        self.track_group(key, ids);
                    }
                }
                let _ = reply.send(held);
            }
            Command::LatestOfItem { item, reply } => {
                let latest = super::control::latest_of_item(&self.engine, &item)
                    .map(|r| (r.workflow_id.clone(), r.created_at));
                let _ = reply.send(latest);
            }
            Command::Load { reply } => {
                let _ = reply.send(self.engine.load(self.clock.now()));
            }
        }
    }
}
