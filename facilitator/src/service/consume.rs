//! Consumers of debate messages: the DEBATES stream
//! (`caucus.debates.*.{challenge,ack,evidence,verdict}`) and messages
//! addressed to the facilitator (`caucus.msg.facilitator`). Bad bodies and
//! refused transitions go to the DLQ with the reason; infrastructure
//! failures are redelivered.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::{self, AckKind};
use caucus_shared::envelope::{Envelope, MessageType};
use caucus_shared::nats::bind::{self, BindBudget};
use caucus_shared::nats::consumers;
use caucus_shared::nats::dlq::{decode_or_dead_letter, Dlq};
use caucus_shared::nats::trace;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use super::engine::Facilitator;
use super::error::ServiceError;

/// Debate events the facilitator consumes (it publishes the others).
pub const CONSUMED_EVENTS: [&str; 4] = consumers::FACILITATOR_EVENTS;

/// Delay before a message that hit an infrastructure failure comes back.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// Binds the two durable consumers (`facilitator` on DEBATES,
/// `facilitator-msg` on MESSAGES), which the coordinator or `caucus init`
/// creates (see [`consumers::facilitator_debates`]); waits for them within
/// the default [`BindBudget`].
pub async fn ensure_consumers(
    js: &jetstream::Context,
    fac: &Facilitator,
    ack_wait: Duration,
) -> Result<Vec<PullConsumer>, caucus_shared::Error> {
    let s = &fac.subjects;
    let mut out = Vec::new();
    for spec in [
        consumers::facilitator_debates(s, ack_wait),
        consumers::facilitator_messages(s, ack_wait),
    ] {
        out.push(bind::consumer(js, &spec, BindBudget::default()).await?);
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
            // The sender's span (a worker task's, for a challenge) is the
            // parent: the debate this may open joins the workflow's trace.
            let span = trace::consumer_span(&msg.subject, msg.headers.as_ref());
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
            let work = work.instrument(span);
            if is_challenge {
                tasks.spawn(work);
            } else {
                work.await;
            }
            ControlFlow::Continue(())
    })
    .await;
}
