//! The PauseManager: what happens around a pause besides the state change
//! itself (which is the pure [`crate::workflow`] state machine).
//!
//! - A workflow that reached PAUSED gets its checkpoint stored in KV
//!   `checkpoints`, then `pause_complete` on `caucus.control.pause_complete`
//!   and an alert card; only then is `checkpoint_id` set on its record, so
//!   a coordinator that dies in between redoes it (same `Nats-Msg-Id`s).
//! - Reminders at the configured delays after the pause (3/7/14/30 days by
//!   default), each once: the indices sent are stored on the record and the
//!   alert's `Nats-Msg-Id` is fixed per workflow, pause and reminder.
//! - Every classified task failure becomes an `agent_failure_event` on
//!   `caucus.failures.<agent_type>` (`Nats-Msg-Id` `failure:<task_id>@<attempt>`);
//!   tier 3 also raises a critical alert.

use std::collections::{BTreeSet, HashSet, VecDeque};
use std::time::Duration;

use async_nats::jetstream;
use chrono::{DateTime, Utc};
use serde_json::json;

use caucus_shared::envelope::Envelope;
use caucus_shared::messages::{AgentFailureEvent, PauseComplete};
use caucus_shared::subjects::Subjects;
use caucus_shared::task::{TaskEvent, TaskStatus};

use super::checkpoints::CheckpointStore;
use super::publish::{alert, publish, publish_in, FROM};
use crate::engine::Engine;
use crate::workflow::{Checkpoint, EventOutcome, RetryDecision, Tier, WorkflowState};

/// The alert cards' action that resumes the workflow.
const ACTION_RESUME: &str = "resume";
/// The alert cards' action that resumes the whole batch.
const ACTION_RESUME_ALL: &str = "resume_all";

/// Why a pause could not be finished yet (it is retried on the next flush).
#[derive(Debug, thiserror::Error)]
enum CompletePauseError {
    /// The checkpoint was not stored.
    #[error("checkpoint not stored: {0}")]
    Checkpoint(String),
    /// The `pause_complete` envelope could not be built.
    #[error("cannot build pause_complete: {0}")]
    Envelope(#[source] caucus_shared::envelope::DecodeError),
    /// `pause_complete` or the alert card was not published.
    #[error("not published: {0}")]
    Publish(String),
}

/// Outgoing messages kept for a retry when a publish fails, at most.
const MAX_OUTBOX: usize = 50_000;

/// Reminders due now: indices not sent yet whose delay has passed.
pub fn due_reminders(
    paused_at: DateTime<Utc>,
    sent: &[usize],
    delays: &[Duration],
    now: DateTime<Utc>,
) -> Vec<usize> {
    delays
        .iter()
        .enumerate()
        .filter(|(i, _)| !sent.contains(i))
        .filter(|(_, d)| chrono::Duration::from_std(**d).is_ok_and(|d| paused_at + d <= now))
        .map(|(i, _)| i)
        .collect()
}

struct Outgoing {
    subject: String,
    env: Envelope,
    msg_id: String,
    /// The trace it belongs in (a failure event: the failed task's span,
    /// so the correlator can link it), else the flushing span's.
    trace: Option<opentelemetry::Context>,
}

/// Checkpoints, pause notifications, reminders and failure events.
pub struct PauseManager {
    js: jetstream::Context,
    subjects: Subjects,
    checkpoints: CheckpointStore,
    reminders: Vec<Duration>,
    escalate_from: usize,
    outbox: VecDeque<Outgoing>,
    paused: BTreeSet<String>,
}

impl PauseManager {
    /// A manager publishing with `js`.
    pub fn new(
        js: jetstream::Context,
        subjects: Subjects,
        checkpoints: CheckpointStore,
        reminders: Vec<Duration>,
        escalate_from: usize,
    ) -> Self {
        PauseManager {
            js,
            subjects,
            checkpoints,
            reminders,
            escalate_from,
            outbox: VecDeque::new(),
            paused: BTreeSet::new(),
        }
    }

    /// The checkpoint store.
    pub fn checkpoints(&self) -> &CheckpointStore {
        &self.checkpoints
    }

    /// Picks up the paused workflows of a freshly loaded engine.
    pub fn load(&mut self, engine: &Engine) {
        for r in engine.workflows() {
            if r.state == WorkflowState::Paused {
                self.paused.insert(r.workflow_id.clone());
            }
        }
    }

    /// Stops reminding about `id` (resumed).
    pub fn forget(&mut self, id: &str) {
        self.paused.remove(id);
    }

    fn push(&mut self, subject: String, env: Envelope, msg_id: String) {
        self.push_in(subject, env, msg_id, None);
    }

    fn push_in(
        &mut self,
        subject: String,
        env: Envelope,
        msg_id: String,
        trace: Option<opentelemetry::Context>,
    ) {
        if self.outbox.len() >= MAX_OUTBOX {
            tracing::error!("outbox full; dropping the oldest unpublished message");
            self.outbox.pop_front();
        }
        self.outbox.push_back(Outgoing {
            subject,
            env,
            msg_id,
            trace,
        });
    }

