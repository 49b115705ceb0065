//! Redis primitives: every state change is one Lua script (one round trip),
//! time inside scripts is the Redis server clock, and the keys of one
//! primitive share a hash tag so the scripts run unchanged on Redis Cluster.
//!
//! - [`CapacitySemaphore`]: cluster-wide capacity per agent type, with leases.
//! - [`OwnedLock`]: lock with an owner token and TTL.
//! - [`BoundedCounter`]: at most N live members per key, with expiry.
//! - [`BatchSlots`]: a batch's running workflows, at most its limit, over
//!   partitions.
//! - [`leadership`]: active/standby by an [`OwnedLock`].
//! - [`partitions`]: partitions divided among live members, each under a
//!   fenced lease.
//! - [`SyncGate`]: findings wait while their agent's debate sync lock is held.
//! - [`keys`]: the key families.
//! - [`RedisPool`]: standalone, Redis Cluster or Sentinel (`redis.mode`).

mod batch_slots;
mod connect;
mod counter;
pub mod keys;
pub mod leadership;
mod lock;
mod managers;
pub mod partitions;
mod poll;
mod pool;
mod scan;
mod scripts;
mod semaphore;
mod sync_gate;

pub use batch_slots::BatchSlots;
pub use connect::{connect, redact_url};
pub(crate) use connect::{ping, startup_backoff};
pub use counter::{AddOutcome, BoundedCounter};
pub use keys::{validate_name, DEFAULT_PREFIX};
pub use lock::OwnedLock;
pub use pool::{PoolError, RedisConnection, RedisPool};
pub use semaphore::{Acquired, CapacitySemaphore, Lease, Renewed, SemaphoreStatus, WorkerSlot};
pub use sync_gate::{
    sync_lock_key, sync_lock_name, wait_unlocked, GateBypass, Published, SyncGate,
};
