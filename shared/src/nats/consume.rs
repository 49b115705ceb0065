//! The loop every durable pull consumer of ours runs: create the consumer
//! (retrying while JetStream is away), pull messages, re-open the message
//! stream when it breaks, stop on shutdown. The per-message work is the
//! caller's; a message it does not ack is redelivered by JetStream.

use std::future::Future;
use std::ops::ControlFlow;
use std::time::Duration;

use async_nats::jetstream::{self, consumer::PullConsumer};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

/// Pause before retrying a consumer that could not be created or whose
/// message stream broke.
pub const RETRY_DELAY: Duration = Duration::from_millis(500);

/// Calls `ensure` until it yields the consumer; `None` on shutdown.
/// Failures are logged with `what` (the consumer's purpose).
pub async fn ensure_retrying<F, Fut, E>(
    what: &str,
    shutdown: &CancellationToken,
    mut ensure: F,
) -> Option<PullConsumer>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<PullConsumer, E>>,
    E: std::fmt::Display,
{
    loop {
        match ensure().await {
            Ok(c) => return Some(c),
            Err(e) => {
                tracing::warn!(error = %e, consumer = what, "consumer unavailable; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return None,
                    _ = tokio::time::sleep(RETRY_DELAY) => {}
                }
            }
        }
    }
}

/// Hands every message of `consumer` to `handle` until `shutdown`, or until
/// `handle` answers [`ControlFlow::Break`] (e.g. the component it feeds
/// went away). A message stream that breaks is re-opened; a message that
/// arrives as an error is logged and skipped (JetStream redelivers it).
pub async fn consume<F, Fut>(
    consumer: &PullConsumer,
    what: &str,
    shutdown: &CancellationToken,
    mut handle: F,
) where
    F: FnMut(jetstream::Message) -> Fut,
    Fut: Future<Output = ControlFlow<()>>,
{
    loop {
        let mut messages = match consumer.messages().await {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, consumer = what, "consumer unavailable; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(RETRY_DELAY) => continue,
                }
            }
        };
        loop {
            let next = tokio::select! {
                _ = shutdown.cancelled() => return,
                m = messages.next() => m,
            };
            let Some(next) = next else { break };
            let msg = match next {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(error = %e, consumer = what, "message stream error");
                    continue;
                }
            };
            if handle(msg).await.is_break() {
                return;
            }
        }
    }
}

/// Runs `work` while telling JetStream every `every` that `msg` is still
/// being handled (an in-progress ack), so a step that takes longer than
/// the consumer's `ack_wait` (forwards to other coordinators, each bounded
/// by `nats.request_timeout`) is not redelivered and carried out twice.
pub async fn in_progress<T>(
    msg: &jetstream::Message,
    every: Duration,
    work: impl Future<Output = T>,
) -> T {
    let every = every.max(Duration::from_millis(50));
    tokio::pin!(work);
    loop {
        tokio::select! {
            biased;
            r = &mut work => return r,
            _ = tokio::time::sleep(every) => {
                let _ = msg.ack_with(jetstream::AckKind::Progress).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_nats::jetstream::consumer::{pull, AckPolicy};
    use async_nats::jetstream::stream;

    /// A handler that takes twice the consumer's ack wait keeps its
    /// message: nobody else is handed it meanwhile, and it is delivered
    /// once.
    #[tokio::test]
    async fn a_message_in_progress_is_not_redelivered_past_ack_wait() {
        let nats = caucus_harness::Nats::start();
        let js = jetstream::new(async_nats::connect(nats.url()).await.unwrap());
        let s = js
            .create_stream(stream::Config {
                name: "C".into(),
                subjects: vec!["c".into()],
                ..Default::default()
            })
            .await
            .unwrap();
        let ack_wait = Duration::from_millis(1500);
        let consumer: PullConsumer = s
            .create_consumer(pull::Config {
                durable_name: Some("c".into()),
                ack_policy: AckPolicy::Explicit,
                ack_wait,
                ..Default::default()
            })
            .await
            .unwrap();
        js.publish("c", "x".into()).await.unwrap().await.unwrap();
        let first = |expires| {
            let consumer = consumer.clone();
            async move {
                let mut b = consumer
                    .fetch()
                    .max_messages(1)
                    .expires(expires)
                    .messages()
                    .await
                    .unwrap();
                b.next().await.map(|m| m.unwrap())
            }
        };
        let msg = first(Duration::from_secs(2)).await.expect("the message");
        let other = first(ack_wait * 2);
        let (_, redelivered) = tokio::join!(
            in_progress(&msg, ack_wait / 3, tokio::time::sleep(ack_wait * 2)),
            other
        );
        assert!(redelivered.is_none(), "handed out again while in progress");
        msg.ack().await.unwrap();
        assert_eq!(msg.info().unwrap().delivered, 1);
    }
}
