//! Consumes `pause_request`, `resume_command`, `batch_pause_request` and
//! `batch_trigger` envelopes from `caucus.control.<message_type>` (durable
//! consumer `coordinator-control`). A body that does not decode, a message
//! type that does not match its subject, and an operation the coordinator
//! refuses (e.g. `illegal_transition`) go to the DLQ with the reason; the
//! message is then acked. With several partitions pauses and resumes are
//! carried out by their workflow's owner, batches by the owners of their
//! workflows (docs/PARTITIONS.md).

use std::ops::ControlFlow;
use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy, AckKind};
use tokio_util::sync::CancellationToken;

use caucus_shared::envelope::{DecodeError, Envelope, MessageType};
use caucus_shared::messages::{BatchPauseRequest, BatchTrigger, PauseRequest, ResumeCommand};
use caucus_shared::nats::consume::in_progress;
use caucus_shared::nats::dlq::{decode_or_dead_letter, Dlq, DlqReason};
use caucus_shared::subjects::{StreamKind, Subjects};

use super::batch::BatchPauseArgs;
use super::commands::{ask, AskError, Command, SchedulerHandle};
use super::control::{ControlOp, PauseArgs, ResumeArgs};
use super::route::{batches, by_item, Router};

/// Durable name of the coordinator's control consumer.
pub const CONTROL_CONSUMER: &str = "coordinator-control";

/// The message types the coordinator consumes from the control stream.
pub const CONSUMED: [MessageType; 4] = [
    MessageType::PauseRequest,
    MessageType::ResumeCommand,
    MessageType::BatchPauseRequest,
    MessageType::BatchTrigger,
];

/// Code of an envelope whose type does not match its subject.
pub const CODE_UNEXPECTED_TYPE: &str = "unexpected_message_type";

