//! When an attempt says it started (`worker.started_delay`).
//!
//! Most tasks end within milliseconds, and their `completed` (or `failed`)
//! event carries `started_at`: the coordinator applies it as start and end
//! at once. A `started` event of its own would be a JetStream write, and a
//! record write, that says nothing the terminal event does not. So the
//! worker holds `started` back for `worker.started_delay` and publishes it
//! only for an attempt still running by then (one a person may watch run);
//! a zero delay publishes it before the handler runs, as a worker of the
//! wire contract's simplest form does.

use std::future::Future;
use std::time::Duration;

/// Runs `attempt`; if it is still running after `delay`, `announce` runs
/// alongside it, and both have finished when this returns, so an
/// announcement is stored before the attempt's outcome is reported.
/// An attempt that ends within `delay` is never announced.
pub(super) async fn announced_after<T>(
    delay: Duration,
    attempt: impl Future<Output = T>,
    announce: impl Future<Output = ()>,
) -> T {
    tokio::pin!(attempt);
    tokio::select! {
        // An attempt done at the same instant as the delay needs no
        // announcement.
        biased;
        r = &mut attempt => return r,
        _ = tokio::time::sleep(delay) => {}
    }
    let (r, ()) = tokio::join!(attempt, announce);
    r
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn an_attempt_that_ends_within_the_delay_is_never_announced() {
        let announced = AtomicBool::new(false);
        let r = announced_after(Duration::from_secs(3600), async { 7 }, async {
            announced.store(true, Ordering::SeqCst)
        })
        .await;
        assert_eq!(r, 7);
        assert!(!announced.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn an_attempt_still_running_at_the_delay_is_announced_while_it_runs() {
        // The attempt can only end once the announcement ran: it is
        // announced while the attempt is in progress, not after it.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let attempt = async move {
            rx.await.expect("announced");
            "done"
        };
        let announce = async move {
            tx.send(()).expect("attempt waiting");
        };
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            announced_after(Duration::from_millis(1), attempt, announce),
        )
        .await
        .expect("the attempt was announced and ended");
        assert_eq!(r, "done");
    }

    #[tokio::test]
    async fn a_slow_announcement_is_finished_before_the_outcome_is_returned() {
        // The attempt ends just after the announcement began; the
        // announcement (a JetStream publish awaiting its ack) takes longer.
        let begun = Arc::new(tokio::sync::Notify::new());
        let stored = Arc::new(AtomicBool::new(false));
        let attempt = {
            let begun = begun.clone();
            async move { begun.notified().await }
        };
        let announce = {
            let (begun, stored) = (begun.clone(), stored.clone());
            async move {
                begun.notify_one();
                for _ in 0..10 {
                    tokio::task::yield_now().await;
                }
                stored.store(true, Ordering::SeqCst);
            }
        };
        announced_after(Duration::from_millis(1), attempt, announce).await;
        assert!(
            stored.load(Ordering::SeqCst),
            "returned before the announcement was stored"
        );
    }
}
