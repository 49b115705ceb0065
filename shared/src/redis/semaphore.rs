//! Cluster-wide capacity per agent type: a counting semaphore with leases.
//!
//! Workers register their slots and renew the registration (heartbeat);
//! capacity is the sum of live workers' slots, optionally capped. Task
//! runners take a lease per running task and renew it while they work. A
//! killed worker stops renewing, so within one lease period its leases expire
//! and are reclaimed by the next acquire, and its registration lapses and the
//! capacity drops.
//!
//! If Redis loses its data (FLUSHALL, a restart without persistence), the
//! leases of tasks still running vanish with it. The semaphore's *epoch* key
//! (see `sem_prelude.lua`) tells: the first script that finds it missing
//! starts a new epoch with a recovery window of one lease period, in which
//! no new lease is granted, while a holder's renewal that finds its lease
//! missing *because of the loss* (granted in an earlier epoch) re-creates it
//! instead of giving it up. A holder that cannot renew stops its task within
//! one lease period of its last confirmed renewal, so by the end of the
//! window every task still running holds a lease again and capacity counts
//! them all. Heartbeats re-register the workers (and their owners re-set the
//! cap) meanwhile.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::keys::{self, SemaphoreKeys};
use super::scan;
use super::scripts::{self, check_id, run, ttl_ms};
use super::RedisPool;
use crate::Error;

/// A granted slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The agent type whose capacity this lease counts against.
    pub agent_type: String,
    /// Who holds it (unique per running task).
    pub holder_id: String,
    /// When it expires unless renewed, in Redis server time (Unix ms), as of
    /// the grant (or of the last [`CapacitySemaphore::renew_lease`]).
    pub expires_at_ms: i64,
    /// The data epoch it was granted (or last renewed) in: a renewal in a
    /// later epoch, during its recovery window, re-creates a lease that a
    /// data loss erased.
    #[serde(default)]
    pub epoch: String,
}

/// What [`CapacitySemaphore::acquire`] answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// A slot is the caller's.
    Granted(Lease),
    /// Every slot is taken (or no worker is registered).
    Full,
    /// Redis lost its data a moment ago: no lease is granted until the
    /// recovery window ends, in this many ms.
    Recovering {
        /// Time left in the window (server clock).
        remaining_ms: u64,
    },
}

/// What [`CapacitySemaphore::renew_lease`] answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewed {
    /// The lease was live and is extended.
    Extended,
    /// Redis lost its data since the lease was granted; the lease was
    /// re-created (re-registered) within the recovery window.
    Recreated,
    /// The lease expired or was removed: its slot may be someone else's.
    Gone,
}

/// One live worker registration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerSlot {
    /// The worker's id.
    pub worker_id: String,
    /// Slots it contributes.
    pub slots: u32,
    /// When the registration lapses unless renewed (server Unix ms).
    pub expires_at_ms: i64,
}

/// A consistent snapshot of one semaphore (one server instant).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SemaphoreStatus {
    /// Effective capacity: live workers' slots, capped.
    pub capacity: u32,
    /// The cap, if one is set.
    pub cap: Option<u32>,
    /// Live leases.
    pub in_use: u32,
    /// Live leases as (holder id, expiry server Unix ms), soonest first.
    pub holders: Vec<(String, i64)>,
    /// Live worker registrations, soonest expiry first.
    pub workers: Vec<WorkerSlot>,
    /// The data epoch; `None` when Redis holds none (never used, or the data
    /// was lost: the next worker contact starts one, with a recovery window).
    pub epoch: Option<String>,
    /// Time left in the recovery window after a data loss, ms (0 = none).
    pub recovering_ms: u64,
}

/// The capacity semaphore of one agent type.
#[derive(Clone)]
pub struct CapacitySemaphore {
    pool: RedisPool,
    agent_type: String,
    keys: SemaphoreKeys,
    /// Recovery window after a data loss; `None` = the ttl of the call
    /// that notices the loss.
    recovery_grace: Option<Duration>,
}

impl std::fmt::Debug for CapacitySemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapacitySemaphore")
            .field("agent_type", &self.agent_type)
            .field("keys", &self.keys)
            .field("recovery_grace", &self.recovery_grace)
            .finish_non_exhaustive()
    }
}

impl CapacitySemaphore {
    /// The semaphore of `agent_type` under key prefix `prefix` (the config's
    /// `subject_prefix`). Both must match `[A-Za-z0-9_.:-]+`, else
    /// [`Error::InvalidName`].
    pub fn new(pool: RedisPool, prefix: &str, agent_type: &str) -> Result<Self, Error> {
        Ok(CapacitySemaphore {
            keys: SemaphoreKeys::new(prefix, agent_type)?,
            pool,
            agent_type: agent_type.to_string(),
            recovery_grace: None,
        })
    }

