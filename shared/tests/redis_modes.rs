//! The Redis primitives on a real Redis Cluster (six nodes) and behind
//! Redis Sentinel, including across a failover: every script keeps its
//! keys in one slot, agent types are listed from every master, and a
//! killed master's replica carries on with the data it was sent.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result};
use caucus_harness::{RedisCluster, RedisSentinel};
use caucus_shared::config::{RedisConfig, RedisMode};
use caucus_shared::redis::{
    connect, Acquired, BoundedCounter, CapacitySemaphore, OwnedLock, RedisPool,
};
use tokio::time::Instant;

const LONG: Duration = Duration::from_secs(60);
/// A failover takes a few seconds (node timeout 1 s, then an election).
const FAILOVER: Duration = Duration::from_secs(30);

async fn pool(mode: RedisMode, url: String, master: Option<&str>) -> Result<RedisPool> {
    Ok(connect(&RedisConfig {
        mode,
        url,
        sentinel_master: master.map(str::to_string),
        ..RedisConfig::default()
    })
    .await?)
}

fn sem(pool: &RedisPool, agent: &str) -> Result<CapacitySemaphore> {
    Ok(CapacitySemaphore::new(pool.clone(), "caucus", agent)?.with_recovery_grace(Duration::ZERO))
}

/// Runs `op` until it succeeds (a call during a failover may fail while
/// no master serves its slot), failing after [`FAILOVER`].
async fn through_failover<T, F, Fut>(what: &str, mut op: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, caucus_shared::Error>>,
{
    let deadline = Instant::now() + FAILOVER;
    loop {
        match op().await {
            Ok(v) => return Ok(v),
            Err(e) if Instant::now() < deadline => {
                eprintln!("{what}: {e} (retrying)");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e).context(format!("{what} after {FAILOVER:?}")),
        }
    }
}

/// Waits until every write so far reached a replica (so a master killed
/// next loses none of it).
async fn replicated(pool: &RedisPool) -> Result<()> {
    let mut conn = pool.get().await?;
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(5000)
        .query_async(&mut conn)
        .await?;
    anyhow::ensure!(acked >= 1, "no replica acknowledged the writes");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_primitive_runs_on_a_cluster_and_agent_types_span_the_masters() -> Result<()> {
    let cluster = RedisCluster::start();
    let pool = pool(RedisMode::Cluster, cluster.url(), None).await?;
    assert!(pool.is_cluster());

    let types: Vec<String> = (0..12).map(|i| format!("agent-{i}")).collect();
    let owners: BTreeSet<usize> = types
        .iter()
        .map(|t| cluster.master_for(&format!("caucus:{{sem:{t}}}:holders")))
        .collect();
    assert_eq!(
        owners.len(),
        3,
        "the agent types' semaphores live on every master"
    );
    for t in &types {
        let s = sem(&pool, t)?;
        assert_eq!(s.register_worker("w1", 2, LONG).await?, 2);
        assert!(s.try_acquire("h1", LONG).await?.is_some());
        assert!(s.try_acquire("h2", LONG).await?.is_some());
        assert!(
            matches!(s.acquire("h3", LONG).await?, Acquired::Full),
            "{t}"
        );
        assert_eq!(s.set_cap(Some(1)).await?, 1);
        let st = s.status().await?;
        assert_eq!((st.capacity, st.in_use, st.cap), (1, 2, Some(1)), "{t}");
    }
    assert_eq!(CapacitySemaphore::agent_types(&pool, "caucus").await?, {
        let mut sorted = types.clone();
        sorted.sort();
        sorted
    });
    assert!(CapacitySemaphore::agent_types(&pool, "other")
        .await?
        .is_empty());

    let a = OwnedLock::new(pool.clone(), "caucus", "coordinator-leader", "a")?;
    let b = OwnedLock::new(pool.clone(), "caucus", "coordinator-leader", "b")?;
    assert_eq!(a.try_acquire_epoch(LONG, 0).await?, Some(1));
    assert_eq!(b.try_acquire_epoch(LONG, 0).await?, None);
    assert_eq!(a.raise_epoch(5).await?, Some(6));
    assert_eq!(b.epoch().await?, 6, "anyone reads the holder's epoch");
    assert_eq!(a.owner().await?.as_deref(), Some("a"));
    assert!(a.release().await?);
    assert_eq!(b.try_acquire_epoch(LONG, 0).await?, Some(7));
    assert_eq!(a.epoch().await?, 7);

    let c = BoundedCounter::new(pool.clone(), "caucus")?;
    assert!(c.try_add("expert:1", "m1", 2, LONG).await?.added);
    assert!(c.try_add("expert:1", "m2", 2, LONG).await?.added);
    assert!(!c.try_add("expert:1", "m3", 2, LONG).await?.added);
    assert!(c.remove("expert:1", "m1").await?);
    assert_eq!(c.count("expert:1").await?, 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_failover_keeps_leases_and_the_cap() -> Result<()> {
    let mut cluster = RedisCluster::start();
    let pool = pool(RedisMode::Cluster, cluster.url(), None).await?;
    let s = sem(&pool, "alpha")?;
    s.register_worker("w1", 2, LONG).await?;
    let held = s.try_acquire("h1", LONG).await?.expect("a free slot");
    replicated(&pool).await?;

    let owner = cluster.master_for("caucus:{sem:alpha}:holders");
    cluster.kill(owner);
    // Calls made while no master serves the slot fail or wait; once the
    // replica is promoted they work on the data it was sent.
    let second = through_failover("acquire h2", || s.acquire("h2", LONG)).await?;
    assert!(matches!(second, Acquired::Granted(_)), "{second:?}");
    cluster.wait_failover();
    assert_ne!(cluster.master_for("caucus:{sem:alpha}:holders"), owner);
    assert!(matches!(s.acquire("h3", LONG).await?, Acquired::Full));
    assert!(
        s.renew(&held, LONG).await?,
        "the lease taken before the kill"
    );
    assert_eq!(s.status().await?.in_use, 2);
    assert_eq!(
        CapacitySemaphore::agent_types(&pool, "caucus").await?,
        ["alpha"]
    );

    cluster.restart(owner);
    assert!(s.release(&held).await?);
    assert_eq!(s.status().await?.in_use, 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_keeps_leases_and_the_cap() -> Result<()> {
    let mut sentinel = RedisSentinel::start();
    let pool = pool(
        RedisMode::Sentinel,
        sentinel.url(),
        Some(sentinel.master_name()),
    )
    .await?;
    let s = sem(&pool, "alpha")?;
    s.register_worker("w1", 2, LONG).await?;
    let held = s.try_acquire("h1", LONG).await?.expect("a free slot");
    replicated(&pool).await?;

    let before = sentinel.master_port().expect("a master");
    let after = sentinel.kill_master();
    assert_ne!(before, after);
    // Pooled connections to the dead master fail once and are replaced by
    // connections to the master the sentinels name now.
    let second = through_failover("acquire h2", || s.acquire("h2", LONG)).await?;
    assert!(matches!(second, Acquired::Granted(_)), "{second:?}");
    assert!(matches!(s.acquire("h3", LONG).await?, Acquired::Full));
    assert!(
        s.renew(&held, LONG).await?,
        "the lease taken before the kill"
    );
    assert_eq!(
        CapacitySemaphore::agent_types(&pool, "caucus").await?,
        ["alpha"]
    );
    Ok(())
}
