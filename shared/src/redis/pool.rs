//! [`RedisPool`]: one pool type over the three ways to reach Redis
//! (`redis.mode`): a standalone server, a Redis Cluster, or the master that
//! Redis Sentinel names. Callers get a [`RedisConnection`], which speaks
//! [`ConnectionLike`], so scripts and commands run the same in every mode.

use ::redis::aio::ConnectionLike;
use ::redis::{Cmd, Pipeline, RedisFuture, Value};
use deadpool::managed::{Object, Pool};

use super::managers::{ClusterManager, SentinelManager};

/// Error of taking a connection from the pool (same type in every mode).
pub type PoolError = deadpool_redis::PoolError;

/// The pool every component uses; cheap to clone (one shared pool).
#[derive(Clone)]
pub struct RedisPool(Kind);

#[derive(Clone)]
enum Kind {
    Standalone(deadpool_redis::Pool),
    Cluster(Pool<ClusterManager>),
    Sentinel(Pool<SentinelManager>),
}

/// A pooled connection of any mode; goes back to the pool when dropped.
pub enum RedisConnection {
    /// To the one server.
    Standalone(deadpool_redis::Connection),
    /// To the cluster: routes each command by its keys' slot and follows
    /// `MOVED`/`ASK` and failovers.
    Cluster(Object<ClusterManager>),
    /// To the master the sentinels named when it was opened.
    Sentinel(Object<SentinelManager>),
}

impl RedisPool {
    /// Wraps a standalone pool.
    pub fn standalone(pool: deadpool_redis::Pool) -> Self {
        RedisPool(Kind::Standalone(pool))
    }

    /// Wraps a Redis Cluster pool.
    pub fn cluster(pool: Pool<ClusterManager>) -> Self {
        RedisPool(Kind::Cluster(pool))
    }

    /// Wraps a Sentinel pool.
    pub fn sentinel(pool: Pool<SentinelManager>) -> Self {
        RedisPool(Kind::Sentinel(pool))
    }

    /// Whether this pool speaks to a Redis Cluster (where keyless commands
    /// such as `SCAN` reach one node only).
    pub fn is_cluster(&self) -> bool {
        matches!(self.0, Kind::Cluster(_))
    }

    /// A connection from the pool, opened (or checked) first.
    pub async fn get(&self) -> Result<RedisConnection, PoolError> {
        Ok(match &self.0 {
            Kind::Standalone(p) => RedisConnection::Standalone(p.get().await?),
            Kind::Cluster(p) => RedisConnection::Cluster(p.get().await?),
            Kind::Sentinel(p) => RedisConnection::Sentinel(p.get().await?),
        })
    }
}

impl std::fmt::Debug for RedisPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (mode, status) = match &self.0 {
            Kind::Standalone(p) => ("standalone", p.status()),
            Kind::Cluster(p) => ("cluster", p.status()),
            Kind::Sentinel(p) => ("sentinel", p.status()),
        };
        f.debug_struct("RedisPool")
            .field("mode", &mode)
            .field("status", &status)
            .finish()
    }
}

impl RedisConnection {
    /// Takes the connection out of its pool for good, so a broken one is
    /// closed instead of handed out again (the pool opens a new one).
    pub fn discard(self) {
        match self {
            RedisConnection::Standalone(c) => drop(deadpool_redis::Connection::take(c)),
            RedisConnection::Cluster(c) => drop(Object::take(c)),
            RedisConnection::Sentinel(c) => drop(Object::take(c)),
        }
    }

    /// The cluster connection, when this is one (for commands routed to
    /// chosen nodes).
    pub(crate) fn as_cluster(&mut self) -> Option<&mut ::redis::cluster_async::ClusterConnection> {
        match self {
            RedisConnection::Cluster(c) => Some(&mut **c),
            _ => None,
        }
    }

    fn inner(&mut self) -> &mut dyn ConnectionLike {
        match self {
            RedisConnection::Standalone(c) => c,
            RedisConnection::Cluster(c) => &mut **c,
            RedisConnection::Sentinel(c) => &mut **c,
        }
    }
}

impl ConnectionLike for RedisConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        self.inner().req_packed_command(cmd)
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        self.inner().req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        match self {
            RedisConnection::Standalone(c) => c.get_db(),
            RedisConnection::Cluster(c) => c.get_db(),
            RedisConnection::Sentinel(c) => c.get_db(),
        }
    }
}
