//! How the inbound consumers settle each message: acknowledged once its
//! effect is stored, redelivered when a store, a publish or the scheduler
//! failed, and the loop ends with the term.

use std::future::Future;
use std::ops::ControlFlow;
use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::{self, AckKind};
use tokio_util::sync::CancellationToken;

use caucus_shared::envelope::Envelope;
use caucus_shared::nats::dlq::decode_or_dead_letter;
use caucus_shared::nats::stored::decode_stored;
use caucus_shared::subjects::{decode_token, Subjects};

use super::context::Inbound;

/// How long a message that could not be handled waits before redelivery.
const RETRY: Duration = Duration::from_secs(1);

/// What is left to do with a handled message.
pub(super) enum Settle {
    /// Acknowledge it: its effect is stored.
    Ack,
    /// Nothing: it was dead-lettered and settled already.
    Done,
}

/// Why a message is not acknowledged now.
pub(super) enum Retry {
    /// A store, publish or the scheduler failed: redeliver.
    Later(String),
    /// The term ended.
    SchedulerGone,
}

/// Dead-letters `msg` (acknowledged after).
pub(super) async fn dead_letter(
    inbound: &Inbound,
    msg: &jetstream::Message,
    code: &str,
    reason: &str,
) -> Result<Settle, Retry> {
    inbound
        .dlq
        .dead_letter_message(msg, code, reason)
        .await
        .map(|()| Settle::Ack)
        .map_err(|e| Retry::Later(e.to_string()))
}

/// Decodes `msg` (an envelope sent without an `id` is known by where it is
/// stored), or dead-letters and settles it (`None`).
pub(super) async fn decode(inbound: &Inbound, msg: &jetstream::Message) -> Option<Envelope> {
    decode_or_dead_letter(&inbound.dlq, msg, inbound.max_bytes, |_, max| {
        decode_stored(msg, max)
    })
    .await
}

/// The decoded last token of `<prefix>.<family>.<token>` (`None` for
/// another subject or a token that does not decode).
pub(super) fn subject_token(subjects: &Subjects, family: &str, subject: &str) -> Option<String> {
    let token = subject.strip_prefix(&format!("{}.{family}.", subjects.prefix()))?;
    decode_token(token).ok()
}

/// Hands every message of `consumer` to `handle` and settles it by the
/// answer, until `shutdown` or the scheduler goes away.
pub(super) async fn consume<F, Fut>(
    consumer: &PullConsumer,
    what: &'static str,
    shutdown: &CancellationToken,
    handle: F,
) where
    F: Fn(jetstream::Message) -> Fut,
    Fut: Future<Output = (jetstream::Message, Result<Settle, Retry>)>,
{
    let handle = &handle;
    caucus_shared::nats::consume::consume(consumer, what, shutdown, move |msg| async move {
        let (msg, outcome) = handle(msg).await;
        match outcome {
            Ok(Settle::Ack) => {
                let _ = msg.ack().await;
                ControlFlow::Continue(())
            }
            Ok(Settle::Done) => ControlFlow::Continue(()),
            Err(Retry::Later(why)) => {
                tracing::warn!(consumer = what, subject = %msg.subject, reason = %why, "message not handled yet; redelivering");
                let _ = msg.ack_with(AckKind::Nak(Some(RETRY))).await;
                ControlFlow::Continue(())
            }
            Err(Retry::SchedulerGone) => {
                let _ = msg.ack_with(AckKind::Nak(Some(RETRY))).await;
                ControlFlow::Break(())
            }
        }
    })
    .await;
}
