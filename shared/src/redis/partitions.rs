//! Dividing `count` partitions among the live members of a group, each
//! partition held under its own fenced lease.
//!
//! Every member runs [`divide`]. It keeps the member registered (a
//! [`BoundedCounter`] entry that lapses one lease after the member's last
//! heartbeat) and computes, from the sorted list of live members, each
//! partition's *target*: member `p % n`. A member takes the free partitions
//! it is the target of, renews what it holds, and gives up a partition whose
//! target is another live member (one that joined). Nobody takes a
//! partition it is not the target of, so a handover never ping-pongs; a dead
//! member's entry lapses with its locks, and its partitions become the
//! survivors' targets.
//!
//! Each partition is an [`OwnedLock`] with a fencing epoch, exactly like
//! the single leader lock ([`super::leadership`]): the holder gets a
//! [`Tenure`] with a [`LeaderLease`] that is valid only while renewals
//! succeed (by the holder's own clock, minus the safety margin). Giving a
//! partition up ends the lease first and releases the lock only once the
//! holder has dropped the tenure: the next holder cannot start before the
//! previous one stopped acting.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::leadership::LeaderLease;
use super::{BoundedCounter, OwnedLock, RedisPool};
use crate::health::{self, Health};
use crate::Error;

/// Most members one group counts; more are refused registration.
pub const MAX_MEMBERS: u32 = 1_024;

/// How long after a lock should have run out a member tries it (see
/// [`super::leadership`]: Redis expires keys lazily).
const EXPIRY_MARGIN: Duration = Duration::from_millis(5);

/// How soon a member looks again at a partition whose lock is free but
/// whose target member is still registered.
const FREED_RECHECK: Duration = Duration::from_millis(50);

/// Warnings repeated at most this often while Redis is unreachable.
const WARN_EVERY: Duration = Duration::from_secs(30);

/// What [`divide`] divides.
#[derive(Debug, Clone)]
pub struct PartitionPlan {
    /// The group's name (its member set is `prefix:{queue:<group>}:members`).
    pub group: String,
    /// One lock name per partition, partition `p` at index `p`.
    pub locks: Vec<String>,
    /// The lease of each partition and of a member's registration.
    pub lease: Duration,
}

/// A partition held by this member. Hold it for the whole time the
/// partition is served and drop it once serving stopped: its lock is
/// released only then.
#[derive(Debug)]
pub struct Tenure {
    partition: u32,
    lease: LeaderLease,
    lock: OwnedLock,
    _held: oneshot::Sender<()>,
}

impl Tenure {
    /// The partition's index.
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// The fenced lease: act only while it is valid; it is cancelled when
    /// the partition is lost or given up.
    pub fn lease(&self) -> &LeaderLease {
        &self.lease
    }

    /// The partition's lock (to raise the epoch, or read its holder).
    pub fn lock(&self) -> &OwnedLock {
        &self.lock
    }

    /// Raises the epoch above `floor`, an epoch found in durable state (see
    /// [`LeaderLease::raise_above`]).
    pub async fn raise_above(&self, floor: u64) -> bool {
        self.lease.raise_above(&self.lock, floor).await
    }
}

/// A partition this member holds, as [`divide`] tracks it.
struct Held {
    lease: LeaderLease,
    lock: OwnedLock,
    /// Resolves once the holder dropped its [`Tenure`].
    dropped: oneshot::Receiver<()>,
}

/// The member at `p % n` of the sorted live `members`.
pub fn target(members: &[String], p: u32) -> Option<&str> {
    if members.is_empty() {
        return None;
    }
    members.get(p as usize % members.len()).map(String::as_str)
}

