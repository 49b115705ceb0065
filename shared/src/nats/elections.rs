//! Writes no stream answered. While a clustered stream elects a leader
//! (after the node that led it died: the RAFT election timeout, 4 to 9 s,
//! longer after a split vote) nothing in the cluster listens on its
//! subjects, and every write to it is answered at once with "no
//! responders", and so is a read (a KV create reads the key back when its
//! write failed). Nothing was stored, so the same write is safe to repeat
//! even when it is conditional (a create, an update at a revision); a
//! write that timed out is not, since it may have been stored.

use std::future::Future;
use std::time::Duration;

use async_nats::jetstream::context::{
    PublishError, PublishErrorKind, RequestError, RequestErrorKind,
};
use async_nats::jetstream::stream::{DirectGetError, DirectGetErrorKind};
use async_nats::StatusCode;
use backon::{ExponentialBuilder, Retryable};

/// Whether `e` (or an error it wraps) is a JetStream write or read that
/// no server answered ("no responders"), so nothing was stored.
pub fn unanswered(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(p) = err.downcast_ref::<PublishError>() {
            return p.kind() == PublishErrorKind::StreamNotFound;
        }
        if let Some(g) = err.downcast_ref::<DirectGetError>() {
            return matches!(g.kind(), DirectGetErrorKind::ErrorResponse(s, _) if s == StatusCode::NO_RESPONDERS);
        }
        if let Some(r) = err.downcast_ref::<RequestError>() {
            return r.kind() == RequestErrorKind::NoResponders;
        }
        cur = err.source();
    }
    false
}

/// Runs the write `op`, and runs it again while no stream answers it, for
/// up to `wait` of pauses in all (`nats.election_wait`; zero tries once).
/// Any other outcome is returned as it is.
pub async fn through_elections<T, E, F, Fut>(wait: Duration, op: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: std::error::Error + 'static,
{
    let schedule = ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(50))
        .with_factor(2.0)
        .with_max_delay(Duration::from_secs(1))
        .without_max_times()
        .with_total_delay(Some(wait))
        .with_jitter();
    op.retry(schedule)
        .when(|e| unanswered(e))
        // Debug: a submission step writes hundreds of records at once,
        // each retried several times; its outcome is what gets reported.
        .notify(|e, pause| {
            tracing::debug!(error = %e, ?pause, "no stream answered the write (electing its leader?); writing again")
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[derive(Debug, thiserror::Error)]
    #[error("wrapped: {0}")]
    struct Wrapped(#[source] PublishError);

    #[test]
    fn only_no_responders_counts_even_when_wrapped() {
        let none = Wrapped(PublishError::new(PublishErrorKind::StreamNotFound));
        assert!(unanswered(&none));
        let late = Wrapped(PublishError::new(PublishErrorKind::TimedOut));
        assert!(!unanswered(&late));
        assert!(!unanswered(&std::io::Error::other("x")));
        let read = DirectGetError::new(DirectGetErrorKind::ErrorResponse(
            StatusCode::NO_RESPONDERS,
            "no responders".into(),
        ));
        assert!(unanswered(&read));
        let missing = DirectGetError::new(DirectGetErrorKind::NotFound);
        assert!(!unanswered(&missing));
    }

    #[tokio::test(start_paused = true)]
    async fn unanswered_writes_repeat_within_the_wait_and_others_do_not() {
        let tries = AtomicU32::new(0);
        let r: Result<u32, Wrapped> = through_elections(Duration::from_secs(5), || async {
            match tries.fetch_add(1, Ordering::SeqCst) {
                0..=2 => Err(Wrapped(PublishError::new(PublishErrorKind::StreamNotFound))),
                n => Ok(n),
            }
        })
        .await;
        assert_eq!(r.unwrap(), 3);

        let tries = AtomicU32::new(0);
        let r: Result<(), Wrapped> = through_elections(Duration::from_secs(5), || async {
            tries.fetch_add(1, Ordering::SeqCst);
            Err(Wrapped(PublishError::new(PublishErrorKind::TimedOut)))
        })
        .await;
        assert!(r.is_err());
        assert_eq!(
            tries.load(Ordering::SeqCst),
            1,
            "a timed-out write may be stored"
        );

        let started = tokio::time::Instant::now();
        let r: Result<(), Wrapped> = through_elections(Duration::from_secs(5), || async {
            Err(Wrapped(PublishError::new(PublishErrorKind::StreamNotFound)))
        })
        .await;
        assert!(r.is_err());
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(3) && took <= Duration::from_secs(5),
            "gave up after {took:?}"
        );

        let tries = AtomicU32::new(0);
        let _: Result<(), Wrapped> = through_elections(Duration::ZERO, || async {
            tries.fetch_add(1, Ordering::SeqCst);
            Err(Wrapped(PublishError::new(PublishErrorKind::StreamNotFound)))
        })
        .await;
        assert_eq!(tries.load(Ordering::SeqCst), 1);
    }
}
