//! Consumes task events (durable consumer `coordinator` on the EVENTS
//! stream) and hands them to the scheduler in batches; bodies that do not
//! parse go to the DLQ and the loop carries on.

use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use caucus_shared::nats::dlq::{decode_or_dead_letter, Dlq};
use caucus_shared::subjects::{StreamKind, Subjects};
use caucus_shared::task::TaskEvent;

use super::scheduler::{Command, SchedulerHandle};

/// Durable name of the coordinator's event consumer.
pub const EVENTS_CONSUMER: &str = "coordinator";

/// Creates (or updates) the coordinator's event consumer.
pub async fn ensure_consumer(
    js: &jetstream::Context,
    subjects: &Subjects,
    ack_wait: Duration,
) -> Result<jetstream::consumer::PullConsumer, String> {
    let stream = subjects.stream(StreamKind::Events);
    let cfg = pull::Config {
        durable_name: Some(EVENTS_CONSUMER.into()),
        description: Some("task events for the coordinator".into()),
        filter_subject: subjects.task_events_all(),
        ack_policy: AckPolicy::Explicit,
        ack_wait,
        max_ack_pending: 20_000,
        ..Default::default()
    };
    js.create_consumer_on_stream(cfg, &stream)
        .await
        .map_err(|e| format!("consumer {EVENTS_CONSUMER} on {stream}: {e}"))
}

/// Runs until `shutdown`.
pub async fn run(
    consumer: jetstream::consumer::PullConsumer,
    dlq: Dlq,
    max_bytes: usize,
    batch: usize,
    scheduler: SchedulerHandle,
    shutdown: CancellationToken,
) {
    loop {
        let mut messages = match consumer.messages().await {
            Ok(m) => m.ready_chunks(batch.max(1)),
            Err(e) => {
                tracing::warn!(error = %e, "event consumer unavailable; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(500)) => continue,
                }
            }
        };
        loop {
            let chunk = tokio::select! {
                _ = shutdown.cancelled() => return,
                c = messages.next() => c,
            };
            let Some(chunk) = chunk else { break };
            let mut events = Vec::with_capacity(chunk.len());
            for m in chunk {
                let msg = match m {
                    Ok(msg) => msg,
                    Err(e) => {
                        tracing::warn!(error = %e, "event stream error");
                        continue;
                    }
                };
                let decoded = decode_or_dead_letter(&dlq, &msg, max_bytes, |b, _| {
                    serde_json::from_slice::<TaskEvent>(b)
                })
                .await;
                if let Some(ev) = decoded {
                    events.push((ev, msg));
                }
            }
            if !events.is_empty() && scheduler.send(Command::Events(events)).await.is_err() {
                return;
            }
        }
    }
}