    /// Sets the recovery window that starts when a script finds Redis lost
    /// the semaphore's data (default: the ttl passed to the call that
    /// notices it, which for workers is their `lease_ttl`). It must be at
    /// least the longest lease ttl any holder uses, or a holder that cannot
    /// renew may still be running when new leases are granted. Zero turns
    /// the window off (tests of other behaviour only).
    pub fn with_recovery_grace(mut self, grace: Duration) -> Self {
        self.recovery_grace = Some(grace);
        self
    }

    /// The grace for a call made with `ttl` (ms, as checked by `ttl_ms`).
    fn grace_ms(&self, ttl_ms: u64) -> u64 {
        match self.recovery_grace {
            Some(g) => u64::try_from(g.as_millis()).unwrap_or(u64::MAX),
            None => ttl_ms,
        }
    }

    /// The agent type.
    pub fn agent_type(&self) -> &str {
        &self.agent_type
    }

    /// Registers or renews (heartbeat) `worker_id` with `slots`; the
    /// registration lapses after `ttl` unless renewed. Returns the capacity
    /// now. Call it periodically (well within `ttl`): that is also how the
    /// cluster recovers after Redis lost its data.
    pub async fn register_worker(
        &self,
        worker_id: &str,
        slots: u32,
        ttl: Duration,
    ) -> Result<u32, Error> {
        check_id("worker id", worker_id)?;
        let ttl = ttl_ms("worker registration ttl", ttl)?;
        let mut call = scripts::SEM_REGISTER.prepare_invoke();
        self.with_keys(&mut call)
            .arg(worker_id)
            .arg(slots)
            .arg(ttl)
            .arg(self.grace_ms(ttl));
        run(&self.pool, &call).await
    }

    /// Removes `worker_id` now (graceful shutdown). Leases stay until released
    /// or expired. Returns whether a live registration was removed.
    pub async fn deregister_worker(&self, worker_id: &str) -> Result<bool, Error> {
        check_id("worker id", worker_id)?;
        let mut call = scripts::SEM_DEREGISTER.prepare_invoke();
        self.with_keys(&mut call).arg(worker_id);
        run::<i64>(&self.pool, &call).await.map(|n| n == 1)
    }

    /// Sets (`Some`) or clears (`None`) the cap on capacity, for every
    /// process. Returns the capacity after the change. The cap lives in Redis
    /// like the registrations: whoever owns it should set it again after Redis
    /// lost its data.
    pub async fn set_cap(&self, cap: Option<u32>) -> Result<u32, Error> {
        let mut call = scripts::SEM_SET_CAP.prepare_invoke();
        let arg = cap.map(|c| c.to_string()).unwrap_or_default();
        self.with_keys(&mut call).arg(arg);
        run(&self.pool, &call).await
    }

