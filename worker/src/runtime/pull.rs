//! The pulls of one agent type's slots in a worker process: one inbox
//! subscription, and one pull request for as many tasks as slots wait.
//!
//! `PullConsumer::fetch` subscribes a fresh inbox per call and asks for its
//! messages with a request of its own: with one message per slot that was
//! a subscribe, a pull request and an unsubscribe on the server for every
//! task. Here a slot that holds a lease and wants work registers as a
//! waiter; the [`Puller`]'s loop asks the server for as many messages as
//! there are waiters not yet covered by a request still open, and hands
//! each message to the oldest waiter.
//!
//! Only slots under a lease wait, so no more tasks are asked for than there
//! are leased slots to run them. A waiter that leaves before its task
//! arrives (its lease went bad, shutdown, its wait ran out) can leave one
//! surplus message behind: no other waiter takes it, so it is handed back
//! at once (nak) for any worker's leased slot, never held.
//!
//! The server answers every request with its messages and, for the part it
//! could not fill within the request's expiry, one time-out status; it
//! serves open requests oldest first, so each answer is counted against the
//! oldest open request. A request whose answer never came is forgotten a
//! little after its expiry, so a lost reply costs at most one expiry.

use std::collections::VecDeque;
use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull::BatchConfig, consumer::PullConsumer, AckKind};
use async_nats::{StatusCode, Subject};
use futures::StreamExt;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How long after its expiry an unanswered request is forgotten.
const FORGET_AFTER: Duration = Duration::from_secs(1);
/// The largest batch one request asks for.
const MAX_BATCH: usize = 256;

/// Why a wait for a task ended without one.
#[derive(Debug, thiserror::Error)]
pub(super) enum PullError {
    #[error("the agent type's puller stopped (shutdown, or its pull request failed)")]
    Stopped,
}

/// A waiting slot: where its task goes.
type Waiter = oneshot::Sender<jetstream::Message>;

/// Handle to one agent type's pulls (cheap to clone, one per slot).
#[derive(Clone)]
pub(super) struct Puller {
    waiters: mpsc::UnboundedSender<Waiter>,
}

impl Puller {
    /// Subscribes the inbox and starts the loop on `tasks`; it ends on
    /// `shutdown`.
    pub(super) async fn start(
        js: &jetstream::Context,
        consumer: &PullConsumer,
        agent_type: &str,
        expires: Duration,
        shutdown: CancellationToken,
        tasks: &caucus_shared::service::Tasks,
    ) -> Result<Puller, async_nats::SubscribeError> {
        let client = js.client();
        let inbox = Subject::from(client.new_inbox());
        let replies = client.subscribe(inbox.clone()).await?;
        let (tx, rx) = mpsc::unbounded_channel();
        let pulls = Pulls {
            js: js.clone(),
            consumer: consumer.clone(),
            agent_type: agent_type.to_string(),
            inbox,
            expires,
            waiting: VecDeque::new(),
            open: VecDeque::new(),
        };
        tasks.spawn_named("puller", pulls.run(replies, rx, shutdown));
        Ok(Puller { waiters: tx })
    }

    /// The next task for a slot under a lease, waiting up to `wait`;
    /// `Ok(None)` when none came (the slot is idle).
    pub(super) async fn next(
        &self,
        wait: Duration,
    ) -> Result<Option<jetstream::Message>, PullError> {
        let (tx, rx) = oneshot::channel();
        self.waiters.send(tx).map_err(|_| PullError::Stopped)?;
        match tokio::time::timeout(wait, rx).await {
            Ok(Ok(msg)) => Ok(Some(msg)),
            Ok(Err(_)) => Err(PullError::Stopped),
            Err(_) => Ok(None),
        }
    }
}

/// An open pull request: how many messages it may still bring, and until
/// when the server keeps it.
struct Open {
    remaining: usize,
    expires_at: Instant,
}

/// The loop's state.
struct Pulls {
    js: jetstream::Context,
    consumer: PullConsumer,
    agent_type: String,
    inbox: Subject,
    expires: Duration,
    /// Slots waiting for a task, oldest first.
    waiting: VecDeque<Waiter>,
    /// Requests the server may still answer, oldest first.
    open: VecDeque<Open>,
}

