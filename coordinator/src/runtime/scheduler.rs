//! The one task that owns the [`Engine`]: it applies submissions and task
//! events, dispatches within capacity, persists what changed, and only then
//! acknowledges the events. Crash anywhere and the unacknowledged events
//! are redelivered against the last persisted records; re-dispatches reuse
//! the same `Nats-Msg-Id`, so JetStream drops the duplicates.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_nats::jetstream::{self, context::PublishAckFuture};
use async_nats::HeaderMap;
use chrono::Utc;
use futures::future::join_all;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use caucus_shared::clock::SharedClock;
use caucus_shared::config::CoordinatorConfig;
use caucus_shared::nats::trace;
use caucus_shared::subjects::Subjects;
use caucus_shared::task::{TaskDispatch, TaskEvent};

use caucus_shared::redis::leadership::LeaderLease;

pub use super::commands::{
    ask, parse_status_cursor, status_cursor, AskError, Capacities, Command, SchedulerHandle,
    StatusFilter, SCHEDULER_REPLY_TIMEOUT, STATUS_DEFAULT_LIMIT, STATUS_MAX_LIMIT,
};
use super::control::Control;
use super::store::{StoreError, WorkflowStore};
use crate::engine::Engine;
use crate::workflow::{EventOutcome, TierRules, WorkflowRecord, WorkflowState};
use caucus_shared::nats::ApiError;