    /// Queues the failure event (and a tier-3 alert) for an applied event;
    /// `headers` are the event message's (its trace context is the failed
    /// task's span).
    pub fn on_outcome(
        &mut self,
        ev: &TaskEvent,
        outcome: &EventOutcome,
        engine: &Engine,
        headers: Option<&async_nats::HeaderMap>,
    ) {
        let EventOutcome::Failed(decision) = outcome else {
            return;
        };
        if ev.status != TaskStatus::Failed {
            return;
        }
        let Some(rec) = engine.get(&ev.workflow_id) else {
            return;
        };
        let err = ev.error.clone().unwrap_or_default();
        let error_type = if err.error_type.trim().is_empty() {
            "unknown".to_string()
        } else {
            err.error_type.clone()
        };
        let content = AgentFailureEvent {
            stock_ticker: rec.item.clone(),
            agent_type: ev.agent_type.clone(),
            error_type,
            error_message: err.message.clone(),
            data_source: err.data_source.clone(),
            timestamp: Some(ev.at),
            workflow_id: Some(ev.workflow_id.clone()),
            task_id: Some(ev.task_id.clone()),
        };
        let msg_id = format!("failure:{}@{}", ev.task_id, ev.attempt);
        // A lost worker or event is no agent failure: reported, the
        // correlator would take a burst of them (say NATS restarting) for
        // an incident and pause batches for a person.
        if !caucus_shared::task::coordinator_errors::is_infrastructure(&err.error_type) {
            match Envelope::with_content(FROM, &content) {
                Ok(env) => self.push_in(
                    self.subjects.failures(&ev.agent_type),
                    env.with_id(msg_id.clone()).with_timestamp(ev.at),
                    msg_id,
                    headers.map(caucus_shared::nats::trace::extract),
                ),
                Err(e) => {
                    tracing::error!(task_id = %ev.task_id, error = %e, "cannot build failure event")
                }
            }
        }
        if let RetryDecision::Halt {
            tier: Tier::Escalate,
            rule,
        } = decision
        {
            let env = alert(
                "workflow_escalated",
                "critical",
                json!({
                    "workflow_id": rec.workflow_id,
                    "item": rec.item,
                    "task_id": ev.task_id,
                    "tier": 3,
                    "rule": rule,
                    "error_type": err.error_type,
                    "error_message": err.message,
                    "reason": rec.failure,
                    "actions": [ACTION_RESUME],
                }),
            );
            self.push(
                self.subjects.alerts("critical"),
                env,
                format!("alert:escalated:{}@{}", ev.task_id, ev.attempt),
            );
        }
    }

    /// Queues an alert card.
    pub fn queue_alert(&mut self, severity: &str, env: Envelope, msg_id: String) {
        let subject = self.subjects.alerts(severity);
        self.push(subject, env, msg_id);
    }

    /// Publishes queued messages and stores the checkpoints of newly paused
    /// workflows; marks changed records dirty.
    pub async fn flush(
        &mut self,
        engine: &mut Engine,
        dirty: &mut HashSet<String>,
        now: DateTime<Utc>,
    ) {
        for id in engine.take_newly_paused() {
            if let Err(e) = self.complete_pause(engine, &id, now).await {
                tracing::warn!(workflow_id = %id, error = %e, "cannot finish the pause yet; will retry");
                engine.mark_paused_pending(&id);
            } else {
                dirty.insert(id);
            }
        }
        while let Some(o) = self.outbox.pop_front() {
            let sent = match &o.trace {
                Some(cx) => publish_in(&self.js, o.subject.clone(), &o.env, &o.msg_id, cx).await,
                None => publish(&self.js, o.subject.clone(), &o.env, &o.msg_id).await,
            };
            if let Err(e) = sent {
                tracing::warn!(error = %e, "publish failed; will retry");
                self.outbox.push_front(o);
                break;
            }
        }
    }

