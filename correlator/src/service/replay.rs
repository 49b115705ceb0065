//! Start-up replay: rebuild the engine's windows from the FAILURES stream
//! before consuming new failures.
//!
//! The replay reads, with an ordered consumer in stream order, from
//! `start` up to the stream's last sequence when the replay began, where
//! `start` is the earliest of
//! - now − window − margin (the window any new failure can correlate with);
//! - the stream time of the durable consumer's first unacked failure −
//!   window − margin (failures that arrived while no correlator ran must be
//!   correlated with what came just before them, in order);
//! - the first failure of an incident whose record is still open − margin,
//!   but no further back than `max_replay` (so a long incident keeps its id
//!   instead of being detected again under a new one).
//!
//! The engine is deterministic, so it re-detects what the previous process
//! detected, with the same ids; the records say those effects are done.
//! The durable consumer then delivers from its ack floor; what the replay
//! already saw is dropped by the engine's event-id memory.

use std::time::Duration;

use async_nats::jetstream::consumer::{pull, DeliverPolicy, PullConsumer};
use async_nats::jetstream::{self, stream::Stream};
use chrono::{DateTime, TimeDelta, Utc};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use caucus_shared::config::CorrelatorConfig;
use caucus_shared::subjects::{StreamKind, Subjects};

use crate::processor::{ProcessError, Processor};
use crate::store::{CorrelationStore, RecordStatus};
use crate::trace_links::span_context_of;
use crate::wire;

/// What the replay will read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayPlan {
    /// First stream time read.
    pub start: DateTime<Utc>,
    /// Last stream sequence read.
    pub until_seq: u64,
}

/// Why the replay could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// NATS failed.
    #[error("replay: {0}")]
    Nats(String),
    /// Processing stopped.
    #[error(transparent)]
    Process(#[from] ProcessError),
}

fn nats_err(what: &str) -> impl Fn(&dyn std::fmt::Display) -> ReplayError + '_ {
    move |e| ReplayError::Nats(format!("{what}: {e}"))
}

pub use caucus_shared::clock::{to_chrono, to_time};

fn delta(d: Duration) -> TimeDelta {
    TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)
}

/// Decides what to replay; `None` when the stream is empty.
pub async fn plan(
    stream: &mut Stream,
    durable: &mut PullConsumer,
    store: &CorrelationStore,
    cfg: &CorrelatorConfig,
    now: DateTime<Utc>,
) -> Result<Option<ReplayPlan>, ReplayError> {
    let state = stream
        .info()
        .await
        .map_err(|e| nats_err("stream info")(&e))?
        .state
        .clone();
    if state.messages == 0 || state.last_sequence == 0 {
        return Ok(None);
    }
    let lookback = delta(cfg.window) + delta(cfg.replay_margin);
    let info = durable
        .info()
        .await
        .map_err(|e| nats_err("consumer info")(&e))?;
    let backlog = info.num_pending > 0 || info.num_ack_pending > 0;
    let mut from = now;
    if backlog {
        let seq = (info.ack_floor.stream_sequence + 1).max(state.first_sequence);
        from = match stream.get_raw_message(seq).await {
            Ok(m) => to_chrono(m.time),
            Err(_) => to_chrono(state.first_timestamp),
        };
        from = from.min(now);
    }
    let mut start = from - lookback;
    let recent = now - lookback;
    let floor = now - delta(cfg.max_replay);
    for rec in store.list().await.map_err(|e| nats_err("records")(&e))? {
        if rec.status == RecordStatus::Open && rec.last_seen >= recent {
            let open_from = (rec.first_seen - delta(cfg.replay_margin)).max(floor);
            start = start.min(open_from);
        }
    }
    if to_chrono(state.last_timestamp) < start {
        return Ok(None);
    }
    Ok(Some(ReplayPlan {
        start,
        until_seq: state.last_sequence,
    }))
}

/// Replays `plan` into `processor`; returns the failures read.
pub async fn run(
    stream: &Stream,
    subjects: &Subjects,
    plan: ReplayPlan,
    processor: &mut Processor,
    max_bytes: usize,
    stop: &CancellationToken,
) -> Result<u64, ReplayError> {
    let consumer = stream
        .create_consumer(pull::OrderedConfig {
            filter_subject: subjects.failures_all(),
            deliver_policy: DeliverPolicy::ByStartTime {
                start_time: to_time(plan.start),
            },
            ..Default::default()
        })
        .await
        .map_err(|e| nats_err("replay consumer")(&e))?;
    let mut messages = consumer
        .messages()
        .await
        .map_err(|e| nats_err("replay messages")(&e))?;
    let stream_name = subjects.stream(StreamKind::Failures);
    let mut read = 0u64;
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => return Err(ProcessError::Stopped.into()),
            m = messages.next() => m,
        };
        let Some(m) = next else { break };
        let msg = m.map_err(|e| nats_err("replay read")(&e))?;
        let info = msg
            .info()
            .map_err(|e| nats_err("replay message info")(&e))?;
        let (seq, pending) = (info.stream_sequence, info.pending);
        read += 1;
        match wire::decode_failure(&msg.payload, max_bytes) {
            Ok(d) => {
                let mut ev = d.event;
                if !d.has_id {
                    ev.event_id = wire::positional_event_id(&stream_name, seq);
                }
                processor
                    .handle_traced(ev, span_context_of(msg.headers.as_ref()))
                    .await?;
            }
            // The durable consumer dead-letters it (or already did).
            Err(e) => tracing::debug!(seq, error = %e, "replay skips an undecodable failure"),
        }
        if seq >= plan.until_seq || pending == 0 {
            break;
        }
    }
    processor.flush().await?;
    Ok(read)
}

/// The FAILURES stream.
pub async fn failures_stream(
    js: &jetstream::Context,
    subjects: &Subjects,
) -> Result<Stream, ReplayError> {
    js.get_stream(subjects.stream(StreamKind::Failures))
        .await
        .map_err(|e| nats_err("failures stream")(&e))
}
