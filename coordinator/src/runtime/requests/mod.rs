//! Requests become work (seed 001's `request`: a targeted query, scope,
//! priority and deadline). A `request` envelope on
//! `caucus.msg.<agent_type>` is read by the coordinator's message consumer
//! (`runtime/inbound/messages.rs`), which hands it to [`RequestIntake`];
//! the scheduler calls [`RequestAnswers`] after each pump and tick to send
//! the result back.
//!
//! STUB: the behaviour is being written (issue #17); the signatures are
//! the contract with the message consumer and the scheduler.

use std::collections::HashSet;

use chrono::{DateTime, Utc};

use caucus_shared::envelope::Envelope;

use super::commands::SchedulerHandle;
use super::store::WorkflowStore;
use super::CoordinatorDeps;
use crate::engine::Engine;

/// Why a request did not become work.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The request can never be served as sent (dead-lettered with `code`).
    #[error("{reason}")]
    Invalid {
        /// The DLQ error code, e.g. `invalid_request`, `unaddressable`.
        code: &'static str,
        /// What is wrong, for the sender.
        reason: String,
    },
    /// It may succeed later (no leader, a store write failed): redelivered.
    #[error("{0}")]
    Transient(String),
}

/// Turns `request` envelopes into tasks.
#[derive(Clone)]
pub struct RequestIntake {}

impl RequestIntake {
    /// Over the coordinator's deps, its workflow store and the scheduler.
    pub fn new(
        _deps: &CoordinatorDeps,
        _store: WorkflowStore,
        _scheduler: SchedulerHandle,
    ) -> Self {
        RequestIntake {}
    }

    /// Makes `env` (a request read on `caucus.msg.<agent_type>`, stored at
    /// `stored_at`) work for `agent_type`. `Ok` once the work is durably
    /// stored (the message is acknowledged then); the same request
    /// accepted twice creates nothing new.
    pub async fn accept(
        &self,
        _env: &Envelope,
        _stored_at: DateTime<Utc>,
        _agent_type: &str,
    ) -> Result<(), RequestError> {
        Err(RequestError::Invalid {
            code: "unsupported",
            reason: "requests are not served yet".into(),
        })
    }
}

/// Sends each request's result (or its failure) back to the requester.
pub struct RequestAnswers {}

impl RequestAnswers {
    /// Over the coordinator's deps.
    pub fn new(_deps: &CoordinatorDeps) -> Self {
        RequestAnswers {}
    }

    /// After a pump: answers the request workflows among `dirty` that
    /// finished, marking them answered (and so dirty) in `engine`.
    pub async fn flush(
        &mut self,
        _engine: &mut Engine,
        _dirty: &mut HashSet<String>,
        _now: DateTime<Utc>,
    ) {
    }

    /// On a tick: request workflows past their deadline are ended and
    /// answered with a failure.
    pub async fn on_tick(
        &mut self,
        _engine: &mut Engine,
        _dirty: &mut HashSet<String>,
        _now: DateTime<Utc>,
    ) {
    }
}
