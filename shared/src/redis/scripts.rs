//! The Lua scripts, compiled into the binary and run with EVALSHA (falling
//! back to loading them when the server does not know them yet, e.g. right
//! after a restart), plus the one way every primitive calls them.

use std::sync::LazyLock;

use ::redis::{FromRedisValue, Script, ScriptInvocation};

use super::RedisPool;
use crate::Error;

macro_rules! script {
    ($($file:literal),+) => {
        LazyLock::new(|| Script::new(concat!($(include_str!(concat!("scripts/", $file)), "\n"),+)))
    };
}

pub(crate) static SEM_REGISTER: LazyLock<Script> =
    script!("prelude.lua", "sem_prelude.lua", "sem_register.lua");
pub(crate) static SEM_DEREGISTER: LazyLock<Script> =
    script!("prelude.lua", "sem_prelude.lua", "sem_deregister.lua");
pub(crate) static SEM_ACQUIRE: LazyLock<Script> =
    script!("prelude.lua", "sem_prelude.lua", "sem_acquire.lua");
pub(crate) static SEM_RENEW: LazyLock<Script> =
    script!("prelude.lua", "sem_prelude.lua", "sem_renew.lua");
pub(crate) static SEM_RELEASE: LazyLock<Script> =
    script!("prelude.lua", "sem_prelude.lua", "sem_release.lua");
pub(crate) static SEM_SET_CAP: LazyLock<Script> =
    script!("prelude.lua", "sem_prelude.lua", "sem_set_cap.lua");
pub(crate) static SEM_STATUS: LazyLock<Script> =
    script!("prelude.lua", "sem_prelude.lua", "sem_status.lua");

pub(crate) static LOCK_ACQUIRE: LazyLock<Script> = script!("lock_acquire.lua");
pub(crate) static LOCK_EXTEND: LazyLock<Script> = script!("lock_extend.lua");
pub(crate) static LOCK_RELEASE: LazyLock<Script> = script!("lock_release.lua");
pub(crate) static LEADER_ACQUIRE: LazyLock<Script> = script!("leader_acquire.lua");
pub(crate) static LEADER_RAISE: LazyLock<Script> = script!("leader_raise.lua");

pub(crate) static COUNTER_ADD: LazyLock<Script> = script!("prelude.lua", "counter_add.lua");
pub(crate) static COUNTER_REMOVE: LazyLock<Script> = script!("prelude.lua", "counter_remove.lua");
pub(crate) static COUNTER_MEMBERS: LazyLock<Script> = script!("prelude.lua", "counter_members.lua");

pub(crate) static BATCH_ACQUIRE: LazyLock<Script> = script!("batch_acquire.lua");
pub(crate) static BATCH_SYNC: LazyLock<Script> = script!("batch_sync.lua");

/// Runs one script invocation on a pooled connection.
///
/// A pooled connection can outlive the server (restart, failover). When the
/// call fails on the connection itself, or the server it reaches has become
/// a replica (`READONLY`: a Sentinel failover demoted it), that connection
/// is taken out of the pool and the call is made once more on a fresh one
/// (which, with Sentinel, asks the sentinels for the master again), so
/// callers recover without rebuilding the pool, in every mode. Every script
/// is safe to run twice (acquire, add and register are idempotent per id;
/// release/remove at worst report `false` for what the first attempt did).
pub(crate) async fn run<T: FromRedisValue>(
    pool: &RedisPool,
    call: &ScriptInvocation<'_>,
) -> Result<T, Error> {
    retrying(pool, Call::Script(call)).await
}

/// Runs one plain command (a read such as `PTTL` or `GET`) with the same
/// drop-and-retry as [`run`]: a connection left broken by a restart or a
/// failover would otherwise fail the first read after it.
pub(crate) async fn query<T: FromRedisValue>(
    pool: &RedisPool,
    cmd: &::redis::Cmd,
) -> Result<T, Error> {
    retrying(pool, Call::Plain(cmd)).await
}

/// What [`retrying`] sends.
#[derive(Clone, Copy)]
enum Call<'a, 'b> {
    Script(&'a ScriptInvocation<'b>),
    Plain(&'a ::redis::Cmd),
}

/// Sends `call`, once more on a fresh connection when the first one's
/// connection was broken (see [`run`]).
async fn retrying<T: FromRedisValue>(pool: &RedisPool, call: Call<'_, '_>) -> Result<T, Error> {
    let mut retried = false;
    loop {
        let mut conn = pool.get().await.map_err(Error::pool)?;
        let sent = match call {
            Call::Script(s) => s.invoke_async(&mut conn).await,
            Call::Plain(c) => c.query_async(&mut conn).await,
        };
        match sent {
            Ok(v) => return Ok(v),
            Err(e) if !retried && connection_broken(&e) => {
                tracing::debug!(error = %e, "redis connection failed; retrying on a fresh one");
                conn.discard();
                retried = true;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Whether `e` condemns the connection rather than the call.
fn connection_broken(e: &::redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_unrecoverable_error()
        || e.kind() == ::redis::ErrorKind::Server(::redis::ServerErrorKind::ReadOnly)
}

/// A duration as whole milliseconds for a script, rejecting zero (Redis
/// refuses a zero expiry, and a zero lease would be a bug upstream).
pub(crate) fn ttl_ms(what: &str, ttl: std::time::Duration) -> Result<u64, Error> {
    let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    if ms == 0 {
        return Err(Error::InvalidArgument(format!(
            "{what} must be at least 1 ms, got {ttl:?}"
        )));
    }
    // Past ~100 years the score arithmetic in Lua doubles would lose
    // precision; nobody needs a lease that long.
    const MAX_MS: u64 = 100 * 365 * 24 * 3600 * 1000;
    if ms > MAX_MS {
        return Err(Error::InvalidArgument(format!(
            "{what} must be at most 100 years, got {ttl:?}"
        )));
    }
    Ok(ms)
}

/// Checks an id that is stored as a value or member (not part of a key).
pub(crate) fn check_id(what: &str, id: &str) -> Result<(), Error> {
    if id.is_empty() {
        return Err(Error::InvalidArgument(format!("{what} must not be empty")));
    }
    Ok(())
}