    /// Takes a slot for `holder_id` for `ttl`, if one is free. Expired leases
    /// and lapsed workers are reclaimed in the same step. Calling it again for
    /// a holder that already has a live lease renews that lease (never a
    /// second slot). `None` means no slot is free (or Redis lost its data a
    /// moment ago, see [`CapacitySemaphore::acquire`]).
    pub async fn try_acquire(
        &self,
        holder_id: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, Error> {
        Ok(match self.acquire(holder_id, ttl).await? {
            Acquired::Granted(l) => Some(l),
            Acquired::Full | Acquired::Recovering { .. } => None,
        })
    }

    /// [`CapacitySemaphore::try_acquire`], telling a full semaphore from one
    /// in its recovery window after a data loss.
    pub async fn acquire(&self, holder_id: &str, ttl: Duration) -> Result<Acquired, Error> {
        check_id("holder id", holder_id)?;
        let ttl = ttl_ms("lease ttl", ttl)?;
        let mut call = scripts::SEM_ACQUIRE.prepare_invoke();
        self.with_keys(&mut call)
            .arg(holder_id)
            .arg(ttl)
            .arg(self.grace_ms(ttl));
        let (granted, expires_at_ms, _capacity, _in_use, epoch, recovering): AcquireReply =
            run(&self.pool, &call).await?;
        Ok(if granted == 1 {
            Acquired::Granted(Lease {
                agent_type: self.agent_type.clone(),
                holder_id: holder_id.to_string(),
                expires_at_ms,
                epoch,
            })
        } else if recovering > 0 {
            Acquired::Recovering {
                remaining_ms: recovering.unsigned_abs(),
            }
        } else {
            Acquired::Full
        })
    }

    /// Extends a live lease by `ttl` from now. `false` if it had already
    /// expired (its slot may be someone else's): acquire again. A lease that
    /// a data loss erased is re-created while the recovery window lasts
    /// (`true`); use [`CapacitySemaphore::renew_lease`] to tell, and to keep
    /// the lease's epoch current.
    pub async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<bool, Error> {
        let mut l = lease.clone();
        Ok(self.renew_lease(&mut l, ttl).await? != Renewed::Gone)
    }

    /// Extends `lease` by `ttl` from now, or re-creates it when Redis lost
    /// its data since it was granted and the recovery window still runs;
    /// updates its expiry and epoch. [`Renewed::Gone`]: the lease expired or
    /// was removed, and its slot may be someone else's.
    pub async fn renew_lease(&self, lease: &mut Lease, ttl: Duration) -> Result<Renewed, Error> {
        self.check_lease(lease)?;
        let ttl = ttl_ms("lease ttl", ttl)?;
        let mut call = scripts::SEM_RENEW.prepare_invoke();
        self.with_keys(&mut call)
            .arg(&lease.holder_id)
            .arg(ttl)
            .arg(&lease.epoch)
            .arg(self.grace_ms(ttl));
        let (expires, epoch, recreated): (i64, String, i64) = run(&self.pool, &call).await?;
        if expires <= 0 {
            return Ok(Renewed::Gone);
        }
        lease.expires_at_ms = expires;
        lease.epoch = epoch;
        Ok(if recreated == 1 {
            Renewed::Recreated
        } else {
            Renewed::Extended
        })
    }

    /// Gives the slot back. `false` if the lease had already expired or was
    /// released.
    pub async fn release(&self, lease: &Lease) -> Result<bool, Error> {
        self.check_lease(lease)?;
        let mut call = scripts::SEM_RELEASE.prepare_invoke();
        self.with_keys(&mut call).arg(&lease.holder_id);
        run::<i64>(&self.pool, &call).await.map(|n| n == 1)
    }

    /// A read-only snapshot: capacity, cap, live leases and live workers.
    pub async fn status(&self) -> Result<SemaphoreStatus, Error> {
        let mut call = scripts::SEM_STATUS.prepare_invoke();
        self.with_keys(&mut call);
        let (capacity, cap, holders, workers, epoch, recovering): StatusReply =
            run(&self.pool, &call).await?;
        let workers = workers
            .into_iter()
            .map(|(worker_id, slots, expires_at_ms)| WorkerSlot {
                worker_id,
                slots,
                expires_at_ms,
            })
            .collect();
        Ok(SemaphoreStatus {
            capacity: to_u32(capacity),
            cap: u32::try_from(cap).ok(),
            in_use: to_u32(holders.len() as i64),
            holders,
            workers,
            epoch: (!epoch.is_empty()).then_some(epoch),
            recovering_ms: recovering.max(0).unsigned_abs(),
        })
    }

    /// Agent types under `prefix` that have a worker registry, sorted.
    ///
    /// A read-only `SCAN` for `prefix:{sem:*}:workers` rather than a registry
    /// set: a set would be a key outside each semaphore's hash tag, and writing
    /// it from the register script would break on Redis Cluster. The workers
    /// key expires with its last registration, so a type whose workers all
    /// lapsed disappears (call [`CapacitySemaphore::status`] for exact live
    /// counts). On Redis Cluster the scan runs on every master in turn.
    pub async fn agent_types(pool: &RedisPool, prefix: &str) -> Result<Vec<String>, Error> {
        let pattern = keys::semaphore_workers_pattern(prefix)?;
        let mut conn = pool.get().await.map_err(Error::pool)?;
        let mut types: Vec<String> = scan::scan_match(&mut conn, &pattern)
            .await?
            .iter()
            .filter_map(|k| keys::agent_type_of_workers_key(prefix, k))
            .map(str::to_string)
            .collect();
        types.sort();
        types.dedup();
        Ok(types)
    }

    fn with_keys<'a, 'b>(
        &self,
        call: &'b mut ::redis::ScriptInvocation<'a>,
    ) -> &'b mut ::redis::ScriptInvocation<'a> {
        call.key(&self.keys.holders)
            .key(&self.keys.workers)
            .key(&self.keys.slots)
            .key(&self.keys.cap)
            .key(&self.keys.epoch)
    }

    fn check_lease(&self, lease: &Lease) -> Result<(), Error> {
        if lease.agent_type != self.agent_type {
            return Err(Error::InvalidArgument(format!(
                "lease of agent type `{}` used with the `{}` semaphore",
                lease.agent_type, self.agent_type
            )));
        }
        check_id("holder id", &lease.holder_id)
    }
}

/// Reply of `sem_status.lua`: capacity, cap (-1 = none), flat holder/expiry
/// pairs, flat worker/slots/expiry triples, epoch id ('' = none), recovery
/// ms left (-1 = no epoch).
type StatusReply = (
    i64,
    i64,
    Vec<(String, i64)>,
    Vec<(String, u32, i64)>,
    String,
    i64,
);

/// Reply of `sem_acquire.lua`: granted, expiry, capacity, in use, epoch id,
/// recovery ms left.
type AcquireReply = (i64, i64, i64, i64, String, i64);

fn to_u32(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}