impl Pulls {
    async fn run(
        mut self,
        mut replies: async_nats::Subscriber,
        mut waiters: mpsc::UnboundedReceiver<Waiter>,
        shutdown: CancellationToken,
    ) {
        loop {
            let forget_at = self.open.front().map(|o| o.expires_at + FORGET_AFTER);
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                reply = replies.next() => match reply {
                    Some(m) => self.answer(m).await,
                    None => break,
                },
                w = waiters.recv() => match w {
                    Some(w) => {
                        self.waiting.push_back(w);
                        // Everyone waiting now goes into one request.
                        while let Ok(w) = waiters.try_recv() {
                            self.waiting.push_back(w);
                        }
                    }
                    None => break,
                },
                _ = sleep_until(forget_at) => {
                    let now = Instant::now();
                    self.open.retain(|o| o.expires_at + FORGET_AFTER > now);
                }
            }
            if let Err(e) = self.request().await {
                tracing::warn!(agent_type = %self.agent_type, error = %e, "pull request failed");
                // The waiters' slots go back to taking a lease and retry.
                self.waiting.clear();
            }
        }
        // Dropping the subscription unsubscribes: a task still on its way
        // is redelivered after ack_wait, as with a dropped fetch.
    }

    /// Asks for the waiters no open request covers.
    async fn request(&mut self) -> Result<(), jetstream::consumer::pull::BatchRequestError> {
        self.waiting.retain(|w| !w.is_closed());
        let covered: usize = self.open.iter().map(|o| o.remaining).sum();
        let wanted = self.waiting.len().saturating_sub(covered).min(MAX_BATCH);
        if wanted == 0 {
            return Ok(());
        }
        let request = BatchConfig {
            batch: wanted,
            expires: Some(self.expires),
            ..Default::default()
        };
        self.consumer
            .request_batch(request, self.inbox.clone())
            .await?;
        self.open.push_back(Open {
            remaining: wanted,
            expires_at: Instant::now() + self.expires,
        });
        Ok(())
    }

    /// One reply on the inbox: a task for the oldest waiter, or the end of
    /// the oldest open request.
    async fn answer(&mut self, reply: async_nats::Message) {
        match reply.status.unwrap_or(StatusCode::OK) {
            StatusCode::OK => {
                if let Some(o) = self.open.front_mut() {
                    o.remaining = o.remaining.saturating_sub(1);
                    if o.remaining == 0 {
                        self.open.pop_front();
                    }
                }
                let mut msg = jetstream::Message {
                    context: self.js.clone(),
                    message: reply,
                };
                while let Some(w) = self.waiting.pop_front() {
                    match w.send(msg) {
                        Ok(()) => return,
                        Err(back) => msg = back,
                    }
                }
                // Its slot left meanwhile: hand it back for a leased slot.
                if let Err(e) = msg.ack_with(AckKind::Nak(None)).await {
                    tracing::debug!(agent_type = %self.agent_type, error = %e, "surplus task not handed back; redelivered after ack_wait");
                }
            }
            StatusCode::IDLE_HEARTBEAT => {}
            status => {
                // Expired (408), nothing there (404), or refused (409, e.g.
                // a leadership change): either way the request is over.
                self.open.pop_front();
                if status != StatusCode::TIMEOUT && status != StatusCode::NOT_FOUND {
                    tracing::warn!(agent_type = %self.agent_type, %status,
                        description = reply.description.as_deref().unwrap_or(""),
                        "pull request ended by the server");
                }
            }
        }
    }
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_nats::jetstream::consumer::{pull, AckPolicy};
    use async_nats::jetstream::stream;

    const EXPIRES: Duration = Duration::from_millis(300);

    struct Setup {
        _nats: caucus_harness::Nats,
        js: jetstream::Context,
        consumer: PullConsumer,
        puller: Puller,
        shutdown: CancellationToken,
    }

    async fn setup() -> Setup {
        let nats = caucus_harness::Nats::start();
        let client = async_nats::connect(nats.url()).await.unwrap();
        let js = jetstream::new(client);
        let s = js
            .create_stream(stream::Config {
                name: "T".into(),
                subjects: vec!["t".into()],
                retention: stream::RetentionPolicy::WorkQueue,
                ..Default::default()
            })
            .await
            .unwrap();
        let consumer: PullConsumer = s
            .create_consumer(pull::Config {
                durable_name: Some("w".into()),
                ack_policy: AckPolicy::Explicit,
                ..Default::default()
            })
            .await
            .unwrap();
        let shutdown = CancellationToken::new();
        let tasks = caucus_shared::service::Tasks::new(caucus_shared::health::Health::default());
        let puller = Puller::start(&js, &consumer, "t", EXPIRES, shutdown.clone(), &tasks)
            .await
            .unwrap();
        Setup {
            _nats: nats,
            js,
            consumer,
            puller,
            shutdown,
        }
    }

    impl Setup {
        async fn publish(&self, n: usize) {
            for i in 0..n {
                self.js
                    .publish("t", format!("{i}").into())
                    .await
                    .unwrap()
                    .await
                    .unwrap();
            }
        }

        /// (delivered but unacked, not yet delivered)
        async fn counts(&mut self) -> (usize, u64) {
            let info = self.consumer.info().await.unwrap();
            (info.num_ack_pending, info.num_pending)
        }
    }

    #[tokio::test]
    async fn asks_for_no_more_tasks_than_slots_wait_and_each_waiter_gets_its_own() {
        let mut s = setup().await;
        s.publish(5).await;
        let waits = (0..3).map(|_| s.puller.next(Duration::from_secs(5)));
        let got = futures::future::join_all(waits).await;
        let mut bodies: Vec<String> = got
            .into_iter()
            .map(|m| String::from_utf8(m.unwrap().unwrap().payload.to_vec()).unwrap())
            .collect();
        bodies.sort();
        bodies.dedup();
        assert_eq!(bodies.len(), 3, "three distinct tasks: {bodies:?}");
        // Nobody else waits: the other two stay in the stream.
        assert_eq!(s.counts().await, (3, 2));
        let m = s.puller.next(Duration::from_secs(5)).await.unwrap();
        assert!(m.is_some());
        assert_eq!(s.counts().await, (4, 1));
        s.shutdown.cancel();
    }

    #[tokio::test]
    async fn an_idle_waiter_gets_none_and_a_task_that_arrives_without_one_stays_queued() {
        let mut s = setup().await;
        let idle = s.puller.next(Duration::from_millis(100)).await.unwrap();
        assert!(idle.is_none());
        // Past the open request's expiry, a new task waits in the stream
        // (a surplus delivery would show as ack-pending or redelivered).
        tokio::time::sleep(EXPIRES + Duration::from_millis(200)).await;
        s.publish(1).await;
        let deadline = Instant::now() + Duration::from_secs(2);
        while s.counts().await != (0, 1) {
            assert!(Instant::now() < deadline, "{:?}", s.counts().await);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let m = s
            .puller
            .next(Duration::from_secs(5))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(m.info().unwrap().delivered, 1, "never delivered before");
        s.shutdown.cancel();
    }

    #[tokio::test]
    async fn a_task_whose_waiter_left_is_handed_back_at_once() {
        let mut s = setup().await;
        // The waiter leaves while its request is still open on the server.
        let idle = s.puller.next(Duration::from_millis(50)).await.unwrap();
        assert!(idle.is_none());
        s.publish(1).await;
        // Delivered to the open request, found without a waiter, nak'd:
        // a new waiter gets it long before ack_wait (30 s here) would
        // have redelivered it.
        let deadline = Instant::now() + Duration::from_secs(5);
        while s.consumer.info().await.unwrap().delivered.stream_sequence == 0 {
            assert!(Instant::now() < deadline, "the open request took nothing");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let m = s.puller.next(Duration::from_secs(3)).await.unwrap();
        let m = m.expect("handed back, not held until ack_wait");
        assert_eq!(m.info().unwrap().delivered, 2, "handed back once");
        s.shutdown.cancel();
    }
}
