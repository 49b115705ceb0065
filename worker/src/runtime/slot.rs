//! One slot of one agent type: lease → pull → run → report → ack.

use std::time::Duration;

use async_nats::jetstream::{self, consumer::PullConsumer, AckKind};
use futures::StreamExt;
use tracing::Instrument;

use caucus_shared::nats::dlq::{decode_or_dead_letter, Dlq};
use caucus_shared::nats::trace;
use caucus_shared::redis::{CapacitySemaphore, Lease};
use caucus_shared::task::{TaskDispatch, TaskStatus};

use super::{Reporter, WorkerDeps};

/// Backoff while capacity is full (doubles up to the max).
const ACQUIRE_BACKOFF_MIN: Duration = Duration::from_millis(5);
const ACQUIRE_BACKOFF_MAX: Duration = Duration::from_millis(200);

pub(super) struct Slot {
    pub(super) deps: WorkerDeps,
    pub(super) agent_type: String,
    pub(super) index: u32,
    pub(super) sem: CapacitySemaphore,
    pub(super) consumer: PullConsumer,
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
        let mut backoff = ACQUIRE_BACKOFF_MIN;
        while !shutdown.is_cancelled() {
            let lease = match self.sem.try_acquire(&self.holder(), ttl).await {
                Ok(Some(l)) => {
                    backoff = ACQUIRE_BACKOFF_MIN;
                    l
                }
                Ok(None) => {
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(ACQUIRE_BACKOFF_MAX);
                    continue;
                }
                Err(e) => {
                    tracing::warn!(agent_type = %self.agent_type, error = %e, "cannot take a lease");
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = tokio::time::sleep(ACQUIRE_BACKOFF_MAX) => {}
                    }
                    continue;
                }
            };
            self.hold(&lease).await;
            if let Err(e) = self.sem.release(&lease).await {
                tracing::warn!(error = %e, "lease release failed; it lapses after its ttl");
            }
        }
    }

    /// Works while holding `lease`; returns when idle, shut down or the
    /// lease was lost.
    async fn hold(&self, lease: &Lease) {
        let shutdown = &self.deps.shutdown;
        let cfg = &self.deps.config.worker;
        // The lease was taken (or last renewed) at this instant.
        let mut renewed = tokio::time::Instant::now();
        loop {
            if shutdown.is_cancelled() {
                return;
            }
            let fetched = self
                .consumer
                .fetch()
                .max_messages(1)
                .expires(cfg.fetch_wait)
                .messages()
                .await;
            let mut batch = match fetched {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(agent_type = %self.agent_type, error = %e, "fetch failed");
                    return;
                }
            };
            let msg = tokio::select! {
                // Stop waiting for work at once on shutdown.
                _ = shutdown.cancelled() => return,
                m = batch.next() => m,
            };
            let Some(msg) = msg else {
                // Idle: give the capacity back so busier workers can use it.
                return;
            };
            let msg = match msg {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(error = %e, "task message error");
                    return;
                }
            };
            let max = self.deps.config.max_body_bytes;
            let task = decode_or_dead_letter(&self.dlq, &msg, max, |b, _| {
                serde_json::from_slice::<TaskDispatch>(b)
            })
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
                let span = trace::consumer_span(&msg.subject, msg.headers.as_ref());
                self.execute(&msg, task, lease).instrument(span).await;
            }
            // Renewing after every task cost a Redis script call per task
            // (a tenth of the CPU of a no-op task, docs/BENCHMARKS.md). Until
            // the next check the lease ages by at most one fetch wait plus
            // one keep-alive period (ttl/3; longer tasks renew it while they
            // run), so skipping while younger than ttl/3 − fetch_wait keeps
            // it within 2/3 of its TTL.
            if renewed.elapsed() < (cfg.lease_ttl / 3).saturating_sub(cfg.fetch_wait) {
                continue;
            }
            match self.sem.renew(lease, cfg.lease_ttl).await {
                Ok(true) => renewed = tokio::time::Instant::now(),
                Ok(false) => {
                    tracing::warn!(agent_type = %self.agent_type, "lease was reclaimed; taking a new one");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "lease renew failed");
                    return;
                }
            }
        }
    }

    async fn execute(&self, msg: &jetstream::Message, task: TaskDispatch, lease: &Lease) {
        let started_at = self.deps.clock.now();
        let started = self.reporter.event(&task, TaskStatus::Started, started_at);
        if let Err(e) = self.reporter.publish(&started).await {
            tracing::warn!(task_id = %task.task_id, error = %e, "cannot report start; task returns to the queue");
            let _ = msg
                .ack_with(AckKind::Nak(Some(Duration::from_millis(500))))
                .await;
            return;
        }
        // Keep the message and the lease alive while the handler runs.
        let result = self.kept_alive(msg, lease, self.run_paced(&task)).await;
        let ev = match result {
            Ok(out) => {
                // Findings wait while the agent's debate sync lock is held
                // (up to worker.sync_lock_wait): keep alive meanwhile too.
                if !out.findings.is_empty() {
                    let findings = async {
                        for (i, f) in out.findings.into_iter().enumerate() {
                            if let Err(e) = self.reporter.finding(&task, i, f.content).await {
                                tracing::warn!(task_id = %task.task_id, error = %e, "finding not published");
                            }
                        }
                    };
                    self.kept_alive(msg, lease, findings).await;
                }
                for m in out.messages {
                    if let Err(e) = self.reporter.message(&m).await {
                        tracing::warn!(task_id = %task.task_id, error = %e, "message not published");
                    }
                }
                let mut ev = self
                    .reporter
                    .event(&task, TaskStatus::Completed, started_at);
                ev.output = Some(out.output);
                ev
            }
            Err(err) => {
                tracing::info!(task_id = %task.task_id, error_type = %err.error_type, "task failed");
                self.reporter.failed(&task, started_at, err)
            }
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
    }

    /// Runs `work` while progress-acking `msg` and renewing `lease` every
    /// third of the shorter of their periods.
    async fn kept_alive<T>(
        &self,
        msg: &jetstream::Message,
        lease: &Lease,
        work: impl std::future::Future<Output = T>,
    ) -> T {
        let cfg = &self.deps.config.worker;
        let keepalive = (cfg.ack_wait / 3)
            .min(cfg.lease_ttl / 3)
            .max(Duration::from_millis(50));
        tokio::pin!(work);
        loop {
            tokio::select! {
                r = &mut work => break r,
                _ = tokio::time::sleep(keepalive) => {
                    let _ = msg.ack_with(AckKind::Progress).await;
                    let _ = self.sem.renew(lease, cfg.lease_ttl).await;
                }
            }
        }
    }

    /// Runs the handler; with `worker.pace` the task takes at least its
    /// expected duration (the demo's time units are real wall time).
    async fn run_paced(
        &self,
        task: &TaskDispatch,
    ) -> Result<crate::handler::HandlerOutput, caucus_shared::task::TaskError> {
        let t0 = tokio::time::Instant::now();
        let r = self.deps.handler.run(task).await;
        if self.deps.config.worker.pace && task.expected_ms > 0 {
            tokio::time::sleep_until(t0 + Duration::from_millis(task.expected_ms)).await;
        }
        r
    }
}
