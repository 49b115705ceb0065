//! What the scheduler is asked: its commands, the handle that sends them,
//! and [`ask`], which waits for an answer. Everything that talks to the
//! scheduler (the API, the stream consumers, the gate client) depends on
//! this module, not on the scheduler itself.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_nats::jetstream;
use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use caucus_shared::nats::ApiError;
use caucus_shared::task::TaskEvent;

use super::control::{ControlOp, ControlReply};
use super::gates::GateOp;
use super::submissions::{SubmitGrant, SubmitOp};
use crate::workflow::WorkflowRecord;

/// Capacity per agent type as last read from Redis.
pub type Capacities = Arc<RwLock<HashMap<String, usize>>>;

/// Which workflows `status` returns.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct StatusFilter {
    /// Only these ids.
    #[serde(default)]
    pub ids: Vec<String>,
    /// Only these states.
    #[serde(default)]
    pub states: Vec<String>,
    /// Include per-task detail (outputs only when `ids` names the
    /// workflows: a list never inlines outputs).
    #[serde(default)]
    pub tasks: bool,
    /// Workflows per page of a list (no `ids`): default
    /// [`STATUS_DEFAULT_LIMIT`], at most [`STATUS_MAX_LIMIT`].
    #[serde(default)]
    pub limit: Option<usize>,
    /// Where a list page starts: a previous reply's `next_cursor`.
    #[serde(default)]
    pub cursor: Option<String>,
}

/// Workflows in one `status` list page unless `limit` says otherwise.
pub const STATUS_DEFAULT_LIMIT: usize = 100;
/// The largest `limit` a `status` list accepts.
pub const STATUS_MAX_LIMIT: usize = 1_000;

/// A list cursor: the position after the workflow with this creation time
/// (ms) and id, in the list's `(created_at, workflow_id)` order.
pub fn status_cursor(r: &WorkflowRecord) -> String {
    format!("{}:{}", r.created_at.timestamp_millis(), r.workflow_id)
}

/// Reads a [`status_cursor`].
pub fn parse_status_cursor(c: &str) -> Option<(i64, String)> {
    let (ms, id) = c.split_once(':')?;
    Some((ms.parse().ok()?, id.to_string()))
}

/// Why the scheduler refused a submission step: its leader lease ran out
/// (the API answers `store_failed` with this text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("this coordinator's leader lease ran out; retry: another instance takes over")]
pub struct LeaseExpired;

/// Requests to the scheduler.
pub enum Command {
    /// Take over these stored workflows of this partition (several
    /// partitions: the submission stored them elsewhere); replies how many
    /// of them it holds.
    AdoptIds {
        /// Their ids.
        ids: Vec<String>,
        /// The index group they were indexed under, if any.
        group: Option<String>,
        /// How many it holds now.
        reply: oneshot::Sender<usize>,
    },
    /// One step of a submission (see `runtime::submissions`): may records
    /// be created now, or take over records the API stored.
    Submit {
        /// The step.
        op: SubmitOp,
        /// The epoch and store for the next records, or why this
        /// coordinator may not take them.
        reply: oneshot::Sender<Result<SubmitGrant, LeaseExpired>>,
    },
    /// A batch of task events with the messages to ack once persisted.
    Events(Vec<(TaskEvent, jetstream::Message)>),
    /// Status query.
    Status {
        /// Filter.
        filter: StatusFilter,
        /// The reply body.
        reply: oneshot::Sender<caucus_shared::api::coordinator::status::StatusReply>,
    },
    /// Capacity changed: try dispatching.
    Poke,
    /// Pause, resume and batch operations.
    Control {
        /// The operation.
        op: ControlOp,
        /// The reply or error.
        reply: oneshot::Sender<Result<ControlReply, ApiError>>,
    },
    /// Flag every unfinished workflow for re-evaluation (a macro broadcast);
    /// replies with how many were flagged.
    Flag {
        /// The flag.
        flag: crate::workflow::WorkflowFlag,
        /// The count.
        reply: oneshot::Sender<usize>,
    },
    /// An addressed finding read from `caucus.findings.<item>`: held for
    /// the addressee's next tasks of the item, and flagging the item's
    /// unfinished workflows when it arrived after the addressee's task
    /// (high or critical only). Replies with how many workflows were
    /// flagged (stored before the reply), or why the addressee is unknown.
    Finding {
        /// The item (from the subject).
        item: String,
        /// Who it is for.
        addressee: caucus_shared::messages::Addressee,
        /// It, as tasks receive it.
        finding: caucus_shared::inbound::InputFinding,
        /// Accept any addressee (a request's answer to its requester).
        any_addressee: bool,
        /// Workflows flagged, or why the addressee is unknown.
        reply: oneshot::Sender<Result<usize, String>>,
    },
    /// Gate decisions, re-runs and listings.
    Gate {
        /// The operation.
        op: GateOp,
        /// The reply body or error.
        reply: oneshot::Sender<Result<Value, ApiError>>,
    },
    /// Fail one task attempt for a reason the coordinator learnt outside
    /// the worker's events (JetStream gave up delivering the dispatch, or
    /// the worker's event about it was dead-lettered).
    FailTask {
        /// The task (`<workflow_id>/<stage>`).
        task_id: String,
        /// The attempt concerned (an older one changes nothing).
        attempt: u32,
        /// Why, as a worker would have reported it.
        error: caucus_shared::task::TaskError,
    },
    /// The item's latest workflow among those held (as a pause or resume
    /// by item picks it): its id and creation time, `None` when none is.
    LatestOfItem {
        /// The item.
        item: String,
        /// The workflow, if any.
        reply: oneshot::Sender<Option<(String, DateTime<Utc>)>>,
    },
    /// Load per agent type.
    Load {
        /// The reply.
        reply: oneshot::Sender<std::collections::BTreeMap<String, crate::engine::AgentLoad>>,
    },
}

/// Handle for sending commands.
pub type SchedulerHandle = mpsc::Sender<Command>;

/// Why the scheduler gave no answer to [`ask`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskError {
    /// It no longer takes commands (shutting down or stepped down).
    Closed,
    /// It took the command but dropped it unanswered (it is stopping).
    Dropped,
    /// No answer within [`SCHEDULER_REPLY_TIMEOUT`].
    Timeout,
}

impl From<AskError> for ApiError {
    fn from(e: AskError) -> ApiError {
        match e {
            AskError::Closed | AskError::Dropped => {
                ApiError::new("unavailable", "the coordinator is shutting down")
            }
            AskError::Timeout => ApiError::new("timeout", "the scheduler did not answer in time"),
        }
    }
}

/// Sends the command `command` builds around a reply channel and waits for
/// the scheduler's answer (at most [`SCHEDULER_REPLY_TIMEOUT`]).
pub async fn ask<T>(
    handle: &SchedulerHandle,
    command: impl FnOnce(oneshot::Sender<T>) -> Command,
) -> Result<T, AskError> {
    let (tx, rx) = oneshot::channel();
    handle
        .send(command(tx))
        .await
        .map_err(|_| AskError::Closed)?;
    match tokio::time::timeout(SCHEDULER_REPLY_TIMEOUT, rx).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(_)) => Err(AskError::Dropped),
        Err(_) => Err(AskError::Timeout),
    }
}

/// How long `submit` and `status` callers wait for the scheduler.
pub const SCHEDULER_REPLY_TIMEOUT: Duration = Duration::from_secs(30);
