//! Consumes task events (durable consumer `coordinator` on the EVENTS
//! stream) and hands them to the scheduler in batches; bodies that do not
//! parse go to the DLQ and the loop carries on.

use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use caucus_shared::nats::dlq::{decode_or_dead_letter, Dlq};
use caucus_shared::subjects::{StreamKind, Subjects};
use caucus_shared::task::{ErrorClass, TaskError, TaskEvent};

use super::commands::{Command, SchedulerHandle};

/// Durable name of the coordinator's event consumer.
pub const EVENTS_CONSUMER: &str = "coordinator";

/// Creates (or updates) the coordinator's event consumer.
pub async fn ensure_consumer(
    js: &jetstream::Context,
    subjects: &Subjects,
    ack_wait: Duration,
    part: crate::runtime::partition::Partition,
) -> Result<jetstream::consumer::PullConsumer, caucus_shared::Error> {
    let stream = subjects.stream(StreamKind::Events);
    let cfg = pull::Config {
        durable_name: Some(part.consumer(EVENTS_CONSUMER)),
        description: Some("task events for the coordinator".into()),
        filter_subject: match part.tag() {
            Some(p) => subjects.task_events_of(p),
            None => subjects.task_events_all(),
        },
        ack_policy: AckPolicy::Explicit,
        ack_wait,
        max_ack_pending: 20_000,
        ..Default::default()
    };
    js.create_consumer_on_stream(cfg, &stream)
        .await
        .map_err(|e| caucus_shared::Error::consumer(&part.consumer(EVENTS_CONSUMER), &stream, e))
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
    // Short pull requests: a coordinator frozen (SIGSTOP, a stall) with a
    // request open keeps receiving events until the request expires, each
    // then waiting `ack_wait` for redelivery. The library's default (200
    // messages, 30 s) let a frozen standby-to-be hold events long enough
    // for the new leader to take their tasks for silent.
    let ack_wait = consumer.cached_info().config.ack_wait;
    let expires = (ack_wait / 2).clamp(Duration::from_secs(1), Duration::from_secs(5));
    loop {
        let pull = consumer
            .stream()
            .max_messages_per_batch(batch.max(1))
            .expires(expires)
            .heartbeat(expires / 2)
            .messages()
            .await;
        let mut messages = match pull {
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
                    TaskEvent::decode(b, max_bytes)
                })
                .await;
                match decoded {
                    Some(ev) => events.push((ev, msg)),
                    None => {
                        // Not applied, so the task would wait for an event
                        // that never comes: fail its attempt with the reason.
                        if let Some(cmd) = dead_lettered(&msg) {
                            if scheduler.send(cmd).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            }
            if !events.is_empty() && scheduler.send(Command::Events(events)).await.is_err() {
                return;
            }
        }
    }
}

/// The failure to record for a task event that went to the DLQ: the task
/// and attempt come from its `Nats-Msg-Id` (`<task_id>@<attempt>:<status>`,
/// set by every worker), since the body could not be read.
fn dead_lettered(msg: &jetstream::Message) -> Option<Command> {
    let id = msg
        .headers
        .as_ref()?
        .get("Nats-Msg-Id")?
        .as_str()
        .to_string();
    let (task_id, attempt, status) = parse_event_msg_id(&id)?;
    Some(Command::FailTask {
        task_id: task_id.to_string(),
        attempt,
        error: TaskError {
            class: ErrorClass::Permanent,
            error_type: caucus_shared::task::coordinator_errors::EVENT_DEAD_LETTERED.into(),
            message: format!(
                "the worker's '{status}' event could not be read and went to the DLQ \
                 (subject {}); see the DLQ stream for the reason",
                msg.subject
            ),
            data_source: None,
        },
    })
}

/// Splits `<task_id>@<attempt>:<status>`.
fn parse_event_msg_id(id: &str) -> Option<(&str, u32, &str)> {
    let (task_id, rest) = id.rsplit_once('@')?;
    let (attempt, status) = rest.split_once(':')?;
    caucus_shared::task::split_task_id(task_id)?;
    Some((task_id, attempt.parse().ok()?, status))
}

#[cfg(test)]
mod tests {
    use super::parse_event_msg_id;

    #[test]
    fn event_msg_ids_parse() {
        assert_eq!(
            parse_event_msg_id("wf-1/valuation@2:completed"),
            Some(("wf-1/valuation", 2, "completed"))
        );
        assert_eq!(
            parse_event_msg_id("wf-1/dcf#3@1:failed"),
            Some(("wf-1/dcf#3", 1, "failed"))
        );
        assert_eq!(parse_event_msg_id("nonsense"), None);
        assert_eq!(parse_event_msg_id("no-slash@1:started"), None);
        assert_eq!(parse_event_msg_id("wf/x@two:started"), None);
    }
}