/// Serves `plan` as member `token` until `shutdown`: hands every partition
/// it takes to `grants` as a [`Tenure`], and on shutdown ends every lease,
/// waits for the tenures to be dropped, releases the locks and leaves the
/// group (so the others take over at once, not after a lease). `health`'s
/// [`health::LEADERSHIP`] is degraded while Redis cannot be asked.
pub async fn divide(
    pool: RedisPool,
    prefix: &str,
    token: &str,
    plan: PartitionPlan,
    grants: mpsc::Sender<Tenure>,
    shutdown: CancellationToken,
    health: Health,
) -> Result<(), Error> {
    let members = BoundedCounter::new(pool.clone(), prefix)?;
    let locks = plan
        .locks
        .iter()
        .map(|name| OwnedLock::new(pool.clone(), prefix, name, token))
        .collect::<Result<Vec<_>, _>>()?;
    let lease = plan.lease;
    let ask = lease / 4;
    let mut held: BTreeMap<u32, Held> = BTreeMap::new();
    // The highest epoch seen per partition: a holder that raised its epoch
    // above durable state leaves the next tenure of this member a floor.
    let mut floors: BTreeMap<u32, u64> = BTreeMap::new();
    let mut last_warn: Option<Instant> = None;
    let mut served = true;
    while served {
        let round = Instant::now();
        // Registration first: it then lapses no later than the locks
        // renewed below, so survivors see the member gone by the time its
        // partitions are free.
        let live = tokio::time::timeout(ask, async {
            members
                .try_add(&plan.group, token, MAX_MEMBERS, lease)
                .await?;
            members.members(&plan.group).await
        })
        .await
        .unwrap_or_else(|_| Err(Error::pool(format!("no answer within {ask:?}"))));
        renew(&held, lease, ask).await;
        release_dropped(&mut held, &mut floors).await;
        let mut wake = ask;
        match live {
            Ok(mut live) => {
                if last_warn.take().is_some() {
                    tracing::info!(group = %plan.group, "partition leases reachable again");
                }
                health.ok(health::LEADERSHIP);
                live.sort();
                let (mut take, mut watch) = (Vec::new(), Vec::new());
                for p in 0..locks.len() as u32 {
                    let mine = target(&live, p) == Some(token);
                    match held.get(&p) {
                        Some(h) if !mine && !h.lease.lost().is_cancelled() => {
                            tracing::info!(partition = p, to = ?target(&live, p), "handing the partition over");
                            h.lease
                                .step_down("partition handed over to a member that joined");
                        }
                        Some(_) => {}
                        None if mine => take.push(p),
                        // Another member's target: if its holder went
                        // silent, its lock lapses and the member with it;
                        // look again then.
                        None => watch.push(p),
                    }
                }
                // Every partition at once: a Redis master that stalls (a
                // failover) delays only the partitions whose keys it holds.
                let tries = take.iter().map(|&p| {
                    let lock = &locks[p as usize];
                    let floor = floors.get(&p).copied().unwrap_or(0);
                    async move {
                        let sent_at = Instant::now();
                        let got = tokio::time::timeout(ask, lock.try_acquire_epoch(lease, floor))
                            .await
                            .ok()
                            .and_then(Result::ok);
                        // Held by its last holder still: try right after
                        // its lock runs out. The locks of one dead holder
                        // run out milliseconds apart, and one that ran out
                        // between the two calls reads as free: try it
                        // again at once, not a whole round (`ask`) later.
                        let left = match got {
                            Some(None) => Some(remaining(lock, ask).await.unwrap_or_default()),
                            _ => None,
                        };
                        (p, sent_at, got.flatten(), left)
                    }
                });
                let looks = watch.iter().map(|&p| remaining(&locks[p as usize], ask));
                let (tried, looked) = tokio::join!(
                    futures::future::join_all(tries),
                    futures::future::join_all(looks)
                );
                // A free lock whose target is still registered: its
                // holder died, and the registration read above (tens of
                // ms before the lock) lapses with its locks. Look again
                // shortly, not a whole round (`ask`) later.
                for left in looked {
                    wake = wake.min(left.map_or(FREED_RECHECK, |l| l + EXPIRY_MARGIN));
                }
                for (p, sent_at, epoch, left) in tried {
                    if let Some(left) = left {
                        wake = wake.min(left + EXPIRY_MARGIN);
                    }
                    let Some(epoch) = epoch else { continue };
                    let lock = &locks[p as usize];
                    let lease = LeaderLease::new(epoch, sent_at, lease);
                    let (tx, rx) = oneshot::channel();
                    let tenure = Tenure {
                        partition: p,
                        lease: lease.clone(),
                        lock: lock.clone(),
                        _held: tx,
                    };
                    tracing::info!(partition = p, epoch, "partition taken");
                    held.insert(
                        p,
                        Held {
                            lease,
                            lock: lock.clone(),
                            dropped: rx,
                        },
                    );
                    if grants.send(tenure).await.is_err() {
                        // Nobody serves partitions any more.
                        served = false;
                        break;
                    }
                }
            }
            Err(e) => {
                health.degraded(
                    health::LEADERSHIP,
                    format!("Redis unreachable: cannot divide the partitions ({e})"),
                );
                if last_warn.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
                    tracing::warn!(group = %plan.group, error = %e, "partition leases unavailable (Redis unreachable?); retrying");
                    last_warn = Some(Instant::now());
                }
            }
        }
        if !served {
            break;
        }
        // Renewals must come every lease/4 whatever the round found.
        let next = round + wake.min(ask);
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep_until(next) => {}
            // A holder dropped its tenure (its term ended): release now.
            _ = any_dropped(&mut held) => {}
        }
    }
    leave(&members, &plan.group, token, held).await;
    Ok(())
}

