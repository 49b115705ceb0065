//! Publishing task events and findings, each with a de-duplication id and
//! the trace context of the task. Findings go through the agent's debate
//! sync lock ([`SyncGate`]): they wait while a pre-debate snapshot holds it.

use async_nats::jetstream;
use async_nats::HeaderMap;
use chrono::{DateTime, Utc};

use caucus_shared::clock::SharedClock;
use caucus_shared::nats::trace;
use caucus_shared::redis::SyncGate;
use caucus_shared::subjects::Subjects;
use caucus_shared::task::{TaskDispatch, TaskError, TaskEvent, TaskStatus, TASK_SCHEMA_VERSION};
use caucus_shared::Error;

/// Publishes a worker's events.
#[derive(Clone)]
pub struct Reporter {
    js: jetstream::Context,
    subjects: Subjects,
    clock: SharedClock,
    worker_id: String,
    sync_gate: SyncGate,
}

impl Reporter {
    /// A reporter for `worker_id`; every finding goes through `sync_gate`.
    pub fn new(
        js: jetstream::Context,
        subjects: Subjects,
        clock: SharedClock,
        worker_id: String,
        sync_gate: SyncGate,
    ) -> Self {
        Reporter {
            js,
            subjects,
            clock,
            worker_id,
            sync_gate,
        }
    }

    /// The event body for `task`.
    pub fn event(
        &self,
        task: &TaskDispatch,
        status: TaskStatus,
        started_at: DateTime<Utc>,
    ) -> TaskEvent {
        TaskEvent {
            schema_version: TASK_SCHEMA_VERSION,
            task_id: task.task_id.clone(),
            workflow_id: task.workflow_id.clone(),
            stage: task.stage.clone(),
            agent_type: task.agent_type.clone(),
            attempt: task.attempt,
            status,
            worker_id: self.worker_id.clone(),
            output: None,
            error: None,
            message: None,
            started_at: Some(started_at),
            at: self.clock.now(),
            partition: task.partition,
        }
    }

    /// Publishes an event and waits for the stream to store it.
    pub async fn publish(&self, ev: &TaskEvent) -> Result<(), Error> {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", ev.msg_id().as_str());
        trace::inject(&mut headers);
        let body = serde_json::to_vec(ev)?;
        let subject = self
            .subjects
            .task_event_in(&ev.agent_type, ev.status.as_str(), ev.partition);
        self.js
            .publish_with_headers(subject, headers, body.into())
            .await
            .map_err(Error::nats)?
            .await
            .map(|_| ())
            .map_err(Error::nats)
    }

    /// A failed event.
    pub fn failed(
        &self,
        task: &TaskDispatch,
        started_at: DateTime<Utc>,
        err: TaskError,
    ) -> TaskEvent {
        let mut ev = self.event(task, TaskStatus::Failed, started_at);
        ev.error = Some(err);
        ev
    }

    /// Publishes a handler's extra message (a challenge, a broadcast) with
    /// its envelope id as `Nats-Msg-Id`.
    pub async fn message(&self, m: &crate::handler::HandlerMessage) -> Result<(), Error> {
        let subject = match &m.target {
            crate::handler::MessageTarget::Debate { debate_id, event } => {
                self.subjects.debates(debate_id, event)
            }
            crate::handler::MessageTarget::Broadcast => self.subjects.msg_all(),
        };
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", m.envelope.id.as_str());
        trace::inject(&mut headers);
        let env = m.envelope.clone().with_timestamp(self.clock.now());
        self.js
            .publish_with_headers(subject, headers, env.to_bytes())
            .await
            .map_err(Error::nats)?
            .await
            .map(|_| ())
            .map_err(Error::nats)
    }

    /// Publishes a confirmation on `caucus.msg.<to_agent>` with its
    /// `confirm:<finding id>:<agent type>` id as `Nats-Msg-Id` and waits for
    /// the stream to store it.
    pub async fn confirmation(
        &self,
        c: &crate::confirmations::OutgoingConfirmation,
    ) -> Result<(), Error> {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", c.msg_id.as_str());
        trace::inject(&mut headers);
        let env = c.envelope.clone().with_timestamp(self.clock.now());
        self.js
            .publish_with_headers(self.subjects.msg(&c.to_agent), headers, env.to_bytes())
            .await
            .map_err(Error::nats)?
            .await
            .map(|_| ())
            .map_err(Error::nats)
    }

    /// Publishes a finding about `item` (content in the `finding` shape),
    /// once the agent's debate sync lock is free (at most
    /// `worker.sync_lock_wait`; past it the finding goes out anyway and the
    /// gate logs an error).
    pub async fn finding(
        &self,
        task: &TaskDispatch,
        index: usize,
        content: serde_json::Value,
    ) -> Result<(), Error> {
        let body = serde_json::json!({
            "id": uuid::Uuid::now_v7().to_string(),
            "message_type": "finding",
            "from_agent": task.agent_type,
            "priority": "normal",
            "content": content,
            "timestamp": self.clock.now(),
            "requires_response": false,
            "correlation_id": task.workflow_id,
            "schema_version": 1,
        });
        let mut headers = HeaderMap::new();
        let id = format!("{}@{}:finding:{index}", task.task_id, task.attempt);
        headers.insert("Nats-Msg-Id", id.as_str());
        trace::inject(&mut headers);
        self.sync_gate
            .publish_finding(
                &task.agent_type,
                &task.item,
                headers,
                body.to_string().into(),
            )
            .await
            .map(|_| ())
    }
}
