//! Active/standby by an owner-token lock: only the holder acts. A standby
//! polls for the lock; a leader that cannot renew it steps down at once (its
//! replacement rebuilds from durable state). Used by the coordinator and the
//! correlator, each with its own lock name.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::OwnedLock;

/// Waits until this instance holds the lock (or shutdown).
pub async fn acquire(lock: &OwnedLock, lease: Duration, shutdown: &CancellationToken) -> bool {
    let mut logged = false;
    loop {
        match lock.try_acquire(lease).await {
            Ok(true) => return true,
            Ok(false) => {
                if !logged {
                    tracing::info!(lock = %lock.name(), "another instance is active; standing by");
                    logged = true;
                }
            }
            Err(e) => tracing::warn!(error = %e, "leader lock unavailable"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return false,
            _ = tokio::time::sleep(lease / 4) => {}
        }
    }
}

/// Renews the lock every `lease / 3`; cancels `lost` when it cannot.
pub async fn keep(
    lock: OwnedLock,
    lease: Duration,
    lost: CancellationToken,
    shutdown: CancellationToken,
) {
    let mut failures = 0u32;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => {
                let _ = lock.release().await;
                return;
            }
            _ = tokio::time::sleep(lease / 3) => {}
        }
        match lock.extend(lease).await {
            Ok(true) => failures = 0,
            Ok(false) => {
                // Redis may have restarted empty: the lock is simply gone.
                if matches!(lock.try_acquire(lease).await, Ok(true)) {
                    tracing::warn!("leader lock had vanished (Redis restarted?); re-taken");
                    continue;
                }
                tracing::error!(lock = %lock.name(), "leadership lost to another instance");
                lost.cancel();
                return;
            }
            Err(e) => {
                // Redis briefly away: keep going while the lease may still hold.
                failures += 1;
                tracing::warn!(error = %e, failures, "cannot renew leadership");
                if failures >= 2 {
                    // Re-take it if Redis came back empty; else step down.
                    if !matches!(lock.try_acquire(lease).await, Ok(true)) {
                        lost.cancel();
                        return;
                    }
                    failures = 0;
                }
            }
        }
    }
}
