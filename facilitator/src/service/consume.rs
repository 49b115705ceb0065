//! Consumers of debate messages: the DEBATES stream
//! (`caucus.debates.*.{challenge,ack,evidence,verdict}`) and messages
//! addressed to the facilitator (`caucus.msg.facilitator`). Bad bodies and
//! refused transitions go to the DLQ with the reason; infrastructure
//! failures are redelivered.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy, PullConsumer};
use async_nats::jetstream::{self, AckKind};
use caucus_shared::envelope::{Envelope, MessageType};
use caucus_shared::nats::dlq::{decode_or_dead_letter, Dlq};
use caucus_shared::subjects::StreamKind;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::engine::Facilitator;
use super::error::ServiceError;

/// Debate events the facilitator consumes (it publishes the others).
pub const CONSUMED_EVENTS: [&str; 4] = ["challenge", "ack", "evidence", "verdict"];

/// Delay before a message that hit an infrastructure failure comes back.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// Creates (or updates) the two durable consumers.
pub async fn ensure_consumers(
    js: &jetstream::Context,
    fac: &Facilitator,
    ack_wait: Duration,
) -> Result<Vec<PullConsumer>, caucus_shared::Error> {
    let s = &fac.subjects;
    let debates = pull::Config {
        durable_name: Some("facilitator".into()),
        description: Some("debate messages for the facilitator".into()),
        filter_subjects: CONSUMED_EVENTS
            .iter()
            .map(|e| format!("{}.debates.*.{e}", s.prefix()))
            .collect(),
        ack_policy: AckPolicy::Explicit,
        deliver_policy: DeliverPolicy::All,
        ack_wait,
        ..Default::default()
    };
    let msgs = pull::Config {
        durable_name: Some("facilitator-msg".into()),
        description: Some("messages addressed to the facilitator".into()),
        filter_subject: s.msg(&fac.name),
        ack_policy: AckPolicy::Explicit,
        deliver_policy: DeliverPolicy::All,
        ack_wait,
        ..Default::default()
    };
    let mut out = Vec::new();
    for (cfg, stream) in [
        (debates, s.stream(StreamKind::Debates)),
        (msgs, s.stream(StreamKind::Messages)),
    ] {
        let name = cfg.durable_name.clone().unwrap_or_default();
        out.push(
            js.create_consumer_on_stream(cfg, &stream)
                .await
                .map_err(|e| {
                    caucus_shared::Error::nats(format!("consumer {name} on {stream}: {e}"))
                })?,
        );
    }
    Ok(out)
}

/// Consumes until `shutdown`.
pub async fn run(
    consumer: PullConsumer,
    fac: Arc<Facilitator>,
    dlq: Dlq,
    max_bytes: usize,
    shutdown: CancellationToken,
    tasks: TaskTracker,
) {
    let (fac, dlq, tasks) = (&fac, &dlq, &tasks);
    caucus_shared::nats::consume::consume(&consumer, "debates", &shutdown, move |msg| async move {
            let decoded = decode_or_dead_letter(dlq, &msg, max_bytes, |b, max| {
                Envelope::decode(b, max).map_err(ServiceError::from)
            })
            .await;
            let Some(env) = decoded else { return ControlFlow::Continue(()) };
            let is_challenge = env.message_type == MessageType::Challenge;
            // Opening a debate waits for flushes (up to the flush time-out):
            // run it beside the loop so other debates keep moving.
            let fac = fac.clone();
            let dlq = dlq.clone();
            let work = async move {
                match fac.handle(&env).await {
                    Ok(_) => {
                        let _ = msg.ack().await;
                    }
                    Err(e) if e.is_transient() => {
                        tracing::warn!(subject = %msg.subject, error = %e, "debate message will be retried");
                        let _ = msg.ack_with(AckKind::Nak(Some(RETRY_DELAY))).await;
                    }
                    Err(e) => {
                        tracing::warn!(subject = %msg.subject, code = e.code(), error = %e, "debate message refused");
                        match dlq
                            .dead_letter_message(&msg, e.code(), &e.to_string())
                            .await
                        {
                            Ok(()) => {
                                let _ = msg.ack().await;
                            }
                            Err(err) => {
                                tracing::error!(error = %err, "cannot dead-letter; will retry");
                                let _ = msg.ack_with(AckKind::Nak(Some(RETRY_DELAY))).await;
                            }
                        }
                    }
                }
            };
            if is_challenge {
                tasks.spawn(work);
            } else {
                work.await;
            }
            ControlFlow::Continue(())
    })
    .await;
}