/// Why a control message could not be turned into an operation.
#[derive(Debug, thiserror::Error)]
pub enum ControlDecodeError {
    /// The envelope did not decode.
    #[error(transparent)]
    Envelope(#[from] DecodeError),
    /// The type does not belong on this subject.
    #[error("message_type `{found}` on subject {subject}; expected `{expected}`")]
    UnexpectedType {
        /// The envelope's type.
        found: String,
        /// The subject's type.
        expected: String,
        /// The subject.
        subject: String,
    },
}

impl DlqReason for ControlDecodeError {
    fn code(&self) -> &str {
        match self {
            ControlDecodeError::Envelope(e) => e.code(),
            ControlDecodeError::UnexpectedType { .. } => CODE_UNEXPECTED_TYPE,
        }
    }
}

/// Decodes one control message body into an operation.
pub fn decode_op(subject: &str, body: &[u8], max: usize) -> Result<ControlOp, ControlDecodeError> {
    let env = Envelope::decode(body, max)?;
    let expected = subject.rsplit('.').next().unwrap_or_default();
    if env.message_type.as_str() != expected {
        return Err(ControlDecodeError::UnexpectedType {
            found: env.message_type.as_str().to_string(),
            expected: expected.to_string(),
            subject: subject.to_string(),
        });
    }
    Ok(match env.message_type {
        MessageType::PauseRequest => {
            let r: PauseRequest = env.content_as()?;
            ControlOp::Pause(PauseArgs {
                workflow_id: r.workflow_id,
                item: Some(r.stock_id),
                reason: Some(r.reason),
                trigger_source: Some(r.trigger_source),
                cancel_in_flight: false,
            })
        }
        MessageType::ResumeCommand => {
            let r: ResumeCommand = env.content_as()?;
            ControlOp::Resume(ResumeArgs {
                workflow_id: r.workflow_id,
                item: Some(r.stock_id),
                plan: r.resume_plan,
                notify: r.notify,
                ..ResumeArgs::default()
            })
        }
        MessageType::BatchPauseRequest => {
            let r: BatchPauseRequest = env.content_as()?;
            ControlOp::BatchPause(BatchPauseArgs {
                items: r.stock_ids,
                reason: Some(r.reason),
                max_concurrency: Some(r.max_concurrency),
                batch_id: Some(r.batch_id),
                correlation_id: env.correlation_id.clone(),
                ..BatchPauseArgs::default()
            })
        }
        MessageType::BatchTrigger => ControlOp::BatchTrigger(env.content_as::<BatchTrigger>()?),
        other => {
            return Err(ControlDecodeError::UnexpectedType {
                found: other.as_str().to_string(),
                expected: CONSUMED
                    .iter()
                    .map(|t| t.as_str())
                    .collect::<Vec<_>>()
                    .join("|"),
                subject: subject.to_string(),
            })
        }
    })
}

/// Creates (or updates) the control consumer.
pub async fn ensure_consumer(
    js: &jetstream::Context,
    subjects: &Subjects,
    ack_wait: Duration,
    part: crate::runtime::partition::Partition,
) -> Result<jetstream::consumer::PullConsumer, caucus_shared::Error> {
    let stream = subjects.stream(StreamKind::Control);
    let cfg = pull::Config {
        durable_name: Some(part.consumer(CONTROL_CONSUMER)),
        description: Some("pause/resume/batch commands for the coordinator".into()),
        filter_subjects: CONSUMED
            .iter()
            .map(|t| subjects.control(t.as_str()))
            .collect(),
        ack_policy: AckPolicy::Explicit,
        ack_wait,
        max_ack_pending: 1000,
        ..Default::default()
    };
    js.create_consumer_on_stream(cfg, &stream)
        .await
        .map_err(|e| caucus_shared::Error::consumer(&part.consumer(CONTROL_CONSUMER), &stream, e))
}

/// Creates the consumer, then runs until `shutdown` (or the scheduler
/// goes away). With several partitions (`router` is the instance's) only
/// partition 0's term runs it: pauses and resumes go to their workflow's
/// owner (by item: the item's latest workflow over every partition), here
/// or over NATS; batches are split among the owners of their workflows
/// (`route::batches`).
#[allow(clippy::too_many_arguments)]
pub async fn run(
    js: jetstream::Context,
    subjects: Subjects,
    ack_wait: Duration,
    dlq: Dlq,
    max_bytes: usize,
    scheduler: SchedulerHandle,
    router: Option<Router>,
    shutdown: CancellationToken,
) {
    let Some(consumer) =
        caucus_shared::nats::consume::ensure_retrying("control", &shutdown, || {
            ensure_consumer(
                &js,
                &subjects,
                ack_wait,
                crate::runtime::partition::Partition::ONLY,
            )
        })
        .await
    else {
        return;
    };
    let (dlq, scheduler, router) = (&dlq, &scheduler, &router);
    caucus_shared::nats::consume::consume(&consumer, "control", &shutdown, move |msg| async move {
            let subject = msg.subject.to_string();
            let Some(op) =
                decode_or_dead_letter(dlq, &msg, max_bytes, |b, max| decode_op(&subject, b, max))
                    .await
            else {
                return ControlFlow::Continue(());
            };
            if let Some(router) = router {
                routed(router, dlq, &msg, &subject, op, ack_wait).await;
                return ControlFlow::Continue(());
            }
            match ask(scheduler, |reply| Command::Control { op, reply }).await {
                Err(AskError::Closed) => {
                    let _ = msg
                        .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                        .await;
                    return ControlFlow::Break(());
                }
                Ok(Ok(_)) => {
                    let _ = msg.ack().await;
                }
                Ok(Err(e)) => {
                    tracing::warn!(subject = %subject, code = %e.code, error = %e.message, "control command refused");
                    refuse(dlq, &msg, &e.code, &e.message).await;
                }
                _ => {
                    let _ = msg
                        .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                        .await;
                }
            }
            ControlFlow::Continue(())
    })
    .await;
}

/// Error codes that say "not now": the message is redelivered, not
/// dead-lettered (a partition without an owner, an owner that did not
/// answer in time or is stopping).
const RETRIED: [&str; 3] = ["unavailable", "timeout", "standby"];

/// Carries out one command with several partitions; acks it only once
/// the owner applied it.
async fn routed(
    router: &Router,
    dlq: &Dlq,
    msg: &jetstream::Message,
    subject: &str,
    op: ControlOp,
    ack_wait: Duration,
) {
    // By item it is two forwards in turn (find, then apply), each up to
    // nats.request_timeout; a batch three (find, apply the parts, merge
    // the status): keep the message ours meanwhile.
    let keep = ack_wait / 3;
    let done = match op {
        ControlOp::Pause(a) => {
            in_progress(msg, keep, async {
                by_item::pause(router, a).await.map(drop)
            })
            .await
        }
        ControlOp::Resume(a) => {
            in_progress(msg, keep, async {
                by_item::resume(router, a).await.map(drop)
            })
            .await
        }
        ControlOp::BatchPause(a) => {
            in_progress(msg, keep, async {
                batches::pause(router, a).await.map(drop)
            })
            .await
        }
        ControlOp::BatchTrigger(t) => {
            in_progress(msg, keep, async {
                batches::trigger(router, t).await.map(drop)
            })
            .await
        }
        // Not control messages (decode_op never makes them), but served
        // the same way should one come.
        ControlOp::BatchResume(a) => {
            in_progress(msg, keep, async {
                batches::resume(router, a).await.map(drop)
            })
            .await
        }
        ControlOp::BatchStatus(a) => {
            in_progress(msg, keep, async {
                batches::status(router, a).await.map(drop)
            })
            .await
        }
        ControlOp::PartPause(_) | ControlOp::PartResume(_) => {
            let why = "a partition's share of a batch is not a control message";
            refuse(dlq, msg, "bad_request", why).await;
            return;
        }
    };
    match done {
        Ok(()) => {
            let _ = msg.ack().await;
        }
        Err(e) if RETRIED.contains(&e.code.as_str()) => {
            tracing::info!(subject = %subject, code = %e.code, error = %e.message, "control command not applied yet; redelivered later");
            let _ = msg
                .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                .await;
        }
        Err(e) => {
            tracing::warn!(subject = %subject, code = %e.code, error = %e.message, "control command refused");
            refuse(dlq, msg, &e.code, &e.message).await;
        }
    }
}

/// Dead-letters a refused command and acknowledges it; when the DLQ
/// cannot take it, it is redelivered later instead.
async fn refuse(dlq: &Dlq, msg: &jetstream::Message, code: &str, why: &str) {
    match dlq.dead_letter_message(msg, code, why).await {
        Ok(()) => {
            let _ = msg.ack().await;
        }
        Err(err) => {
            tracing::error!(error = %err, "cannot dead-letter; will retry");
            let _ = msg
                .ack_with(AckKind::Nak(Some(Duration::from_secs(5))))
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_each_type_and_refuses_mismatches() {
        let body = json!({"message_type": "batch_trigger", "from_agent": "correlator",
            "content": {"stock_ids": ["AAPL"], "root_cause": "koyfin API quota exceeded",
                        "correlation_id": "c1"}})
        .to_string();
        assert!(matches!(
            decode_op("caucus.control.batch_trigger", body.as_bytes(), 1 << 20),
            Ok(ControlOp::BatchTrigger(_))
        ));
        let e = decode_op("caucus.control.pause_request", body.as_bytes(), 1 << 20).unwrap_err();
        assert_eq!(e.code(), CODE_UNEXPECTED_TYPE);
        let bad = json!({"message_type": "pause_request", "from_agent": "x",
            "content": {"reason": "no stock"}})
        .to_string();
        let e = decode_op("caucus.control.pause_request", bad.as_bytes(), 1 << 20).unwrap_err();
        assert!(matches!(e, ControlDecodeError::Envelope(_)), "{e}");
        let resume = json!({"message_type": "resume_command", "from_agent": "human",
            "content": {"stock_id": "AAPL", "notify": true}})
        .to_string();
        match decode_op("caucus.control.resume_command", resume.as_bytes(), 1 << 20) {
            Ok(ControlOp::Resume(a)) => {
                assert_eq!(a.item.as_deref(), Some("AAPL"));
                assert!(a.notify);
            }
            o => panic!("{o:?}"),
        }
    }
}
