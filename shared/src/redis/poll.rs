//! Polling Redis until a condition holds or a deadline passes, on a
//! `backon` schedule (the lock's acquire, the sync gate's wait).

use std::future::Future;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use tokio::time::Instant;

use crate::Error;

/// A poll that did not succeed: not yet (poll again), or Redis failed
/// (stop at once).
enum Miss {
    NotYet,
    Failed(Error),
}

/// Pauses doubling from `min` up to `max`, optionally with jitter (so
/// contenders that started together do not poll in lockstep).
pub(crate) fn schedule(min: Duration, max: Duration, jitter: bool) -> ExponentialBuilder {
    let b = ExponentialBuilder::default()
        .with_min_delay(min)
        .with_factor(2.0)
        .with_max_delay(max)
        .without_max_times();
    if jitter {
        b.with_jitter()
    } else {
        b
    }
}

/// Runs `probe` until it answers `true` (`Ok(true)`), `deadline` passes
/// (`Ok(false)`; the last pause is cut to end at the deadline, where one
/// last probe runs) or it fails (`Err`). At least one probe runs, even
/// past the deadline.
pub(crate) async fn until<F, Fut>(
    deadline: Instant,
    schedule: ExponentialBuilder,
    mut probe: F,
) -> Result<bool, Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<bool, Error>>,
{
    let once = || {
        let answer = probe();
        async move {
            match answer.await {
                Ok(true) => Ok(()),
                Ok(false) => Err(Miss::NotYet),
                Err(e) => Err(Miss::Failed(e)),
            }
        }
    };
    let outcome = once
        .retry(schedule)
        .when(|m| matches!(m, Miss::NotYet))
        .adjust(|_, pause| {
            let now = Instant::now();
            (now < deadline).then(|| pause.map(|p| p.min(deadline - now)))?
        })
        .await;
    match outcome {
        Ok(()) => Ok(true),
        Err(Miss::NotYet) => Ok(false),
        Err(Miss::Failed(e)) => Err(e),
    }
}