    async fn complete_pause(
        &mut self,
        engine: &mut Engine,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<(), CompletePauseError> {
        let Some(rec) = engine.get(id) else {
            return Ok(());
        };
        let Some(p) = rec.pause.as_ref() else {
            return Ok(());
        };
        if rec.state != WorkflowState::Paused || p.checkpoint_id.is_some() {
            return Ok(());
        }
        let cp = Checkpoint::of(rec, now);
        self.checkpoints
            .put(&cp)
            .await
            .map_err(|e| CompletePauseError::Checkpoint(e.to_string()))?;
        let paused_at = p.paused_at.unwrap_or(now);
        let content = PauseComplete {
            stock_id: rec.item.clone(),
            paused_at,
            resume_dependencies: p.failed_tasks.clone(),
            checkpoint_id: Some(cp.checkpoint_id.clone()),
            workflow_id: Some(rec.workflow_id.clone()),
        };
        let mut env = Envelope::with_content(FROM, &content)
            .map_err(CompletePauseError::Envelope)?
            .with_id(format!("pause_complete:{}", cp.checkpoint_id));
        if let Some(c) = p.correlation_id.clone().or_else(|| p.batch_id.clone()) {
            env = env.with_correlation_id(c);
        }
        publish(
            &self.js,
            self.subjects.control("pause_complete"),
            &env,
            &format!("pause_complete:{}", cp.checkpoint_id),
        )
        .await
        .map_err(|e| CompletePauseError::Publish(e.to_string()))?;
        let (event, severity) = if p.escalated {
            ("workflow_escalated", "critical")
        } else {
            ("workflow_paused", "warning")
        };
        let card = alert(
            event,
            severity,
            json!({
                "workflow_id": rec.workflow_id,
                "item": rec.item,
                "reason": p.reason,
                "trigger_source": p.trigger_source,
                "tier": p.tier,
                "checkpoint_id": cp.checkpoint_id,
                "batch_id": p.batch_id,
                "correlation_id": p.correlation_id,
                "paused_at": paused_at,
                "actions": if p.batch_id.is_some() { vec![ACTION_RESUME, ACTION_RESUME_ALL] } else { vec![ACTION_RESUME] },
            }),
        );
        publish(
            &self.js,
            self.subjects.alerts(severity),
            &card,
            &format!("alert:paused:{}", cp.checkpoint_id),
        )
        .await
        .map_err(|e| CompletePauseError::Publish(e.to_string()))?;
        if let Some(p) = engine.get_mut(id).and_then(|r| r.pause.as_mut()) {
            p.checkpoint_id = Some(cp.checkpoint_id.clone());
        }
        self.paused.insert(id.to_string());
        tracing::info!(workflow_id = %id, checkpoint_id = %cp.checkpoint_id, "paused with checkpoint");
        Ok(())
    }

    /// Sends the reminders that are due, each once.
    pub async fn remind(
        &mut self,
        engine: &mut Engine,
        dirty: &mut HashSet<String>,
        now: DateTime<Utc>,
    ) {
        let ids: Vec<String> = self.paused.iter().cloned().collect();
        for id in ids {
            let Some(rec) = engine.get(&id) else {
                self.paused.remove(&id);
                continue;
            };
            let Some(p) = rec
                .pause
                .as_ref()
                .filter(|_| rec.state == WorkflowState::Paused)
            else {
                self.paused.remove(&id);
                continue;
            };
            let Some(paused_at) = p.paused_at else {
                continue;
            };
            let due = due_reminders(paused_at, &p.reminders_sent, &self.reminders, now);
            let mut sent = Vec::new();
            for i in due {
                let escalation = p.escalated || i >= self.escalate_from;
                let (event, severity) = if escalation {
                    ("pause_escalation", "critical")
                } else {
                    ("pause_reminder", "warning")
                };
                let card = alert(
                    event,
                    severity,
                    json!({
                        "workflow_id": rec.workflow_id,
                        "item": rec.item,
                        "reason": p.reason,
                        "reminder": i + 1,
                        "of": self.reminders.len(),
                        "paused_at": paused_at,
                        "paused_for_ms": self.reminders[i].as_millis() as u64,
                        "escalated": p.escalated,
                        "batch_id": p.batch_id,
                        "actions": [ACTION_RESUME],
                    }),
                );
                let msg_id = format!("alert:reminder:{}.{}:{i}", rec.workflow_id, p.seq);
                match publish(&self.js, self.subjects.alerts(severity), &card, &msg_id).await {
                    Ok(()) => sent.push(i),
                    Err(e) => {
                        tracing::warn!(workflow_id = %id, error = %e, "reminder not sent; will retry");
                        break;
                    }
                }
            }
            if !sent.is_empty() {
                if let Some(p) = engine.get_mut(&id).and_then(|r| r.pause.as_mut()) {
                    p.reminders_sent.extend(sent);
                }
                dirty.insert(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_reminder_is_due_once_in_order() {
        let t0 = Utc::now();
        let d = [Duration::from_millis(100), Duration::from_millis(300)];
        let at = |ms| t0 + chrono::Duration::milliseconds(ms);
        assert!(due_reminders(t0, &[], &d, at(50)).is_empty());
        assert_eq!(due_reminders(t0, &[], &d, at(100)), vec![0]);
        assert!(due_reminders(t0, &[0], &d, at(200)).is_empty());
        assert_eq!(due_reminders(t0, &[0], &d, at(400)), vec![1]);
        // A coordinator that was down past both sends both, once.
        assert_eq!(due_reminders(t0, &[], &d, at(1000)), vec![0, 1]);
        assert!(due_reminders(t0, &[0, 1], &d, at(5000)).is_empty());
    }
}
