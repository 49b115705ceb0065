//! Active/standby by a fenced lease: only the holder of a leader lock acts,
//! and it acts only while its lease is valid by its own clock.
//!
//! Each time an instance takes the lock it gets a fencing epoch from the
//! same script (monotonic, kept rising across a Redis that lost its data by
//! the floor the caller passes). The holder stamps its epoch on what it
//! writes; a writer that finds a higher epoch in durable state steps down.
//! The lease's validity is measured from the moment the acquire or renewal
//! was *sent*, minus a safety margin, so a process that was paused (SIGSTOP,
//! a long GC-like stall) sees its lease as expired when it wakes, before
//! Redis has told it anything. See docs/RELIABILITY.md.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::OwnedLock;
use crate::health::{self, Health};

/// A held leader lease: its epoch and whether it may still act.
#[derive(Clone, Debug)]
pub struct LeaderLease {
    inner: Arc<LeaseState>,
}

#[derive(Debug)]
struct LeaseState {
    epoch: AtomicU64,
    /// Acts only before this instant (send time of the last renewal + lease
    /// − margin).
    valid_until: Mutex<Instant>,
    lease: Duration,
    margin: Duration,
    /// Cancelled once the lease is lost or given up; never un-cancelled.
    lost: CancellationToken,
}

impl LeaderLease {
    pub(crate) fn new(epoch: u64, sent_at: Instant, lease: Duration) -> Self {
        let margin = safety_margin(lease);
        LeaderLease {
            inner: Arc::new(LeaseState {
                epoch: AtomicU64::new(epoch),
                valid_until: Mutex::new(sent_at + lease - margin),
                lease,
                margin,
                lost: CancellationToken::new(),
            }),
        }
    }

    /// The fencing epoch of this tenure.
    pub fn epoch(&self) -> u64 {
        self.inner.epoch.load(Ordering::SeqCst)
    }

    /// Whether the holder may act now: not stepped down and the lease
    /// (minus the safety margin) has not run out since the last renewal.
    pub fn is_valid(&self) -> bool {
        !self.inner.lost.is_cancelled() && Instant::now() < self.valid_until()
    }

    fn valid_until(&self) -> Instant {
        *self.inner.valid_until.lock().expect("lease clock")
    }

    pub(crate) fn renewed(&self, sent_at: Instant) {
        *self.inner.valid_until.lock().expect("lease clock") =
            sent_at + self.inner.lease - self.inner.margin;
    }

    /// Cancelled when the lease is lost or given up.
    pub fn lost(&self) -> &CancellationToken {
        &self.inner.lost
    }

    /// Gives the tenure up (e.g. a write found a higher epoch): everything
    /// that watches [`LeaderLease::lost`] stops.
    pub fn step_down(&self, why: &str) {
        if !self.inner.lost.is_cancelled() {
            tracing::warn!(epoch = self.epoch(), reason = why, "stepping down");
            self.inner.lost.cancel();
        }
    }

    /// Raises the epoch above `floor`, an epoch found in durable state that
    /// Redis no longer remembers. `false` (and the tenure is over) when the
    /// lock is no longer ours or Redis cannot be asked.
    pub async fn raise_above(&self, lock: &OwnedLock, floor: u64) -> bool {
        if floor < self.epoch() {
            return true;
        }
        match lock.raise_epoch(floor).await {
            Ok(Some(e)) => {
                self.inner.epoch.store(e, Ordering::SeqCst);
                true
            }
            Ok(None) => {
                self.step_down("lock taken by another instance while raising the epoch");
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot raise the fencing epoch");
                self.step_down("cannot raise the fencing epoch");
                false
            }
        }
    }
}

/// How long before the lease's end the holder stops acting: a fifth of the
/// lease, at least 50 ms (renewals come every third of the lease, so a live
/// holder never reaches it).
pub fn safety_margin(lease: Duration) -> Duration {
    (lease / 5).max(Duration::from_millis(50)).min(lease / 2)
}

/// Warnings repeated at most this often while Redis is unreachable.
const WARN_EVERY: Duration = Duration::from_secs(30);

/// Why [`health::LEADERSHIP`] is degraded while the lock cannot be taken.
pub const CANNOT_TAKE: &str = "Redis unreachable: cannot take the leader lock";
/// Why [`health::LEADERSHIP`] is degraded while the lease cannot be renewed.
pub const CANNOT_RENEW: &str = "Redis unreachable: cannot renew the leader lease";

