//! One slot of one agent type: lease → pull → run → report → ack.
//!
//! The lease is kept by a [`LeaseKeeper`]: while its renewal fails the slot
//! pulls nothing (a task fetched meanwhile is handed back at once), and once
//! the lease is lost the running handler is cancelled (an `exec:` command's
//! process group is killed, an `http:` request dropped) and the task's
//! message is nak'd for redelivery, before the lease can have expired in
//! Redis. Nothing is reported for the cancelled run, so the redelivered run's
//! completion is the only one, and no task runs without a live lease.
//!
//! An attempt still running after `worker.started_delay` publishes its
//! `started` event then, while it runs ([`super::started`]); one that ends
//! sooner publishes none (its terminal event carries `started_at`). With a
//! zero delay `started` is stored before the handler runs.
//!
//! A completed run publishes, in order: its findings, its other messages,
//! the confirmations it owes the senders of the findings in its inputs (see
//! [`crate::confirmations`]), then the `completed` event, then acks. A crash
//! before the event re-runs the task; its messages and confirmations carry
//! the same `Nats-Msg-Id`s, so the stream keeps one of each. A failed run
//! confirms nothing (the coordinator alerts when an answer is overdue).
//!
//! Each attempt runs inside its `task` span ([`super::task_span`]), a child
//! of the coordinator's `dispatch` span: every event, finding, message and
//! confirmation it publishes carries that span's `traceparent`.

use std::time::Duration;

use async_nats::jetstream::{self, AckKind};
use tracing::Instrument;

use caucus_shared::nats::dlq::{decode_or_dead_letter, Dlq};
use caucus_shared::redis::{Acquired, CapacitySemaphore};
use caucus_shared::task::{TaskDispatch, TaskEvent, TaskStatus};

use super::lease::LeaseKeeper;
use super::pull::Puller;
use super::started;
use super::task_span::task_span;
use super::{Reporter, WorkerDeps};
use crate::metrics::{instruments, Outcome};

/// Backoff while capacity is full (doubles up to the max).
const ACQUIRE_BACKOFF_MIN: Duration = Duration::from_millis(5);
const ACQUIRE_BACKOFF_MAX: Duration = Duration::from_millis(200);
/// Warnings about leases that cannot be taken repeat at most this often.
const LEASE_WARN_EVERY: Duration = Duration::from_secs(30);
/// Attempts to publish one confirmation, and the pause between them.
const CONFIRM_TRIES: u32 = 3;
const CONFIRM_RETRY: Duration = Duration::from_millis(200);

/// A task between its start and its result.
struct InFlight<'a> {
    msg: &'a jetstream::Message,
    task: &'a TaskDispatch,
    started_at: chrono::DateTime<chrono::Utc>,
}

pub(super) struct Slot {
    pub(super) deps: WorkerDeps,
    pub(super) agent_type: String,
    pub(super) index: u32,
    pub(super) sem: CapacitySemaphore,
    /// The agent type's shared pulls.
    pub(super) puller: Puller,
    pub(super) dlq: Dlq,
    pub(super) reporter: Reporter,
    /// The regime from broadcasts; `None` for handlers that ignore inputs.
    pub(super) broadcasts: Option<crate::messages::Broadcasts>,
}

impl Slot {
    fn holder(&self) -> String {
        format!("{}/{}", self.deps.worker_id, self.index)
    }

