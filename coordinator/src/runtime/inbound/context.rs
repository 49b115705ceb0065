//! What the inbound consumers share for one leadership term.

use std::sync::{Arc, Mutex};

use async_nats::jetstream;

use caucus_shared::clock::SharedClock;
use caucus_shared::config::ResponseTimeouts;
use caucus_shared::envelope::Envelope;
use caucus_shared::nats::dlq::Dlq;
use caucus_shared::subjects::Subjects;

use super::responses::{Pending, ResponseStore};
use crate::runtime::commands::SchedulerHandle;
use crate::runtime::publish;
use crate::runtime::requests::RequestIntake;

/// The consumers' shared parts.
#[derive(Clone)]
pub struct Inbound {
    /// JetStream.
    pub js: jetstream::Context,
    /// Subjects.
    pub subjects: Subjects,
    /// Where unreadable messages go.
    pub dlq: Dlq,
    /// Largest body read.
    pub max_bytes: usize,
    /// Clock.
    pub clock: SharedClock,
    /// The term's scheduler.
    pub scheduler: SchedulerHandle,
    /// Awaited responses (KV).
    pub responses: ResponseStore,
    /// The unanswered ones this term checks.
    pub pending: Arc<Mutex<Pending>>,
    /// Response time-outs per priority.
    pub timeouts: ResponseTimeouts,
    /// Turns requests into work.
    pub requests: RequestIntake,
    /// With several partitions: every partition, which findings are
    /// handed to (`None`: the term's scheduler holds every workflow).
    pub partitions: Option<crate::runtime::route::Router>,
}

impl Inbound {
    /// Publishes an alert card (de-duplicated by `msg_id`).
    pub async fn card(
        &self,
        severity: &str,
        card: &Envelope,
        msg_id: &str,
    ) -> Result<(), publish::PublishError> {
        publish::publish(&self.js, self.subjects.alerts(severity), card, msg_id).await
    }

    /// The unanswered messages, locked (never held across an await).
    pub fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}