/// Renews every held lease, all at once; a lease that cannot be renewed
/// before it runs out is given up.
async fn renew(held: &BTreeMap<u32, Held>, lease: Duration, ask: Duration) {
    let calls = held
        .iter()
        .filter(|(_, h)| !h.lease.lost().is_cancelled())
        .map(|(p, h)| async move {
            let sent_at = Instant::now();
            let r = tokio::time::timeout(ask, h.lock.extend(lease)).await;
            (*p, h, sent_at, r)
        });
    for (p, h, sent_at, r) in futures::future::join_all(calls).await {
        match r {
            Ok(Ok(true)) => h.lease.renewed(sent_at),
            Ok(Ok(false)) => {
                tracing::warn!(partition = p, "partition lock lost");
                h.lease.step_down(
                    "partition lock lost (taken by another member or Redis lost its data)",
                );
            }
            Ok(Err(_)) | Err(_) => {
                if !h.lease.is_valid() {
                    h.lease
                        .step_down("cannot renew the partition lock before the lease ran out");
                }
            }
        }
    }
}

/// How long `lock` is still held; `None` when free or unknown.
async fn remaining(lock: &OwnedLock, ask: Duration) -> Option<Duration> {
    tokio::time::timeout(ask, lock.remaining())
        .await
        .ok()
        .and_then(Result::ok)
        .flatten()
}

/// Releases the locks whose tenure was dropped, keeping their epochs as
/// floors.
async fn release_dropped(held: &mut BTreeMap<u32, Held>, floors: &mut BTreeMap<u32, u64>) {
    let mut done = Vec::new();
    for (p, h) in held.iter_mut() {
        // Nothing is ever sent: `Closed` means the tenure was dropped.
        if !matches!(
            h.dropped.try_recv(),
            Err(oneshot::error::TryRecvError::Empty)
        ) {
            done.push(*p);
        }
    }
    for p in done {
        let h = held.remove(&p).expect("held");
        h.lease.step_down("partition no longer served");
        let floor = floors.entry(p).or_default();
        *floor = (*floor).max(h.lease.epoch());
        if let Err(e) = h.lock.release().await {
            tracing::warn!(partition = p, error = %e, "cannot release the partition lock; it lapses after the lease");
        }
    }
}

/// Resolves when any held tenure has been dropped (never when none is held).
async fn any_dropped(held: &mut BTreeMap<u32, Held>) {
    if held.is_empty() {
        return std::future::pending().await;
    }
    let waits = held.values_mut().map(|h| &mut h.dropped);
    let _ = futures::future::select_all(waits).await;
}

/// Shutdown: ends every lease, waits until the holders dropped their
/// tenures, releases the locks and leaves the group.
async fn leave(members: &BoundedCounter, group: &str, token: &str, held: BTreeMap<u32, Held>) {
    for h in held.values() {
        h.lease.step_down("shutting down");
    }
    for (p, h) in held {
        let _ = h.dropped.await;
        if let Err(e) = h.lock.release().await {
            tracing::warn!(partition = p, error = %e, "cannot release the partition lock at shutdown; it lapses after the lease");
        }
    }
    if let Err(e) = members.remove(group, token).await {
        tracing::warn!(group, error = %e, "cannot leave the partition group; the entry lapses after the lease");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_go_round_the_sorted_members() {
        let m: Vec<String> = ["a", "b"].iter().map(|s| s.to_string()).collect();
        let t: Vec<&str> = (0..8).map(|p| target(&m, p).unwrap()).collect();
        assert_eq!(t, ["a", "b", "a", "b", "a", "b", "a", "b"]);
        assert_eq!(target(&[], 3), None);
        let one = vec!["z".to_string()];
        assert!((0..8).all(|p| target(&one, p) == Some("z")));
    }
}
