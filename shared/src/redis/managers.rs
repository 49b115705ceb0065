//! deadpool managers for Redis Cluster and Sentinel made from a redis-rs
//! client, so the client can carry `redis.tls_*`: deadpool-redis 0.23's
//! own managers build their clients from URLs alone, and the cluster and
//! sentinel clients take certificates only from their builders
//! (`ClusterClientBuilder::certs`, `SentinelClientBuilder::set_client_to_*_certificates`),
//! never from a seed's `ConnectionInfo`.

use std::sync::atomic::{AtomicUsize, Ordering};

use deadpool::managed::{Manager, Metrics, RecycleError, RecycleResult};
use redis::aio::MultiplexedConnection;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::sentinel::SentinelClient;
use redis::RedisError;

/// Opens cluster connections with one [`ClusterClient`].
pub struct ClusterManager {
    client: ClusterClient,
    pings: AtomicUsize,
}

impl ClusterManager {
    /// A manager whose connections `client` opens.
    pub fn new(client: ClusterClient) -> Self {
        ClusterManager {
            client,
            pings: AtomicUsize::new(0),
        }
    }
}

impl Manager for ClusterManager {
    type Type = ClusterConnection;
    type Error = RedisError;

    async fn create(&self) -> Result<ClusterConnection, RedisError> {
        self.client.get_async_connection().await
    }

    async fn recycle(
        &self,
        conn: &mut ClusterConnection,
        _: &Metrics,
    ) -> RecycleResult<RedisError> {
        ping(&self.pings, conn).await
    }
}

/// Opens connections to the master the sentinels name, with one
/// [`SentinelClient`] (it caches its sentinel connections, hence the lock).
pub struct SentinelManager {
    client: tokio::sync::Mutex<SentinelClient>,
    pings: AtomicUsize,
}

impl SentinelManager {
    /// A manager whose connections `client` opens.
    pub fn new(client: SentinelClient) -> Self {
        SentinelManager {
            client: tokio::sync::Mutex::new(client),
            pings: AtomicUsize::new(0),
        }
    }
}

impl Manager for SentinelManager {
    type Type = MultiplexedConnection;
    type Error = RedisError;

    async fn create(&self) -> Result<MultiplexedConnection, RedisError> {
        self.client.lock().await.get_async_connection().await
    }

    async fn recycle(
        &self,
        conn: &mut MultiplexedConnection,
        _: &Metrics,
    ) -> RecycleResult<RedisError> {
        ping(&self.pings, conn).await
    }
}

/// A pooled connection is handed out again only if it echoes a fresh
/// `PING` argument (as deadpool-redis's managers check).
async fn ping(
    pings: &AtomicUsize,
    conn: &mut impl redis::aio::ConnectionLike,
) -> RecycleResult<RedisError> {
    let n = pings.fetch_add(1, Ordering::Relaxed).to_string();
    let echoed: String = redis::cmd("PING").arg(&n).query_async(conn).await?;
    if echoed == n {
        Ok(())
    } else {
        Err(RecycleError::message("unexpected PING reply"))
    }
}
