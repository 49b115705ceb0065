//! A lock with an owner token and a TTL (e.g. the debate sync lock).
//!
//! Only the owner can extend or release it; a crashed owner's lock expires
//! after its TTL (server clock), letting the next owner in.

use std::time::Duration;

use tokio::time::Instant;

use super::scripts::{self, check_id, run, ttl_ms};
use super::RedisPool;
use super::{keys, poll};
use crate::Error;

/// Shortest and longest pause between attempts in [`OwnedLock::acquire`].
const BACKOFF_MIN: Duration = Duration::from_millis(5);
const BACKOFF_MAX: Duration = Duration::from_millis(100);

/// One owner's handle on a named lock. Two handles with the same name and
/// different tokens contend for the same lock.
#[derive(Clone)]
pub struct OwnedLock {
    pool: RedisPool,
    name: String,
    key: String,
    owner_token: String,
}

impl std::fmt::Debug for OwnedLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedLock")
            .field("key", &self.key)
            .field("owner_token", &self.owner_token)
            .finish_non_exhaustive()
    }
}

impl OwnedLock {
    /// The lock `name` (key `prefix:{lock:name}`) as seen by `owner_token`.
    /// `prefix` and `name` must match `[A-Za-z0-9_.:-]+`
    /// ([`Error::InvalidName`]); the token must be non-empty and unique per
    /// owner (a UUID).
    pub fn new(
        pool: RedisPool,
        prefix: &str,
        name: &str,
        owner_token: &str,
    ) -> Result<Self, Error> {
        check_id("lock owner token", owner_token)?;
        Ok(OwnedLock {
            key: keys::lock_key(prefix, name)?,
            pool,
            name: name.to_string(),
            owner_token: owner_token.to_string(),
        })
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This handle's owner token.
    pub fn owner_token(&self) -> &str {
        &self.owner_token
    }

    /// Takes the lock for `ttl` if it is free; if this owner already holds it,
    /// refreshes the TTL. `true` if this owner holds it now.
    pub async fn try_acquire(&self, ttl: Duration) -> Result<bool, Error> {
        let ttl = ttl_ms("lock ttl", ttl)?;
        let mut call = scripts::LOCK_ACQUIRE.prepare_invoke();
        call.key(&self.key).arg(&self.owner_token).arg(ttl);
        run::<i64>(&self.pool, &call).await.map(|n| n == 1)
    }

    /// Polls [`OwnedLock::try_acquire`] with a short growing backoff until it
    /// succeeds (`true`) or `deadline` passes (`false`). At least one attempt
    /// is made, even if the deadline has already passed.
    pub async fn acquire(&self, ttl: Duration, deadline: Instant) -> Result<bool, Error> {
        // Jitter keeps contenders that started together from retrying in
        // lockstep.
        let schedule = poll::schedule(BACKOFF_MIN, BACKOFF_MAX, true);
        poll::until(deadline, schedule, || self.try_acquire(ttl)).await
    }

    /// Sets the TTL to `ttl` from now, only if this owner holds the lock.
    pub async fn extend(&self, ttl: Duration) -> Result<bool, Error> {
        let ttl = ttl_ms("lock ttl", ttl)?;
        let mut call = scripts::LOCK_EXTEND.prepare_invoke();
        call.key(&self.key).arg(&self.owner_token).arg(ttl);
        run::<i64>(&self.pool, &call).await.map(|n| n == 1)
    }

    /// Releases the lock, only if this owner holds it (`false` otherwise, and
    /// the lock is left as it is).
    pub async fn release(&self) -> Result<bool, Error> {
        let mut call = scripts::LOCK_RELEASE.prepare_invoke();
        call.key(&self.key).arg(&self.owner_token);
        run::<i64>(&self.pool, &call).await.map(|n| n == 1)
    }

    /// Takes the lock like [`OwnedLock::try_acquire`] and, in the same
    /// script, a fencing epoch: a fresh holder gets the next value of the
    /// counter beside the lock (at least `floor + 1`), a holder that retries
    /// keeps its epoch. `Ok(Some(epoch))` when this owner holds the lock.
    pub async fn try_acquire_epoch(&self, ttl: Duration, floor: u64) -> Result<Option<u64>, Error> {
        let ttl = ttl_ms("lock ttl", ttl)?;
        let mut call = scripts::LEADER_ACQUIRE.prepare_invoke();
        call.key(&self.key)
            .key(self.epoch_key())
            .arg(&self.owner_token)
            .arg(ttl)
            .arg(floor);
        let (held, epoch): (i64, u64) = run(&self.pool, &call).await?;
        Ok((held == 1).then_some(epoch))
    }

    /// Raises this holder's epoch above `floor` (an epoch found in durable
    /// state that Redis no longer remembers). `Ok(None)` when this owner no
    /// longer holds the lock.
    pub async fn raise_epoch(&self, floor: u64) -> Result<Option<u64>, Error> {
        let mut call = scripts::LEADER_RAISE.prepare_invoke();
        call.key(&self.key)
            .key(self.epoch_key())
            .arg(&self.owner_token)
            .arg(floor);
        let epoch: u64 = run(&self.pool, &call).await?;
        Ok((epoch > 0).then_some(epoch))
    }

    fn epoch_key(&self) -> String {
        format!("{}:{}", self.key, keys::LOCK_EPOCH)
    }

    /// How long the lock is still held (Redis's `PTTL`); `None` when it is
    /// free (or has no expiry, which no caucus lock has).
    pub async fn remaining(&self) -> Result<Option<Duration>, Error> {
        let ms: i64 = scripts::query(&self.pool, ::redis::cmd("PTTL").arg(&self.key)).await?;
        Ok(u64::try_from(ms).ok().map(Duration::from_millis))
    }

    /// The fencing epoch last handed out with this lock (0 when it was never
    /// taken with one): the current holder's, while it is held.
    pub async fn epoch(&self) -> Result<u64, Error> {
        let e: Option<u64> =
            scripts::query(&self.pool, ::redis::cmd("GET").arg(self.epoch_key())).await?;
        Ok(e.unwrap_or(0))
    }

    /// The current owner's token, if the lock is held.
    pub async fn owner(&self) -> Result<Option<String>, Error> {
        scripts::query(&self.pool, ::redis::cmd("GET").arg(&self.key)).await
    }
}
