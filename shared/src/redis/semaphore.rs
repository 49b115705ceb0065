//! Cluster-wide capacity per agent type: a counting semaphore with leases.
//!
//! Workers register their slots and renew the registration (heartbeat);
//! capacity is the sum of live workers' slots, optionally capped. Task
//! runners take a lease per running task and renew it while they work. A
//! killed worker stops renewing, so within one lease period its leases expire
//! and are reclaimed by the next acquire, and its registration lapses and the
//! capacity drops. If Redis restarts empty, the next heartbeat re-registers.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::keys::{self, SemaphoreKeys};
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
    /// the grant.
    pub expires_at_ms: i64,
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
}

/// The capacity semaphore of one agent type.
#[derive(Clone)]
pub struct CapacitySemaphore {
    pool: RedisPool,
    agent_type: String,
    keys: SemaphoreKeys,
}

impl std::fmt::Debug for CapacitySemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapacitySemaphore")
            .field("agent_type", &self.agent_type)
            .field("keys", &self.keys)
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
        })
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
        self.with_keys(&mut call).arg(worker_id).arg(slots).arg(ttl);
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
    /// second slot). `None` means no slot is free.
    pub async fn try_acquire(
        &self,
        holder_id: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, Error> {
        check_id("holder id", holder_id)?;
        let ttl = ttl_ms("lease ttl", ttl)?;
        let mut call = scripts::SEM_ACQUIRE.prepare_invoke();
        self.with_keys(&mut call).arg(holder_id).arg(ttl);
        let (granted, expires_at_ms, _capacity, _in_use): (i64, i64, i64, i64) =
            run(&self.pool, &call).await?;
        Ok((granted == 1).then(|| Lease {
            agent_type: self.agent_type.clone(),
            holder_id: holder_id.to_string(),
            expires_at_ms,
        }))
    }

    /// Extends a live lease by `ttl` from now. `false` if it had already
    /// expired (its slot may be someone else's): acquire again.
    pub async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<bool, Error> {
        self.check_lease(lease)?;
        let ttl = ttl_ms("lease ttl", ttl)?;
        let mut call = scripts::SEM_RENEW.prepare_invoke();
        self.with_keys(&mut call).arg(&lease.holder_id).arg(ttl);
        run::<i64>(&self.pool, &call).await.map(|e| e > 0)
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
        let (capacity, cap, holders, workers): StatusReply = run(&self.pool, &call).await?;
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
        })
    }

    /// Agent types under `prefix` that have a worker registry, sorted.
    ///
    /// A read-only `SCAN` for `prefix:{sem:*}:workers` rather than a registry
    /// set: a set would be a key outside each semaphore's hash tag, and writing
    /// it from the register script would break on Redis Cluster. The workers
    /// key expires with its last registration, so a type whose workers all
    /// lapsed disappears (call [`CapacitySemaphore::status`] for exact live
    /// counts). On Redis Cluster, `SCAN` covers one node: run it per master.
    pub async fn agent_types(pool: &RedisPool, prefix: &str) -> Result<Vec<String>, Error> {
        let pattern = keys::semaphore_workers_pattern(prefix)?;
        let mut conn = pool.get().await.map_err(|e| Error::Pool(e.to_string()))?;
        let mut cursor: u64 = 0;
        let mut types = Vec::new();
        loop {
            let (next, batch): (u64, Vec<String>) = ::redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(500)
                .query_async(&mut conn)
                .await?;
            types.extend(
                batch
                    .iter()
                    .filter_map(|k| keys::agent_type_of_workers_key(prefix, k))
                    .map(str::to_string),
            );
            if next == 0 {
                break;
            }
            cursor = next;
        }
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
/// pairs, flat worker/slots/expiry triples.
type StatusReply = (i64, i64, Vec<(String, i64)>, Vec<(String, u32, i64)>);

fn to_u32(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}
