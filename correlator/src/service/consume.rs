//! The live loop: the durable consumer `correlator` on CAUCUS_FAILURES
//! (`caucus.failures.>`), processed in stream order, one batch at a time.
//!
//! Ack policy `all`: after a batch is processed (detections, triggers,
//! cards and new items recorded) only its last message is acked, which acks the whole batch in
//! one round trip; that is what lets one correlator keep up with tens of
//! thousands of failures a second. A message that cannot be decoded goes to
//! the DLQ (and is acked) and the loop carries on with the next.

use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::{self, Message};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use caucus_shared::clock::SharedClock;
use caucus_shared::nats::bind::{self, BindBudget};
use caucus_shared::nats::consumers;
use caucus_shared::nats::dlq::{decode_or_dead_letter, Dlq};
use caucus_shared::subjects::Subjects;

use crate::metrics;
use crate::processor::{ProcessError, Processor};
use crate::trace_links::span_context_of;
use crate::wire;

/// Durable name of the correlator's consumer.
pub const CONSUMER: &str = consumers::CORRELATOR;

/// Binds the durable consumer, which the coordinator or `caucus init`
/// creates (see [`consumers::correlator`]: new deployments start at the
/// stream's end, history is the replay's job, bounded by the window).
/// Waits for it within the default [`BindBudget`].
pub async fn ensure_consumer(
    js: &jetstream::Context,
    subjects: &Subjects,
    ack_wait: Duration,
    fetch_batch: usize,
) -> Result<PullConsumer, caucus_shared::Error> {
    let spec = consumers::correlator(subjects, ack_wait, fetch_batch);
    bind::consumer(js, &spec, BindBudget::default()).await
}

/// What the loop needs besides the processor.
#[derive(Debug, Clone)]
pub struct LoopDeps {
    /// Dead letters.
    pub dlq: Dlq,
    /// Body size limit.
    pub max_bytes: usize,
    /// Messages per pull.
    pub fetch_batch: usize,
    /// How often quiet incidents are closed.
    pub expire_interval: Duration,
    /// Wall clock for `expire`.
    pub clock: SharedClock,
    /// Name of the FAILURES stream (for positional event ids).
    pub stream_name: String,
}

/// Runs until `stop`; an error means effects were still outstanding (the
/// unacked batch is redelivered to whoever leads next).
pub async fn run(
    consumer: &PullConsumer,
    processor: &mut Processor,
    deps: &LoopDeps,
    stop: &CancellationToken,
) -> Result<(), ProcessError> {
    let batch = deps.fetch_batch.max(1);
    let mut expire = tokio::time::interval(deps.expire_interval);
    expire.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let stream = consumer
            .stream()
            .max_messages_per_batch(batch)
            .messages()
            .await;
        let mut messages = match stream {
            Ok(m) => m.ready_chunks(batch),
            Err(e) => {
                tracing::warn!(error = %e, "failure consumer unavailable; retrying");
                tokio::select! {
                    _ = stop.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(Duration::from_millis(500)) => continue,
                }
            }
        };
        loop {
            let chunk = tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                _ = expire.tick() => {
                    processor.expire(deps.clock.now()).await?;
                    continue;
                }
                c = messages.next() => c,
            };
            let Some(chunk) = chunk else { break };
            let mut last: Option<Message> = None;
            for m in chunk {
                match m {
                    Ok(msg) => {
                        process_one(&msg, processor, deps).await?;
                        last = Some(msg);
                    }
                    Err(e) => tracing::warn!(error = %e, "failure stream error"),
                }
            }
            processor.flush_due().await?;
            if let Some(msg) = last {
                if let Err(e) = msg.ack().await {
                    tracing::warn!(error = %e, "ack failed; the batch will be redelivered and de-duplicated");
                }
            }
        }
    }
}

async fn process_one(
    msg: &Message,
    processor: &mut Processor,
    deps: &LoopDeps,
) -> Result<(), ProcessError> {
    let decoded = decode_or_dead_letter(&deps.dlq, msg, deps.max_bytes, wire::decode_failure).await;
    let Some(d) = decoded else { return Ok(()) };
    metrics::failure_observed();
    let mut ev = d.event;
    if !d.has_id {
        if let Ok(info) = msg.info() {
            ev.event_id = wire::positional_event_id(&deps.stream_name, info.stream_sequence);
        }
    }
    processor
        .handle_traced(ev, span_context_of(msg.headers.as_ref()))
        .await
}
