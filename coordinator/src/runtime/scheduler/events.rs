//! Applying a batch of task events: each is checked, applied to the
//! engine in memory, and its message kept to be acknowledged once the
//! workflow's record is stored (see `persist`). What an applied event did
//! (an attempt's queue wait, run time and end, a workflow's finish) is
//! recorded in the metrics here, where the states before and after meet.

use std::time::Duration;

use async_nats::jetstream;

use caucus_shared::task::TaskEvent;

use super::Scheduler;
use crate::runtime::metrics::{self, AttemptEnd};
use crate::workflow::{EventOutcome, TaskRecord, TaskRunState, WorkflowRecord, WorkflowState};

/// How long an event ahead of its record waits before it is delivered
/// again.
const EARLY_RETRY: Duration = Duration::from_secs(1);

/// What the metrics need to know of a task before its event is applied.
#[derive(Debug, Clone, Copy)]
pub(super) struct Before {
    workflow: WorkflowState,
    task: TaskRunState,
}

/// The task `ev` names in `rec` (without allocating its key).
fn task_of<'a>(rec: &'a WorkflowRecord, ev: &TaskEvent) -> Option<&'a TaskRecord> {
    let key = ev
        .task_id
        .strip_prefix(rec.workflow_id.as_str())?
        .strip_prefix('/')?;
    rec.tasks.get(key)
}

/// Seconds from `from` to `to`, never negative (the worker's clock may be
/// behind the coordinator's).
fn seconds(from: chrono::DateTime<chrono::Utc>, to: chrono::DateTime<chrono::Utc>) -> f64 {
    (to - from).num_microseconds().unwrap_or(0).max(0) as f64 / 1e6
}

impl Scheduler {
    /// Applies a batch of task events with the messages to ack once
    /// persisted.
    pub(super) async fn apply_events(&mut self, batch: Vec<(TaskEvent, jetstream::Message)>) {
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
            if self
                .engine
                .get(&ev.workflow_id)
                .is_some_and(|r| r.is_ahead(&ev))
                && self.hold_early(&ev, &msg).await
            {
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
            let before = self.before(&ev);
            let outcome = self.engine.apply_event(&ev, now);
            if let (Some(before), Some(o)) = (before, &outcome) {
                self.observe(&ev, before, o);
            }
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
                    c.on_outcome(&ev, &outcome, &self.engine, msg.headers.as_ref());
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

    /// Returns an event that is ahead of its record (see
    /// [`WorkflowRecord::is_ahead`]) to the stream, to come back once the
    /// events before it were redelivered and applied: `true` if it was
    /// returned. They come back within an ack wait, so after twice the
    /// silence period it is given up on (applied as stale, i.e. dropped,
    /// and the task runs again when its dependencies complete).
    async fn hold_early(&self, ev: &TaskEvent, msg: &jetstream::Message) -> bool {
        let delivered = msg.info().map_or(1, |i| i.delivered.max(1)) as u64;
        let waited = EARLY_RETRY.saturating_mul(delivered.min(u32::MAX as u64) as u32);
        if waited > self.silence.saturating_mul(2) {
            tracing::warn!(task_id = %ev.task_id, attempt = ev.attempt, delivered, "an event ahead of its workflow's record never caught up; dropping it");
            return false;
        }
        tracing::debug!(task_id = %ev.task_id, attempt = ev.attempt, delivered, "event ahead of its workflow's record (its dependencies' events are being redelivered); returned for later");
        let _ = msg
            .ack_with(jetstream::AckKind::Nak(Some(EARLY_RETRY)))
            .await;
        true
    }

    /// The workflow's and the task's state before `ev` is applied.
    pub(super) fn before(&self, ev: &TaskEvent) -> Option<Before> {
        let rec = self.engine.get(&ev.workflow_id)?;
        Some(Before {
            workflow: rec.state,
            task: task_of(rec, ev)?.state,
        })
    }

    /// Records what applying `ev` did (it was not ignored): the attempt's
    /// queue wait when it started (or completed without a `started`
    /// first), its run time and end, and the workflow's finish.
    pub(super) fn observe(&mut self, ev: &TaskEvent, before: Before, outcome: &EventOutcome) {
        let Some(rec) = self.engine.get(&ev.workflow_id) else {
            return;
        };
        let state = rec.state;
        if let Some(t) = task_of(rec, ev) {
            let first_word = before.task != TaskRunState::Running;
            match outcome {
                EventOutcome::Started | EventOutcome::Completed { .. } if first_word => {
                    if let (Some(ready), Some(started)) = (t.ready_at, t.started_at) {
                        metrics::dispatch_latency(&t.agent_type, seconds(ready, started));
                    }
                }
                _ => {}
            }
            if let EventOutcome::Completed { .. } = outcome {
                if let (Some(started), Some(finished)) = (t.started_at, t.finished_at) {
                    metrics::task_duration(&t.agent_type, seconds(started, finished));
                }
            }
            if let Some(end) = AttemptEnd::of(outcome) {
                metrics::attempt_ended(&t.agent_type, end);
            }
        }
        if state.is_terminal() && !before.workflow.is_terminal() {
            metrics::workflow_finished(state);
            self.finished_seen.insert(ev.workflow_id.clone());
        }
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
}
