//! Dispatches JetStream gave up on. When a task message reaches the
//! workers' `max_deliver` without an ack, the server publishes a
//! MAX_DELIVERIES advisory and never delivers it again: without this the
//! task would wait forever (the silence check would retry it, only for the
//! new attempt to meet the same fate). The task fails permanently with that
//! reason and the dead message leaves the work queue.
//!
//! Advisories are core NATS messages, not stored: one sent while no
//! coordinator leads is missed, and the task's silence check (`Scheduler::
//! reconcile_silent`) catches it instead.

use std::time::Duration;

use async_nats::jetstream;
use futures::StreamExt;
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use caucus_shared::subjects::{StreamKind, Subjects};
use caucus_shared::task::{ErrorClass, TaskDispatch, TaskError};

use super::commands::{Command, SchedulerHandle};

/// The part of a `io.nats.jetstream.advisory.v1.max_deliver` advisory used.
#[derive(Debug, Deserialize)]
struct MaxDeliverAdvisory {
    /// Stream sequence of the message given up on.
    stream_seq: u64,
    /// How many times it was delivered.
    #[serde(default)]
    deliveries: u64,
    /// The consumer that gave up.
    #[serde(default)]
    consumer: String,
}

/// The advisory subject for every consumer of the tasks stream.
pub fn advisory_subject(subjects: &Subjects) -> String {
    format!(
        "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{}.*",
        subjects.stream(StreamKind::Tasks)
    )
}

/// Runs until `shutdown`: each advisory fails its task through the
/// scheduler.
pub async fn run(
    js: jetstream::Context,
    subjects: Subjects,
    scheduler: SchedulerHandle,
    shutdown: CancellationToken,
) {
    let client = js.client();
    let subject = advisory_subject(&subjects);
    let stream_name = subjects.stream(StreamKind::Tasks);
    loop {
        let mut sub = match client.subscribe(subject.clone()).await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "cannot subscribe to max-deliveries advisories; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                }
            }
        };
        loop {
            let msg = tokio::select! {
                _ = shutdown.cancelled() => return,
                m = sub.next() => m,
            };
            let Some(msg) = msg else { break };
            let adv: MaxDeliverAdvisory = match serde_json::from_slice(&msg.payload) {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "unreadable max-deliveries advisory");
                    continue;
                }
            };
            let stream = match js.get_stream_no_info(&stream_name).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(error = %e, "tasks stream unavailable for an advisory");
                    continue;
                }
            };
            let dispatch = match stream.get_raw_message(adv.stream_seq).await {
                Ok(m) => serde_json::from_slice::<TaskDispatch>(&m.payload),
                Err(e) => {
                    tracing::warn!(seq = adv.stream_seq, error = %e, "undeliverable task message is gone");
                    continue;
                }
            };
            let Ok(d) = dispatch else {
                tracing::warn!(
                    seq = adv.stream_seq,
                    "undeliverable task message does not parse"
                );
                let _ = stream.delete_message(adv.stream_seq).await;
                continue;
            };
            tracing::warn!(task_id = %d.task_id, attempt = d.attempt, deliveries = adv.deliveries, consumer = %adv.consumer, "JetStream gave up delivering a task; failing it");
            let cmd = Command::FailTask {
                task_id: d.task_id.clone(),
                attempt: d.attempt,
                error: TaskError {
                    class: ErrorClass::Permanent,
                    error_type: caucus_shared::task::coordinator_errors::MAX_DELIVERIES.into(),
                    message: format!(
                        "delivered {} times to consumer {} without an ack (worker.max_deliver); \
                         the agent crashes or hangs on this task",
                        adv.deliveries, adv.consumer
                    ),
                    data_source: None,
                },
            };
            if scheduler.send(cmd).await.is_err() {
                return;
            }
            let _ = stream.delete_message(adv.stream_seq).await;
        }
    }
}
