//! A bounded set of members with expiry (expert queues: at most N debates
//! per expert at once).
//!
//! Members expire unless renewed, so the entries of a crashed facilitator
//! lapse and the queue heals itself.

use std::time::Duration;

use super::keys;
use super::scripts::{self, check_id, run, ttl_ms};
use super::RedisPool;
use crate::Error;

/// Result of [`BoundedCounter::try_add`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddOutcome {
    /// The member is in (newly added or renewed).
    pub added: bool,
    /// Live members after the call.
    pub count: u32,
}

/// Bounded counters under one key prefix; each counter is named by its key
/// (e.g. the expert id), stored at `prefix:{queue:key}:members`.
#[derive(Clone)]
pub struct BoundedCounter {
    pool: RedisPool,
    prefix: String,
}

impl std::fmt::Debug for BoundedCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedCounter")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl BoundedCounter {
    /// Counters under `prefix` (must match `[A-Za-z0-9_.:-]+`).
    pub fn new(pool: RedisPool, prefix: &str) -> Result<Self, Error> {
        keys::validate_name("key prefix", prefix)?;
        Ok(BoundedCounter {
            pool,
            prefix: prefix.to_string(),
        })
    }

    /// Adds `member` to counter `key` for `ttl` if fewer than `max` live
    /// members are in. Adding a member that is already in renews it and
    /// reports `added: true` without counting it twice.
    pub async fn try_add(
        &self,
        key: &str,
        member: &str,
        max: u32,
        ttl: Duration,
    ) -> Result<AddOutcome, Error> {
        let k = keys::queue_members_key(&self.prefix, key)?;
        check_id("counter member", member)?;
        let ttl = ttl_ms("counter member ttl", ttl)?;
        let mut call = scripts::COUNTER_ADD.prepare_invoke();
        call.key(k).arg(member).arg(max).arg(ttl);
        let (added, count): (i64, i64) = run(&self.pool, &call).await?;
        Ok(AddOutcome {
            added: added == 1,
            count: u32::try_from(count.max(0)).unwrap_or(u32::MAX),
        })
    }

    /// Removes `member`; `true` if it was a live member.
    pub async fn remove(&self, key: &str, member: &str) -> Result<bool, Error> {
        let k = keys::queue_members_key(&self.prefix, key)?;
        check_id("counter member", member)?;
        let mut call = scripts::COUNTER_REMOVE.prepare_invoke();
        call.key(k).arg(member);
        run::<i64>(&self.pool, &call).await.map(|n| n == 1)
    }

    /// Live members of counter `key`, soonest expiry first.
    pub async fn members(&self, key: &str) -> Result<Vec<String>, Error> {
        let k = keys::queue_members_key(&self.prefix, key)?;
        let mut call = scripts::COUNTER_MEMBERS.prepare_invoke();
        call.key(k);
        run(&self.pool, &call).await
    }

    /// Number of live members of counter `key`.
    pub async fn count(&self, key: &str) -> Result<u32, Error> {
        let n = self.members(key).await?.len();
        Ok(u32::try_from(n).unwrap_or(u32::MAX))
    }
}
