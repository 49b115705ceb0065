//! Broadcasts reach every worker process: each process reads
//! `caucus.msg.all` through its own ordered consumer from the start of the
//! stream, so a restarted worker rebuilds the regime from the broadcasts the
//! stream still holds, and no process misses one.
//!
//! "Ahead of queued work": before a slot starts a task it calls
//! [`Broadcasts::catch_up`], which reads the stream's last `caucus.msg.all`
//! sequence and waits (at most `worker.broadcast_wait`) until this process
//! has applied it. A broadcast published while tasks were queued is thus
//! applied before any of them starts.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::consumer::push::OrderedConfig;
use async_nats::jetstream::consumer::DeliverPolicy;
use async_nats::jetstream::stream::{LastRawMessageErrorKind, Stream};
use async_nats::jetstream::{self};
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use caucus_shared::envelope::Envelope;
use caucus_shared::nats::dlq::Dlq;
use caucus_shared::service::Tasks;
use caucus_shared::subjects::{StreamKind, Subjects};

use super::market::{MarketState, Outcome};

/// DLQ code of a broadcast whose content cannot be applied.
pub const CODE_INVALID_BROADCAST: &str = "invalid_broadcast";

/// The process's view of the broadcasts.
#[derive(Clone)]
pub struct Broadcasts {
    state: Arc<Mutex<MarketState>>,
    applied: watch::Receiver<u64>,
    stream: Stream,
    subject: String,
    wait: Duration,
}

impl std::fmt::Debug for Broadcasts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broadcasts")
            .field("applied", &*self.applied.borrow())
            .finish_non_exhaustive()
    }
}

impl Broadcasts {
    /// Starts the consumer (its loop runs until `shutdown`) and returns once
    /// every broadcast already in the stream has been applied, so the first
    /// task sees the current regime.
    pub async fn start(
        js: &jetstream::Context,
        subjects: &Subjects,
        dlq: Dlq,
        max_bytes: usize,
        wait: Duration,
        shutdown: CancellationToken,
        tracker: &Tasks,
    ) -> Result<Broadcasts, caucus_shared::Error> {
        let name = subjects.stream(StreamKind::Messages);
        let stream = js
            .get_stream(&name)
            .await
            .map_err(|e| caucus_shared::Error::nats(format!("stream {name}: {e}")))?;
        let subject = subjects.msg_all();
        let consumer = stream
            .create_consumer(OrderedConfig {
                deliver_subject: js_inbox(js),
                filter_subject: subject.clone(),
                deliver_policy: DeliverPolicy::All,
                description: Some("this worker's view of caucus.msg.all".into()),
                ..Default::default()
            })
            .await
            .map_err(|e| caucus_shared::Error::consumer("broadcast", &name, e))?;
        let messages = consumer
            .messages()
            .await
            .map_err(|e| caucus_shared::Error::consumer("broadcast", &name, e))?;
        let (tx, rx) = watch::channel(0u64);
        let state = Arc::new(Mutex::new(MarketState::default()));
        tracker.spawn_named(
            "broadcasts",
            consume(messages, state.clone(), tx, dlq, max_bytes, shutdown),
        );
        let b = Broadcasts {
            state,
            applied: rx,
            stream,
            subject,
            wait,
        };
        b.catch_up().await;
        Ok(b)
    }

    /// Waits until every broadcast on the stream now has been applied, at
    /// most the configured wait (then logs and returns: work never blocks
    /// on a broken broadcast path).
    pub async fn catch_up(&self) {
        let last = match self
            .stream
            .get_last_raw_message_by_subject(&self.subject)
            .await
        {
            Ok(m) => m.sequence,
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => return,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the last broadcast; running on the regime held");
                return;
            }
        };
        let mut rx = self.applied.clone();
        let reached = tokio::time::timeout(self.wait, rx.wait_for(|seq| *seq >= last)).await;
        if !matches!(reached, Ok(Ok(_))) {
            tracing::warn!(
                last,
                applied = *self.applied.borrow(),
                "broadcasts not applied within broadcast_wait; running on the regime held"
            );
        }
    }

    /// The regime to hand tasks as `inputs.regime`, if any.
    pub fn regime_input(&self) -> Option<Value> {
        self.state.lock().ok()?.regime_input()
    }
}

fn js_inbox(js: &jetstream::Context) -> String {
    js.client().new_inbox()
}

async fn consume(
    mut messages: async_nats::jetstream::consumer::push::Ordered,
    state: Arc<Mutex<MarketState>>,
    applied: watch::Sender<u64>,
    dlq: Dlq,
    max_bytes: usize,
    shutdown: CancellationToken,
) {
    loop {
        let next = tokio::select! {
            _ = shutdown.cancelled() => return,
            m = messages.next() => m,
        };
        let msg = match next {
            Some(Ok(m)) => m,
            Some(Err(e)) => {
                // The ordered consumer recreates itself from the last
                // sequence it delivered; nothing is skipped.
                tracing::warn!(error = %e, "broadcast consumer error");
                continue;
            }
            None => return,
        };
        let seq = msg.info().map(|i| i.stream_sequence).unwrap_or(0);
        let problem = match Envelope::decode(&msg.payload, max_bytes) {
            Err(e) => Some((e.code().to_string(), e.to_string())),
            Ok(env) => {
                let outcome = state.lock().map(|mut s| s.apply(&env));
                match outcome {
                    Ok(Ok(Outcome::Applied(what))) => {
                        tracing::info!(broadcast_id = %env.id, from = %env.from_agent, "broadcast applied: {what}");
                        None
                    }
                    Ok(Ok(Outcome::Ignored(why))) => {
                        tracing::info!(broadcast_id = %env.id, "broadcast ignored: {why}");
                        None
                    }
                    Ok(Err(why)) => Some((CODE_INVALID_BROADCAST.to_string(), why.to_string())),
                    Err(_) => None,
                }
            }
        };
        if let Some((code, why)) = problem {
            // Every worker process sees the same bad broadcast; the DLQ's
            // message id (stream + sequence) keeps one dead letter.
            if let Err(e) = dlq.dead_letter_message(&msg, &code, &why).await {
                tracing::error!(error = %e, "cannot dead-letter a broadcast");
            }
        }
        let _ = applied.send(seq);
    }
}