    pub(super) async fn run(self) {
        let shutdown = self.deps.shutdown.clone();
        let ttl = self.deps.config.worker.lease_ttl;
        // A Redis that does not answer (stopped, partitioned) must not hang
        // the slot: every call is bounded like a renewal.
        let call_timeout = (ttl / 3).max(Duration::from_millis(10));
        let mut backoff = ACQUIRE_BACKOFF_MIN;
        let mut recovering_logged = false;
        // While Redis is away only slot 0 of each agent type warns, at most
        // once per LEASE_WARN_EVERY (not on every retry of every slot).
        let mut last_warn: Option<tokio::time::Instant> = None;
        let warn_now = |last_warn: &mut Option<tokio::time::Instant>| {
            let due = self.index == 0 && last_warn.is_none_or(|t| t.elapsed() >= LEASE_WARN_EVERY);
            if due {
                *last_warn = Some(tokio::time::Instant::now());
            }
            due
        };
        while !shutdown.is_cancelled() {
            let asked_at = tokio::time::Instant::now();
            let acquired =
                tokio::time::timeout(call_timeout, self.sem.acquire(&self.holder(), ttl)).await;
            let pause = match acquired {
                Ok(Ok(Acquired::Granted(l))) => {
                    backoff = ACQUIRE_BACKOFF_MIN;
                    recovering_logged = false;
                    if last_warn.take().is_some() {
                        tracing::info!(agent_type = %self.agent_type, "leases can be taken again");
                    }
                    let keeper = LeaseKeeper::start(
                        &self.deps.tasks,
                        self.sem.clone(),
                        l.clone(),
                        ttl,
                        asked_at,
                    );
                    self.hold(&keeper).await;
                    let lease = keeper.stop().await.unwrap_or(l);
                    match tokio::time::timeout(call_timeout, self.sem.release(&lease)).await {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => {
                            tracing::warn!(error = %e, "lease release failed; it lapses after its ttl")
                        }
                        Err(_) => {
                            tracing::warn!("lease release timed out; it lapses after its ttl")
                        }
                    }
                    continue;
                }
                Ok(Ok(Acquired::Full)) => {
                    let p = backoff;
                    backoff = (backoff * 2).min(ACQUIRE_BACKOFF_MAX);
                    p
                }
                Ok(Ok(Acquired::Recovering { remaining_ms })) => {
                    if !recovering_logged {
                        tracing::info!(agent_type = %self.agent_type, remaining_ms,
                            "Redis lost its data: no new lease until running tasks re-registered theirs");
                        recovering_logged = true;
                    }
                    Duration::from_millis(remaining_ms)
                        .clamp(ACQUIRE_BACKOFF_MIN, ACQUIRE_BACKOFF_MAX)
                }
                Ok(Err(e)) => {
                    if warn_now(&mut last_warn) {
                        tracing::warn!(agent_type = %self.agent_type, error = %e, "cannot take a lease; retrying");
                    }
                    ACQUIRE_BACKOFF_MAX
                }
                Err(_) => {
                    if warn_now(&mut last_warn) {
                        tracing::warn!(agent_type = %self.agent_type, "cannot take a lease: Redis did not answer; retrying");
                    }
                    ACQUIRE_BACKOFF_MIN
                }
            };
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Works while `keeper` holds the lease; returns when idle, shut down or
    /// the lease was lost.
    async fn hold(&self, keeper: &LeaseKeeper) {
        let shutdown = &self.deps.shutdown;
        let cfg = &self.deps.config.worker;
        loop {
            if shutdown.is_cancelled() {
                return;
            }
            // Renewal failing: take nothing until it succeeds again.
            if !keeper.view().usable && !keeper.usable(shutdown).await {
                return;
            }
            let pulled = tokio::select! {
                // Stop waiting for work at once on shutdown.
                _ = shutdown.cancelled() => return,
                m = self.puller.next(cfg.fetch_wait) => m,
            };
            let msg = match pulled {
                Ok(Some(m)) => m,
                // Idle: give the capacity back so busier workers can use it.
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(agent_type = %self.agent_type, error = %e, "fetch failed");
                    return;
                }
            };
            if !keeper.view().usable {
                // The lease went bad during the fetch: hand the task back
                // for a worker whose lease is sound.
                let _ = msg.ack_with(AckKind::Nak(None)).await;
                continue;
            }
            let max = self.deps.config.max_body_bytes;
            let task =
                decode_or_dead_letter(&self.dlq, &msg, max, |b, _| TaskDispatch::decode(b, max))
                    .await;
            if let Some(mut task) = task {
                // Broadcasts bypass the queue: whatever is on caucus.msg.all
                // now is applied before this task starts.
                if let Some(b) = &self.broadcasts {
                    b.catch_up().await;
                    if !task.inputs.contains_key("regime") {
                        if let Some(regime) = b.regime_input() {
                            task.inputs.insert("regime".into(), regime);
                        }
                    }
                }
                let span = task_span(&task, &self.deps.worker_id, msg.headers.as_ref());
                let _busy = instruments().busy(&self.agent_type);
                let outcome = self.execute(&msg, task, keeper).instrument(span).await;
                instruments().task_ended(&self.agent_type, outcome);
            }
        }
    }

    /// Runs one attempt and reports it; returns how it ended.
    async fn execute(
        &self,
        msg: &jetstream::Message,
        task: TaskDispatch,
        keeper: &LeaseKeeper,
    ) -> Outcome {
        let started_at = self.deps.clock.now();
        let delay = self.deps.config.worker.started_delay;
        let flight = InFlight {
            msg,
            task: &task,
            started_at,
        };
        // On the heap: held across the select and join of the delayed
        // announcement, it made a debug build's slot overflow its stack.
        let attempt = Box::pin(self.attempt(&flight, keeper));
        let ended = if delay.is_zero() {
            // Stored before the handler runs; if it cannot be, nobody
            // would hear of the attempt until it ends: hand it back.
            let started = self.reporter.event(&task, TaskStatus::Started, started_at);
            if let Err(e) = self.reporter.publish(&started).await {
                tracing::warn!(task_id = %task.task_id, error = %e, "cannot report start; task returns to the queue");
                let _ = msg
                    .ack_with(AckKind::Nak(Some(Duration::from_millis(500))))
                    .await;
                return Outcome::Abandoned;
            }
            attempt.await
        } else {
            // Announced only if still running after the delay; the
            // terminal event carries started_at and stands for both.
            let announce = async {
                let started = self.reporter.event(&task, TaskStatus::Started, started_at);
                if let Err(e) = self.reporter.publish(&started).await {
                    // Already running: the progress events and the
                    // terminal event tell the coordinator instead.
                    tracing::warn!(task_id = %task.task_id, error = %e, "start not reported");
                }
            };
            started::announced_after(delay, attempt, announce).await
        };
        let Some((ev, outcome)) = ended else {
            // The run was dropped: an exec: command's processes are killed,
            // an http: request dropped. Nothing is reported: the redelivered
            // run reports, so no completion is applied twice.
            tracing::warn!(task_id = %task.task_id,
                "capacity lease lost: task cancelled and returned to the queue");
            let _ = msg.ack_with(AckKind::Nak(None)).await;
            return Outcome::Abandoned;
        };
        // Report first, ack second: a crash in between re-runs the task,
        // and the coordinator records only the first completion.
        loop {
            match self.reporter.publish(&ev).await {
                Ok(()) => break,
                Err(e) => {
                    tracing::warn!(task_id = %task.task_id, error = %e, "cannot report result; retrying");
                    let _ = msg.ack_with(AckKind::Progress).await;
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        if let Err(e) = msg.ack().await {
            tracing::warn!(task_id = %task.task_id, error = %e, "ack failed; a redelivery will be ignored");
        }
        outcome
    }

    /// Runs the handler and publishes what a completed run produced (its
    /// findings, messages and confirmations); returns the terminal event
    /// to report, or `None` when the lease was lost and the run cancelled.
    async fn attempt(
        &self,
        flight: &InFlight<'_>,
        keeper: &LeaseKeeper,
    ) -> Option<(TaskEvent, Outcome)> {
        let task = flight.task;
        // Keep the message alive while the handler runs (the keeper renews
        // the lease); stop the handler if the lease is lost.
        let result = self
            .kept_alive_until(flight, keeper.lost(), self.run_paced(task))
            .await?;
        let ev = match result {
            Ok(out) => {
                // Findings wait while the agent's debate sync lock is held
                // (up to worker.sync_lock_wait): keep alive meanwhile too.
                if !out.findings.is_empty() {
                    let findings = async {
                        for (i, f) in out.findings.into_iter().enumerate() {
                            if let Err(e) = self.reporter.finding(task, i, f.content).await {
                                tracing::warn!(task_id = %task.task_id, error = %e, "finding not published");
                            }
                        }
                    };
                    self.kept_alive(flight, findings).await;
                }
                for m in out.messages {
                    if let Err(e) = self.reporter.message(&m).await {
                        tracing::warn!(task_id = %task.task_id, error = %e, "message not published");
                    }
                }
                // Confirmations go out before the completion: a crash in
                // between re-runs the task, whose confirmations carry the
                // same Nats-Msg-Id and are de-duplicated by the stream.
                let owed = crate::confirmations::confirmations(task, &out.answers);
                if !owed.is_empty() {
                    self.kept_alive(flight, self.confirm(task, owed)).await;
                }
                let mut ev = self
                    .reporter
                    .event(task, TaskStatus::Completed, flight.started_at);
                ev.output = Some(out.output);
                (ev, Outcome::Completed)
            }
            Err(err) => {
                tracing::info!(task_id = %task.task_id, error_type = %err.error_type, "task failed");
                (
                    self.reporter.failed(task, flight.started_at, err),
                    Outcome::Failed,
                )
            }
        };
        Some(ev)
    }

    /// Publishes the confirmations a completed task owes, each tried up to
    /// [`CONFIRM_TRIES`] times; one that still fails is logged and dropped
    /// (its sender's coordinator alerts when the answer is overdue), so a
    /// NATS hiccup never holds up the completion.
    async fn confirm(
        &self,
        task: &TaskDispatch,
        owed: Vec<crate::confirmations::OutgoingConfirmation>,
    ) {
        for c in owed {
            let mut tries = 0;
            loop {
                tries += 1;
                match self.reporter.confirmation(&c).await {
                    Ok(()) => {
                        tracing::debug!(task_id = %task.task_id, msg_id = %c.msg_id, to = %c.to_agent, "finding confirmed");
                        break;
                    }
                    Err(e) if tries < CONFIRM_TRIES => {
                        tracing::debug!(task_id = %task.task_id, msg_id = %c.msg_id, error = %e, "confirmation not stored; retrying");
                        tokio::time::sleep(CONFIRM_RETRY).await;
                    }
                    Err(e) => {
                        tracing::warn!(task_id = %task.task_id, msg_id = %c.msg_id, to = %c.to_agent, error = %e, "confirmation not published");
                        break;
                    }
                }
            }
        }
    }

    /// Runs `work` while keeping the task alive (see [`Slot::beat`]; the
    /// lease is renewed by the slot's keeper meanwhile).
    async fn kept_alive<T>(
        &self,
        flight: &InFlight<'_>,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        let never = tokio_util::sync::CancellationToken::new();
        match self.kept_alive_until(flight, &never, work).await {
            Some(r) => r,
            None => unreachable!("a token nobody cancels"),
        }
    }

    /// [`Slot::kept_alive`], but `work` is dropped (cancelled) and `None`
    /// returned once `stop` fires, unless it finished first.
    async fn kept_alive_until<T>(
        &self,
        flight: &InFlight<'_>,
        stop: &tokio_util::sync::CancellationToken,
        work: impl std::future::Future<Output = T>,
    ) -> Option<T> {
        let every = (self.deps.config.worker.ack_wait / 3).max(Duration::from_millis(50));
        tokio::pin!(work);
        loop {
            tokio::select! {
                biased;
                r = &mut work => break Some(r),
                _ = stop.cancelled() => break None,
                _ = tokio::time::sleep(every) => self.beat(flight).await,
            }
        }
    }

    /// Says the task is still running, every third of `ack_wait`: an
    /// in-progress ack keeps JetStream from redelivering the message, and a
    /// `progress` event keeps the coordinator from failing the attempt as
    /// silent. The event goes out on its own task, so a slow NATS never
    /// delays noticing a lost lease.
    async fn beat(&self, flight: &InFlight<'_>) {
        let _ = flight.msg.ack_with(AckKind::Progress).await;
        let ev = self
            .reporter
            .event(flight.task, TaskStatus::Progress, flight.started_at);
        let reporter = self.reporter.clone();
        // In the task's span, so the event carries its trace context.
        let publish = async move {
            if let Err(e) = reporter.publish(&ev).await {
                tracing::debug!(task_id = %ev.task_id, error = %e, "progress event not published");
            }
        };
        self.deps
            .tasks
            .spawn_named("progress", publish.instrument(tracing::Span::current()));
    }

    /// Runs the handler; with `worker.pace` the task takes at least its
    /// expected duration (the demo's time units are real wall time).
    async fn run_paced(
        &self,
        task: &TaskDispatch,
    ) -> Result<crate::handler::HandlerOutput, caucus_shared::task::TaskError> {
        let t0 = tokio::time::Instant::now();
        let r = self.deps.handler.run(task).await;
        instruments().handler_ran(
            &self.agent_type,
            self.deps.handler.spec().kind(),
            t0.elapsed(),
        );
        if self.deps.config.worker.pace && task.expected_ms > 0 {
            tokio::time::sleep_until(t0 + Duration::from_millis(task.expected_ms)).await;
        }
        r
    }
}
