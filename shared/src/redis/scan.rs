//! `SCAN MATCH` over the whole keyspace in every mode: one server's cursor
//! in standalone and Sentinel mode, and on a Redis Cluster each master's
//! cursor in turn (a `SCAN` sent to a cluster reaches one node, which holds
//! only its own slots' keys).

use ::redis::cluster_async::ClusterConnection;
use ::redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use ::redis::{from_redis_value, Value};

use super::RedisConnection;
use crate::Error;

/// Keys per `SCAN` round trip.
const COUNT: u32 = 500;

/// Every key matching `pattern` (unsorted; a key may repeat when the
/// keyspace changes during the scan, as `SCAN` allows).
pub(crate) async fn scan_match(
    conn: &mut RedisConnection,
    pattern: &str,
) -> Result<Vec<String>, Error> {
    let nodes = match conn.as_cluster() {
        None => return scan_node(conn, None, pattern).await,
        Some(cluster) => masters(cluster).await?,
    };
    let mut keys = Vec::new();
    for node in nodes {
        keys.extend(scan_node(conn, Some(node), pattern).await?);
    }
    Ok(keys)
}

/// Runs one node's `SCAN` cursor to its end: the connection's server, or
/// on a cluster the master at `node`.
async fn scan_node(
    conn: &mut RedisConnection,
    node: Option<(String, u16)>,
    pattern: &str,
) -> Result<Vec<String>, Error> {
    let mut cursor: u64 = 0;
    let mut keys = Vec::new();
    loop {
        let mut cmd = ::redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(COUNT);
        let (next, batch): (u64, Vec<String>) = match (&node, conn.as_cluster()) {
            (Some((host, port)), Some(cluster)) => {
                let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
                    host: host.clone(),
                    port: *port,
                });
                let reply = cluster.route_command(cmd, routing).await?;
                from_redis_value(reply).map_err(::redis::RedisError::from)?
            }
            _ => cmd.query_async(conn).await?,
        };
        keys.extend(batch);
        if next == 0 {
            return Ok(keys);
        }
        cursor = next;
    }
}

/// The address of each master serving slots, from `CLUSTER SLOTS`
/// (`[start, end, [host, port, id, …], replicas…]` per slot range).
async fn masters(cluster: &mut ClusterConnection) -> Result<Vec<(String, u16)>, Error> {
    let reply = cluster
        .route_command(
            ::redis::cmd("CLUSTER").arg("SLOTS").to_owned(),
            RoutingInfo::SingleNode(SingleNodeRoutingInfo::RandomPrimary),
        )
        .await?;
    let ranges: Vec<Vec<Value>> = from_redis_value(reply).map_err(::redis::RedisError::from)?;
    let mut masters = Vec::new();
    for range in ranges {
        let Some(master) = range.into_iter().nth(2) else {
            continue;
        };
        let node: Vec<Value> = from_redis_value(master).map_err(::redis::RedisError::from)?;
        let mut node = node.into_iter();
        let (Some(host), Some(port)) = (node.next(), node.next()) else {
            continue;
        };
        let host: String = from_redis_value(host).map_err(::redis::RedisError::from)?;
        let port: u16 = from_redis_value(port).map_err(::redis::RedisError::from)?;
        if !masters.contains(&(host.clone(), port)) {
            masters.push((host, port));
        }
    }
    Ok(masters)
}