/// The scheduler's state.
pub struct Scheduler {
    engine: Engine,
    revisions: HashMap<String, u64>,
    dirty: HashSet<String>,
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
            auto_due: Vec::new(),
            research: None,
            lease: None,
            heard: HashMap::new(),
            silence: Duration::from_secs(40),
            unsaved_outputs: HashMap::new(),
            unindexed: HashSet::new(),
        }
    }

    /// In-flight tasks silent for longer than `silence` are failed and
    /// retried under their policy (set it to the workers' `ack_wait +
    /// lease_ttl`: by then JetStream has redelivered a dispatch whose
    /// worker died, and a live worker has reported progress).
    pub fn with_silence(mut self, silence: Duration) -> Self {
        self.silence = silence;
        self
    }

    /// Starts the silence clock of every in-flight task of `id`.
    fn hear_in_flight(&mut self, id: &str) {
        let now = self.clock.now();
        let Some(rec) = self.engine.get(id) else {
            return;
        };
        for (key, t) in &rec.tasks {
            if t.state.is_in_flight() {
                self.heard.insert(rec.task_id(key), now);
            }
        }
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

    fn capacity_snapshot(&self) -> HashMap<String, usize> {
        self.capacities
            .read()
            .map(|c| c.clone())
            .unwrap_or_default()
    }

    /// Loads every unfinished workflow from KV (start-up / takeover).
    /// Returns how many, and the highest fencing epoch found in any record
    /// (the floor this tenure's epoch must be above).
    pub async fn load(&mut self) -> Result<(usize, u64), StoreError> {
        let (all, max_epoch) = self.store.load_unfinished().await?;
        let mut n = 0;
        let mut stage_lists = crate::workflow::StageLists::default();
        for (mut rec, rev) in all {
            // Workflows read back from KV share equal stage lists again,
            // as they did when they were submitted together.
            rec.stages = stage_lists.intern(&rec.pipeline, rec.stages);
            self.revisions.insert(rec.workflow_id.clone(), rev);
            let id = rec.workflow_id.clone();
            self.engine.insert(rec);
            self.hear_in_flight(&id);
            n += 1;
        }
        if let Some(c) = self.control.as_mut() {
            c.load(&self.engine).await.map_err(StoreError::Nats)?;
        }
        Ok((n, max_epoch))
    }

    /// Runs until `shutdown`; returns after persisting what it can.
    pub async fn run(mut self, mut rx: mpsc::Receiver<Command>, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(self.cfg.tick);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                cmd = rx.recv() => match cmd {
                    Some(cmd) => {
                        self.handle(cmd).await;
                        // Drain what queued up meanwhile before the next pump.
                        while let Ok(more) = rx.try_recv() {
                            self.handle(more).await;
                        }
                    }
                    None => break,
                },
                _ = tick.tick() => self.on_tick().await,
            }
            self.pump().await;
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
            Command::Events(batch) => {
                let now = self.clock.now();
                for (ev, msg) in batch {
                    if let Some(expected) = self
                        .engine
                        .get(&ev.workflow_id)
                        .and_then(|r| r.agent_type_mismatch(&ev))
                    {
                        let reason = format!(
                            "task {} belongs to agent type '{expected}', the event says '{}'",
                            ev.task_id, ev.agent_type
                        );
                        self.dead_letter(msg, "agent_type_mismatch", &reason).await;
                        continue;
                    }
                    if ev.status == caucus_shared::task::TaskStatus::Progress
                        && self
                            .engine
                            .get(&ev.workflow_id)
                            .is_some_and(|r| r.is_running(&ev))
                    {
                        // A heartbeat of a running attempt: nothing to store.
                        self.heard.insert(ev.task_id.clone(), now);
                        self.pending_acks
                            .entry(ev.workflow_id.clone())
                            .or_default()
                            .push(msg);
                        continue;
                    }
                    let outcome = self.engine.apply_event(&ev, now);
                    if matches!(outcome, Some(EventOutcome::Completed { .. }))
                        && msg.payload.len() > self.cfg.inline_output_bytes
                    {
                        self.spill_output(&ev);
                    }
                    match &outcome {
                        Some(EventOutcome::Started) => {
                            self.heard.insert(ev.task_id.clone(), now);
                        }
                        Some(_) => {
                            self.heard.remove(&ev.task_id);
                        }
                        None => {}
                    }
                    if matches!(outcome, Some(EventOutcome::Started))
                        && !self.dirty.contains(&ev.workflow_id)
                    {
                        // Under load the completion follows within
                        // milliseconds and one write records both: a
                        // write per `started` was a third of all KV writes.
                        self.lazy
                            .entry(ev.workflow_id.clone())
                            .or_default()
                            .push(msg);
                        continue;
                    }
                    if let Some(outcome) = outcome {
                        self.dirty.insert(ev.workflow_id.clone());
                        // A completion may have opened a gate that approves
                        // itself: check it now, not at the next tick.
                        if matches!(outcome, EventOutcome::Completed { .. })
                            && self
                                .engine
                                .get(&ev.workflow_id)
                                .is_some_and(|r| r.auto_approve_gates)
                        {
                            self.auto_due.push(ev.workflow_id.clone());
                        }
                        if let Some(c) = self.control.as_mut() {
                            c.on_outcome(&ev, &outcome, &self.engine);
                        }
                    } else if !self.revisions.contains_key(&ev.workflow_id)
                        && self.engine.get(&ev.workflow_id).is_none()
                    {
                        tracing::debug!(task_id = %ev.task_id, "event for a workflow this coordinator does not hold");
                    }
                    self.pending_acks
                        .entry(ev.workflow_id.clone())
                        .or_default()
                        .push(msg);
                }
            }
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
                if let Some(id) = op.workflow_id() {
                    self.ensure_loaded(id).await;
                }
                let now = self.clock.now();
                if let super::gates::GateOp::Decide {
                    workflow_id,
                    gate: Some(g),
                    ..
                } = &op
                {
                    self.auto_pending.remove(&(workflow_id.clone(), g.clone()));
                }
                // Automatic approvals are written with the next batch: nobody
                // waits on their reply, and under load they are frequent.
                let automatic = matches!(&op, super::gates::GateOp::Decide { req, .. } if req.decided_by == "auto");
                let id = op.workflow_id().filter(|_| !automatic).map(str::to_string);
                let mut r = super::gates::apply(op, &mut self.engine, &mut self.dirty, now);
                // A decision is stored before it is confirmed; if the store
                // is down it stays in memory, is retried, and the reply
                // says `persisted: false`.
                if let (Ok(Value::Object(m)), Some(id)) = (&mut r, id) {
                    if self.dirty.contains(&id) {
                        self.persist().await;
                        m.insert("persisted".into(), json!(!self.dirty.contains(&id)));
                    }
                }
                let _ = reply.send(r);
            }
            Command::Poke => {}
            Command::Flag { flag, reply } => {
                let ids: Vec<String> = self
                    .engine
                    .workflows()
                    .filter(|r| !r.state.is_terminal())
                    .map(|r| r.workflow_id.clone())
                    .collect();
                let mut flagged: Vec<(String, String)> = Vec::new();
                for id in ids {
                    if let Some(r) = self.engine.get_mut(&id) {
                        if r.add_flag(flag.clone()) {
                            flagged.push((id.clone(), r.item.clone()));
                            self.dirty.insert(id);
                        }
                    }
                }
                let n = flagged.len();
                if n > 0 {
                    self.flag_alert(&flag, &flagged).await;
                }
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
            Command::Load { reply } => {
                let _ = reply.send(self.engine.load(self.clock.now()));
            }
        }
    }

    /// One card for people when a broadcast flags analyses in progress
    /// (the seed: regime changes are sent to the gate dashboards). Its id
    /// is fixed per broadcast, so a redelivered broadcast sends no second one.
    async fn flag_alert(&self, flag: &crate::workflow::WorkflowFlag, flagged: &[(String, String)]) {
        /// Workflows named in one card, at most.
        const LISTED: usize = 100;
        let card = super::publish::alert(
            "workflows_flagged",
            "warning",
            json!({
                "kind": flag.kind,
                "count": flagged.len(),
                "workflows": flagged
                    .iter()
                    .take(LISTED)
                    .map(|(w, i)| json!({"workflow_id": w, "item": i}))
                    .collect::<Vec<_>>(),
                "detail": flag.detail,
                "actions": ["review in-progress analyses for regime sensitivity"],
            }),
        );
        let msg_id = format!(
            "alert:flagged:{}",
            flag.detail["id"].as_str().unwrap_or("unknown")
        );
        if let Err(e) =
            super::publish::publish(&self.js, self.subjects.alerts("warning"), &card, &msg_id).await
        {
            tracing::warn!(error = %e, "flag alert not sent");
        }
    }

    /// Puts a workflow this scheduler no longer holds (finished and
    /// evicted) back in memory from KV, so it can be re-run or inspected.
    async fn ensure_loaded(&mut self, id: &str) {
        if self.engine.get(id).is_some() {
            return;
        }
        if let Ok(Some((rec, rev))) = self.store.get(id).await {
            self.revisions.insert(id.to_string(), rev);
            if rec.state.is_terminal() {
                self.unindexed.insert(id.to_string());
            }
            self.engine.insert(rec);
            self.hear_in_flight(id);
        }
    }

    /// Reminders and escalations of open gates; automatic approvals.
    async fn gate_timers(&mut self, now: chrono::DateTime<Utc>) {
        let cfg = self.cfg.clone();
        let notices = self
            .engine
            .gate_notices(now, |rec, key| super::gates::timers_for(&cfg, rec, key));
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
            let card = super::publish::alert(
                event,
                severity,
                super::gates::notice_fields(rec, &n.gate, n.waiting_ms, n.reminder),
            );
            let opened = rec.tasks[&n.gate]
                .gate
                .as_ref()
                .map(|g| g.opened_at.timestamp_millis())
                .unwrap_or_default();
            let msg_id = format!("alert:{event}:{wf}/{}@{opened}:{}", n.gate, n.reminder);
            if let Err(e) =
                super::publish::publish(&self.js, self.subjects.alerts(severity), &card, &msg_id)
                    .await
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
        let candidates = super::gates::auto_candidates(&self.engine, Utc::now());
        self.auto_pending.retain(|k, _| {
            candidates
                .iter()
                .any(|c| (&c.workflow_id, &c.gate) == (&k.0, &k.1))
        });
        self.auto_approve_these(candidates);
    }

    /// Starts the approval check of each candidate gate not already under
    /// way (or blocked less than the retry period ago).
    fn auto_approve_these(&mut self, candidates: Vec<super::gates::AutoCandidate>) {
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
            tokio::spawn(async move {
                super::gates_api::auto_decide(client, subjects, timeout, handle, c).await;
            });
        }
    }

    /// A step of a submission. The records were stored by the API (off
    /// this loop) stamped with the epoch this answered before; taking them
    /// over is in memory only, so a large submission, handed over in
    /// steps, never holds up dispatching. A record this scheduler already
    /// holds (a retry racing the first attempt) is left as it is.
    fn submit(
        &mut self,
        op: super::submissions::SubmitOp,
    ) -> Result<super::submissions::SubmitGrant, String> {
        if !self.may_act() {
            return Err(
                "this coordinator's leader lease ran out; retry: another instance takes over"
                    .into(),
            );
        }
        if let super::submissions::SubmitOp::Adopt(records) = op {
            for (rec, rev) in records {
                if self.engine.get(&rec.workflow_id).is_some() {
                    continue;
                }
                let id = rec.workflow_id.clone();
                self.revisions.insert(id.clone(), rev);
                self.engine.insert(rec);
                self.hear_in_flight(&id);
            }
        }
        Ok(super::submissions::SubmitGrant {
            epoch: self.epoch(),
            store: self.store.clone(),
        })
    }

    /// Moves a just-recorded output that is over `inline_output_bytes` out
    /// of the record: it is written to the outputs bucket ahead of the
    /// record, which keeps only its key.
    fn spill_output(&mut self, ev: &TaskEvent) {
        let Some(rec) = self.engine.get_mut(&ev.workflow_id) else {
            return;
        };
        let Some(key) = ev.task_id.strip_prefix(&format!("{}/", ev.workflow_id)) else {
            return;
        };
        let Some(t) = rec.tasks.get_mut(key) else {
            return;
        };
        let Some(out) = &t.output else { return };
        let body = serde_json::to_vec(out).expect("outputs serialise");
        if body.len() <= self.cfg.inline_output_bytes {
            return;
        }
        let okey = super::store::output_key(&ev.task_id, t.attempt);
        t.output_key = Some(okey.clone());
        self.unsaved_outputs
            .entry(ev.workflow_id.clone())
            .or_default()
            .push((okey, body.into()));
    }

    /// Sends an event that must not be applied to the DLQ, then acks it;
    /// if the DLQ cannot take it, it is nak'ed to come back later.
    async fn dead_letter(&self, msg: jetstream::Message, code: &str, reason: &str) {
        let dlq = caucus_shared::nats::dlq::Dlq::new(self.js.clone(), self.subjects.clone());
        match dlq.dead_letter_message(&msg, code, reason).await {
            Ok(()) => {
                let _ = msg.ack().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot dead-letter an event; it comes back later");
                let _ = msg
                    .ack_with(jetstream::AckKind::Nak(Some(Duration::from_secs(5))))
                    .await;
            }
        }
    }

    /// Makes every lazily recorded `started` due for the next persist.
    fn flush_lazy(&mut self) {
        for (id, msgs) in self.lazy.drain() {
            self.dirty.insert(id.clone());
            self.pending_acks.entry(id).or_default().extend(msgs);
        }
    }

    async fn on_tick(&mut self) {
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
        self.evict_finished(now);
    }

    fn evict_finished(&mut self, now: chrono::DateTime<Utc>) {
        let keep = chrono::Duration::from_std(self.cfg.retain_finished).unwrap_or_default();
        let old: Vec<String> = self
            .engine
            .workflows()
            .filter(|r| r.state.is_terminal())
            .filter(|r| r.finished_at.is_some_and(|f| now - f > keep))
            .filter(|r| !self.dirty.contains(&r.workflow_id))
            .map(|r| r.workflow_id.clone())
            .collect();
        for id in old {
            self.engine.remove(&id);
            self.revisions.remove(&id);
            self.unindexed.remove(&id);
        }
    }

    /// Dispatch within capacity, publish, persist, then ack events.
    async fn pump(&mut self) {
        if !self.may_act() {
            self.abandon().await;
            return;
        }
        let now = self.clock.now();
        let caps = self
            .capacities
            .read()
            .map(|c| c.clone())
            .unwrap_or_default();
        let (dispatches, dirty) = self
            .engine
            .next_dispatches(now, |a| caps.get(a).copied().unwrap_or(0));
        self.dirty.extend(dirty);
        if !dispatches.is_empty() {
            self.publish(dispatches).await;
        }
        if let Some(c) = self.control.as_mut() {
            c.flush(&mut self.engine, &mut self.dirty, now).await;
        }
        if let Some(r) = self.research.as_mut() {
            r.flush(&mut self.engine, &self.dirty).await;
        }
        if !self.auto_due.is_empty() {
            let due = std::mem::take(&mut self.auto_due);
            let candidates = super::gates::auto_candidates_of(&self.engine, &due, Utc::now());
            self.auto_approve_these(candidates);
        }
        self.persist().await;
    }

    async fn publish(&mut self, dispatches: Vec<TaskDispatch>) {
        // Checked right before the batch goes out: a leader that was paused
        // past its lease dispatches nothing (its successor owns the tasks).
        if !self.may_act() {
            return;
        }
        let mut acks: Vec<(TaskDispatch, Result<PublishAckFuture, String>)> =
            Vec::with_capacity(dispatches.len());
        for d in dispatches {
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Msg-Id", d.msg_id().as_str());
            trace::inject(&mut headers);
            let body = serde_json::to_vec(&d).expect("dispatch serialises");
            let r = self
                .js
                .publish_with_headers(self.subjects.tasks(&d.agent_type), headers, body.into())
                .await
                .map_err(|e| e.to_string());
            acks.push((d, r));
        }
        let mut failed = Vec::new();
        let futs = acks.into_iter().map(|(d, r)| async move {
            match r {
                Ok(f) => match f.await {
                    Ok(_) => Ok(d.task_id),
                    Err(e) => Err((d, e.to_string())),
                },
                Err(e) => Err((d, e)),
            }
        });
        let now = self.clock.now();
        for r in join_all(futs).await {
            match r {
                Ok(task_id) => {
                    self.heard.insert(task_id, now);
                }
                Err((d, e)) => failed.push((d, e)),
            }
        }
        for (d, e) in failed {
            self.dispatch_failed(&d, &e);
        }
    }

    /// A dispatch JetStream did not confirm fails its attempt (transient),
    /// so the task's retry policy backs it off or fails it with the reason
    /// instead of republishing it on every pump while NATS is unwell. If
    /// the message was stored after all, the worker's events of that
    /// attempt are stale once the next attempt is dispatched.
    fn dispatch_failed(&mut self, d: &TaskDispatch, error: &str) {
        tracing::warn!(task_id = %d.task_id, attempt = d.attempt, error, "dispatch not confirmed by JetStream; failing the attempt");
        self.fail_attempt(
            &d.workflow_id,
            &d.task_id,
            d.attempt,
            caucus_shared::task::TaskError {
                class: caucus_shared::task::ErrorClass::Transient,
                error_type: caucus_shared::task::coordinator_errors::DISPATCH_FAILED.into(),
                message: format!("the dispatch could not be published: {error}"),
                data_source: None,
            },
        );
    }

    /// Fails `attempt` of a task as if its worker had reported `error`: the
    /// task's retry policy decides between a new attempt and failing it.
    /// A finished task or an older attempt is left alone.
    fn fail_attempt(
        &mut self,
        workflow_id: &str,
        task_id: &str,
        attempt: u32,
        error: caucus_shared::task::TaskError,
    ) {
        let now = self.clock.now();
        let Some(rec) = self.engine.get(workflow_id) else {
            return;
        };
        let key = task_id
            .strip_prefix(&format!("{workflow_id}/"))
            .unwrap_or(task_id);
        let Some(t) = rec.tasks.get(key) else {
            return;
        };
        let ev = TaskEvent {
            schema_version: caucus_shared::task::TASK_SCHEMA_VERSION,
            task_id: task_id.to_string(),
            workflow_id: workflow_id.to_string(),
            stage: t.stage.clone(),
            agent_type: t.agent_type.clone(),
            attempt,
            status: caucus_shared::task::TaskStatus::Failed,
            worker_id: "coordinator".into(),
            output: None,
            error: Some(error),
            message: None,
            started_at: t.started_at,
            at: now,
        };
        if let Some(outcome) = self.engine.apply_event(&ev, now) {
            self.heard.remove(task_id);
            self.dirty.insert(workflow_id.to_string());
            if let Some(c) = self.control.as_mut() {
                c.on_outcome(&ev, &outcome, &self.engine);
            }
        }
    }

    /// Fails (for a retry) every in-flight attempt nobody has reported on
    /// for longer than `silence`: its worker is gone and JetStream did not
    /// bring the dispatch to another one, or its events were lost.
    fn reconcile_silent(&mut self, now: chrono::DateTime<Utc>) {
        let Ok(silence) = chrono::Duration::from_std(self.silence) else {
            return;
        };
        let silent: Vec<String> = self
            .heard
            .iter()
            .filter(|(_, at)| now - **at > silence)
            .map(|(id, _)| id.clone())
            .collect();
        for task_id in silent {
            let Some((wf, key)) = caucus_shared::task::split_task_id(&task_id) else {
                self.heard.remove(&task_id);
                continue;
            };
            let Some((attempt, in_flight)) = self
                .engine
                .get(wf)
                .and_then(|r| r.tasks.get(key))
                .map(|t| (t.attempt, t.state.is_in_flight()))
            else {
                self.heard.remove(&task_id);
                continue;
            };
            if !in_flight {
                self.heard.remove(&task_id);
                continue;
            }
            tracing::warn!(task_id = %task_id, attempt, silent_ms = self.silence.as_millis() as u64, "no word of an in-flight task; failing the attempt for a retry");
            let wf = wf.to_string();
            self.fail_attempt(
                &wf,
                &task_id,
                attempt,
                caucus_shared::task::TaskError {
                    class: caucus_shared::task::ErrorClass::Transient,
                    error_type: caucus_shared::task::coordinator_errors::SILENT.into(),
                    message: format!(
                        "no started or progress event for {} ms (worker lost, or its events were)",
                        self.silence.as_millis()
                    ),
                    data_source: None,
                },
            );
        }
    }

    /// The tenure is over: nothing more is written or acknowledged. Events
    /// applied only in memory are nak'ed so the current leader applies them
    /// now rather than after `ack_wait`.
    async fn abandon(&mut self) {
        self.flush_lazy();
        self.dirty.clear();
        let msgs: Vec<jetstream::Message> =
            self.pending_acks.drain().flat_map(|(_, m)| m).collect();
        if !msgs.is_empty() {
            tracing::warn!(
                events = msgs.len(),
                "not the leader any more: returning unapplied events"
            );
        }
        nak_all(&msgs).await;
    }

    async fn persist(&mut self) {
        if self.dirty.is_empty() && self.pending_acks.is_empty() {
            return;
        }
        if !self.may_act() {
            self.abandon().await;
            return;
        }
        let ids: Vec<String> = self.dirty.drain().collect();
        let epoch = self.epoch();
        let mut retry: HashSet<String> = HashSet::new();
        // What must be stored before the record can be: its large outputs
        // and, for a finished workflow brought back unfinished, its index
        // entry. A workflow whose prerequisites fail waits for the retry.
        let store = &self.store;
        let before = ids.iter().map(|id| {
            let outputs = self.unsaved_outputs.get(id).cloned().unwrap_or_default();
            let finished = self.engine.get(id).is_some_and(|r| r.state.is_terminal());
            let reindex = !finished && self.unindexed.contains(id);
            async move {
                if reindex {
                    store.index(id).await?;
                }
                for (k, body) in outputs {
                    store.put_output(&k, body, finished).await?;
                }
                Ok::<_, StoreError>(())
            }
        });
        for (id, r) in ids.iter().zip(join_all(before).await) {
            match r {
                Ok(()) => {
                    self.unsaved_outputs.remove(id);
                    if self.engine.get(id).is_some_and(|r| !r.state.is_terminal()) {
                        self.unindexed.remove(id);
                    }
                }
                Err(e) => {
                    tracing::warn!(workflow_id = %id, error = %e, "cannot store a workflow's outputs or index entry; will retry");
                    retry.insert(id.clone());
                }
            }
        }
        let mut bodies = Vec::with_capacity(ids.len());
        for id in &ids {
            // A workflow written now carries its lazily recorded starts too.
            if let Some(msgs) = self.lazy.remove(id) {
                self.pending_acks
                    .entry(id.clone())
                    .or_default()
                    .extend(msgs);
            }
            if retry.contains(id) {
                continue;
            }
            let (Some(rec), Some(rev)) = (self.engine.get_mut(id), self.revisions.get(id)) else {
                continue;
            };
            rec.epoch = epoch;
            let finished = rec.state.is_terminal();
            bodies.push((id.clone(), super::store::encode(rec), *rev, finished));
        }
        let writes = bodies
            .into_iter()
            .map(|(id, body, rev, finished)| async move {
                let r = store.update_encoded(&id, body, rev, finished).await;
                (id, r)
            });
        let results = join_all(writes).await;
        let mut conflicts = Vec::new();
        for (id, r) in results {
            match r {
                Ok(rev) => {
                    self.revisions.insert(id, rev);
                }
                Err(StoreError::Conflict(id)) => conflicts.push(id),
                Err(e) => {
                    tracing::warn!(workflow_id = %id, error = %e, "persist failed; will retry");
                    retry.insert(id);
                }
            }
        }
        for id in conflicts {
            if !self.on_conflict(&id).await {
                // Deposed: a newer tenure wrote this workflow.
                self.abandon().await;
                return;
            }
        }
        // Acknowledge what is stored (and events that changed nothing);
        // events of a workflow whose write failed wait for the retry.
        let done: Vec<String> = self
            .pending_acks
            .keys()
            .filter(|id| !retry.contains(*id))
            .cloned()
            .collect();
        let mut acks = Vec::new();
        for id in done {
            acks.extend(self.pending_acks.remove(&id).unwrap_or_default());
        }
        join_all(acks.iter().map(|m| m.ack())).await;
        self.dirty.extend(retry);
    }

    /// Another writer changed `id` since this scheduler read it. A record
    /// stamped with a newer epoch means this tenure is over (`false`). An
    /// older or equal epoch is a deposed leader's last write (it passed its
    /// lease check just before a pause): its record is a valid successor
    /// state, so it is adopted and this scheduler's own events for the
    /// workflow are nak'ed, to be applied again on top of it.
    async fn on_conflict(&mut self, id: &str) -> bool {
        let stored = match self.store.get(id).await {
            Ok(Some(found)) => found,
            Ok(None) => {
                tracing::error!(workflow_id = %id, "revision conflict and the record is gone");
                self.engine.remove(id);
                self.revisions.remove(id);
                nak_all(&self.pending_acks.remove(id).unwrap_or_default()).await;
                return true;
            }
            Err(e) => {
                // Not known which writer won: write nothing more, ack nothing.
                tracing::error!(workflow_id = %id, error = %e, "revision conflict and the record cannot be read; stepping down");
                if let Some(l) = &self.lease {
                    l.step_down("revision conflict on an unreadable record");
                }
                return self.lease.is_none();
            }
        };
        let (rec, rev) = stored;
        if rec.epoch > self.epoch() {
            tracing::error!(workflow_id = %id, stored_epoch = rec.epoch, epoch = self.epoch(), "a newer leader wrote this workflow; stepping down");
            if let Some(l) = &self.lease {
                l.step_down("a newer leader's write found");
            }
            return self.lease.is_none();
        }
        tracing::warn!(workflow_id = %id, stored_epoch = rec.epoch, "revision conflict with an older leader's write: adopting it and re-applying this workflow's events");
        self.revisions.insert(id.to_string(), rev);
        self.engine.insert(rec);
        self.hear_in_flight(id);
        self.dirty.remove(id);
        self.unsaved_outputs.remove(id);
        let mut msgs = self.pending_acks.remove(id).unwrap_or_default();
        msgs.extend(self.lazy.remove(id).unwrap_or_default());
        nak_all(&msgs).await;
        true
    }

    async fn status(&self, f: &StatusFilter) -> Value {
        let states: Vec<WorkflowState> = f
            .states
            .iter()
            .filter_map(|s| WorkflowState::parse(s))
            .collect();
        let wanted = |r: &WorkflowRecord| states.is_empty() || states.contains(&r.state);
        let mut list: Vec<Value> = Vec::new();
        let mut next_cursor: Option<String> = None;
        if f.ids.is_empty() {
            // A page, in (created_at, workflow_id) order, without outputs.
            let limit = f
                .limit
                .unwrap_or(STATUS_DEFAULT_LIMIT)
                .clamp(1, STATUS_MAX_LIMIT);
            let after = f.cursor.as_deref().and_then(parse_status_cursor);
            let mut recs: Vec<&WorkflowRecord> = self
                .engine
                .workflows()
                .filter(|r| wanted(r))
                .filter(|r| match &after {
                    Some((ms, id)) => (r.created_at.timestamp_millis(), &r.workflow_id) > (*ms, id),
                    None => true,
                })
                .collect();
            recs.sort_by(|a, b| {
                (a.created_at.timestamp_millis(), &a.workflow_id)
                    .cmp(&(b.created_at.timestamp_millis(), &b.workflow_id))
            });
            if recs.len() > limit {
                next_cursor = Some(status_cursor(recs[limit - 1]));
                recs.truncate(limit);
            }
            for r in recs {
                list.push(super::views::workflow_json_with(r, f.tasks, false));
            }
        } else {
            for id in &f.ids {
                let stored;
                let r = match self.engine.get(id) {
                    Some(r) => r,
                    None => match self.store.get(id).await {
                        Ok(Some((r, _))) => {
                            stored = r;
                            &stored
                        }
                        _ => continue,
                    },
                };
                if wanted(r) {
                    list.push(super::views::workflow_json_with(r, f.tasks, true));
                }
            }
        }
        let now = self.clock.now();
        let caps = self
            .capacities
            .read()
            .map(|c| c.clone())
            .unwrap_or_default();
        json!({
            "workflows": list,
            "next_cursor": next_cursor,
            "load": self.engine.load(now),
            "capacity": caps,
        })
    }
}

/// Returns events to the stream for redelivery now.
async fn nak_all(msgs: &[jetstream::Message]) {
    join_all(
        msgs.iter()
            .map(|m| m.ack_with(jetstream::AckKind::Nak(None))),
    )
    .await;
}
