//! Active/standby by the Redis lock `correlator-leader` (same scheme as the
//! coordinator): a standby polls for the lock; a leader that cannot renew it
//! steps down at once. Leadership is an optimisation, not the safety net:
//! every side effect is idempotent by id (see [`crate::effects`]), so two
//! instances that briefly both believe they lead still publish each
//! correlation, trigger and card once.

use std::time::Duration;

use caucus_shared::redis::OwnedLock;
use tokio_util::sync::CancellationToken;

/// Name of the leadership lock.
pub const LEADER_LOCK: &str = "correlator-leader";

/// Waits until this instance holds the lock; false on shutdown.
pub async fn acquire(lock: &OwnedLock, lease: Duration, shutdown: &CancellationToken) -> bool {
    let mut logged = false;
    loop {
        match lock.try_acquire(lease).await {
            Ok(true) => return true,
            Ok(false) => {
                if !logged {
                    tracing::info!("another correlator is active; standing by");
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

/// Renews the lock every `lease / 3`; cancels `lost` when it cannot, and
/// releases it on shutdown.
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
                tracing::error!("leadership lost to another correlator");
                lost.cancel();
                return;
            }
            Err(e) => {
                failures += 1;
                tracing::warn!(error = %e, failures, "cannot renew leadership");
                if failures >= 2 {
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