/// Waits until this instance holds the lock (or shutdown: `None`). `floor`
/// is the highest epoch the caller knows of from durable state. `health`'s
/// [`health::LEADERSHIP`] is degraded ([`CANNOT_TAKE`]) while Redis cannot
/// be asked (or does not answer within `lease / 4`), fine otherwise.
pub async fn acquire(
    lock: &OwnedLock,
    lease: Duration,
    floor: u64,
    shutdown: &CancellationToken,
    health: &Health,
) -> Option<LeaderLease> {
    let mut logged_standby = false;
    let mut last_warn: Option<Instant> = None;
    loop {
        let sent_at = Instant::now();
        // A Redis that stopped answering (but keeps the socket) is an error
        // too; a holder that retries keeps its epoch, so giving up on an
        // answer that did arrive at Redis is harmless.
        let tried = tokio::time::timeout(lease / 4, lock.try_acquire_epoch(lease, floor))
            .await
            .unwrap_or_else(|_| {
                Err(crate::Error::pool(format!(
                    "no answer within {:?}",
                    lease / 4
                )))
            });
        // Poll every lease/4, but no later than the moment the holder's
        // lock runs out: a standby then takes over within `lease` of the
        // holder's last renewal, not up to a quarter lease after it.
        let mut pause = lease / 4;
        match tried {
            Ok(Some(epoch)) => {
                if last_warn.is_some() {
                    tracing::info!(lock = %lock.name(), "leader lock reachable again");
                }
                health.ok(health::LEADERSHIP);
                return Some(LeaderLease::new(epoch, sent_at, lease));
            }
            Ok(None) => {
                health.ok(health::LEADERSHIP);
                if let Ok(Ok(Some(left))) = tokio::time::timeout(lease / 4, lock.remaining()).await
                {
                    pause = pause.min(left + EXPIRY_MARGIN);
                }
                if !logged_standby {
                    tracing::info!(lock = %lock.name(), "another instance is active; standing by");
                    logged_standby = true;
                }
            }
            Err(e) => {
                health.degraded(health::LEADERSHIP, format!("{CANNOT_TAKE} ({e})"));
                if last_warn.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
                    tracing::warn!(lock = %lock.name(), error = %e, "leader lock unavailable (Redis unreachable?); retrying");
                    last_warn = Some(Instant::now());
                }
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => return None,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// How long after the holder's lock should have run out a standby tries:
/// Redis expires a key when it is next touched or by its expiry cycle, so
/// a try right at the expiry could still find it.
const EXPIRY_MARGIN: Duration = Duration::from_millis(5);

/// Renews the lease every `lease / 3` until it is lost (another holder, or
/// no renewal before the lease ran out) or shutdown, which releases it.
/// A lock that vanished (Redis lost its data) is not quietly re-taken: the
/// holder steps down and competes again, so the next tenure is fenced.
/// A renewal that fails (or gets no answer within `lease / 3`) degrades
/// `health`'s [`health::LEADERSHIP`] ([`CANNOT_RENEW`]) until one succeeds.
pub async fn keep(
    lock: OwnedLock,
    held: LeaderLease,
    lease: Duration,
    shutdown: CancellationToken,
    health: Health,
) {
    let period = lease / 3;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => {
                let _ = lock.release().await;
                return;
            }
            _ = held.lost().cancelled() => {
                let _ = lock.release().await;
                return;
            }
            _ = tokio::time::sleep(period) => {}
        }
        let sent_at = Instant::now();
        // No answer in time counts as a failed renewal (the lease is not
        // extended by our clock even if Redis did extend it).
        let extended = tokio::time::timeout(period, lock.extend(lease))
            .await
            .unwrap_or_else(|_| Err(crate::Error::pool(format!("no answer within {period:?}"))));
        match extended {
            Ok(true) => {
                held.renewed(sent_at);
                health.ok(health::LEADERSHIP);
            }
            Ok(false) => {
                held.step_down(
                    "leader lock lost (taken by another instance or Redis lost its data)",
                );
                return;
            }
            Err(e) => {
                health.degraded(health::LEADERSHIP, format!("{CANNOT_RENEW} ({e})"));
                if !held.is_valid() {
                    held.step_down("cannot renew the leader lock before the lease ran out");
                    return;
                }
                tracing::warn!(error = %e, "cannot renew leadership; retrying while the lease holds");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn margin_is_a_fifth_with_a_floor() {
        assert_eq!(
            safety_margin(Duration::from_secs(10)),
            Duration::from_secs(2)
        );
        assert_eq!(
            safety_margin(Duration::from_millis(100)),
            Duration::from_millis(50)
        );
        assert_eq!(
            safety_margin(Duration::from_millis(60)),
            Duration::from_millis(30)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn lease_expires_by_its_own_clock_and_renewal_extends_it() {
        let lease = Duration::from_secs(10);
        let l = LeaderLease::new(7, Instant::now(), lease);
        assert_eq!(l.epoch(), 7);
        assert!(l.is_valid());
        tokio::time::advance(Duration::from_millis(7_900)).await;
        assert!(l.is_valid());
        tokio::time::advance(Duration::from_millis(200)).await;
        assert!(!l.is_valid(), "past lease - margin");
        l.renewed(Instant::now());
        assert!(l.is_valid());
        l.step_down("test");
        assert!(!l.is_valid());
        assert!(l.lost().is_cancelled());
    }
}
