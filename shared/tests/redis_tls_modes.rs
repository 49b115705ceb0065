//! `redis.tls_*` (a private CA and a client certificate) in cluster mode,
//! on a real TLS Redis Cluster that requires client certificates (harness
//! `RedisCluster::start_tls`; certificates made at run time by the harness's
//! `Pki`).

use std::time::Duration;

use caucus_shared::config::{RedisConfig, RedisMode};
use caucus_shared::redis::{connect, Acquired, CapacitySemaphore, OwnedLock};

use caucus_harness::{Pki, RedisCluster};

const LONG: Duration = Duration::from_secs(60);

/// `redis.mode = cluster` on `cluster`'s TLS seeds with the CA and, when
/// `client_cert`, the client certificate.
fn config(pki: &Pki, cluster: &RedisCluster, ca: bool, client_cert: bool) -> RedisConfig {
    RedisConfig {
        mode: RedisMode::Cluster,
        url: cluster.url(),
        tls_ca_file: ca.then(|| pki.path("ca.pem")),
        tls_cert_file: client_cert.then(|| pki.path("client.pem")),
        tls_key_file: client_cert.then(|| pki.path("client-key.pem")),
        connect_attempts: 2,
        connect_backoff_max: Duration::from_millis(50),
        ..RedisConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locks_and_semaphores_run_on_a_tls_cluster_with_a_private_ca() -> anyhow::Result<()> {
    let pki = Pki::generate_for_nodes();
    let cluster = pki.redis_cluster();
    let pool = connect(&config(&pki, &cluster, true, true)).await?;
    assert!(pool.is_cluster());

    let a = OwnedLock::new(pool.clone(), "caucus", "coordinator-leader", "a")?;
    let b = OwnedLock::new(pool.clone(), "caucus", "coordinator-leader", "b")?;
    assert_eq!(a.try_acquire_epoch(LONG, 0).await?, Some(1));
    assert_eq!(b.try_acquire_epoch(LONG, 0).await?, None);
    assert_eq!(a.raise_epoch(5).await?, Some(6));
    assert!(a.release().await?);
    assert_eq!(b.try_acquire_epoch(LONG, 0).await?, Some(7));

    // One semaphore per master: every node's TLS port is used.
    let keys = cluster.keys_on_every_master("caucus:tls:");
    assert_eq!(keys.len(), 3);
    let mut types = Vec::new();
    for i in 0.. {
        let t = format!("agent-{i}");
        let owner = cluster.master_for(&format!("caucus:{{sem:{t}}}:holders"));
        if !types.iter().any(|(_, o)| *o == owner) {
            types.push((t, owner));
        }
        if types.len() == 3 {
            break;
        }
    }
    for (t, _) in &types {
        let s =
            CapacitySemaphore::new(pool.clone(), "caucus", t)?.with_recovery_grace(Duration::ZERO);
        assert_eq!(s.register_worker("w1", 1, LONG).await?, 1);
        let Acquired::Granted(lease) = s.acquire("h1", LONG).await? else {
            panic!("{t}: the first holder is granted");
        };
        assert!(
            matches!(s.acquire("h2", LONG).await?, Acquired::Full),
            "{t}"
        );
        assert!(s.release(&lease).await?, "{t}");
        assert!(
            matches!(s.acquire("h2", LONG).await?, Acquired::Granted(_)),
            "{t}"
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_ca_or_the_client_certificate_the_cluster_is_unreachable() {
    let pki = Pki::generate_for_nodes();
    let cluster = pki.redis_cluster();
    for (ca, client_cert) in [(false, true), (true, false)] {
        let e = connect(&config(&pki, &cluster, ca, client_cert))
            .await
            .expect_err("refused by TLS")
            .to_string();
        assert!(
            e.contains("could not reach Redis at rediss://127.0.0.1:"),
            "{e}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_runs_behind_tls_sentinels_with_a_private_ca_and_after_a_failover(
) -> anyhow::Result<()> {
    let pki = Pki::generate_for_nodes();
    let mut group = pki.redis_sentinel();
    assert!(group.url().starts_with("rediss://"), "{}", group.url());
    let cfg = RedisConfig {
        mode: RedisMode::Sentinel,
        url: group.url(),
        sentinel_master: Some(group.master_name().into()),
        tls_ca_file: Some(pki.path("ca.pem")),
        tls_cert_file: Some(pki.path("client.pem")),
        tls_key_file: Some(pki.path("client-key.pem")),
        ..RedisConfig::default()
    };
    let pool = connect(&cfg).await?;
    let a = OwnedLock::new(pool.clone(), "caucus", "coordinator-leader", "a")?;
    let b = OwnedLock::new(pool.clone(), "caucus", "coordinator-leader", "b")?;
    assert_eq!(a.try_acquire_epoch(LONG, 0).await?, Some(1));
    assert_eq!(b.try_acquire_epoch(LONG, 0).await?, None);
    let s = CapacitySemaphore::new(pool.clone(), "caucus", "alpha")?
        .with_recovery_grace(Duration::ZERO);
    assert_eq!(s.register_worker("w1", 1, LONG).await?, 1);
    assert!(matches!(s.acquire("h1", LONG).await?, Acquired::Granted(_)));
    assert!(matches!(s.acquire("h2", LONG).await?, Acquired::Full));

    let before = group.master_port();
    let after = group.kill_master();
    assert_ne!(before, Some(after));
    // A fresh pool finds the promoted replica through the sentinels, over
    // TLS with the private CA.
    let pool = connect(&cfg).await?;
    let c = OwnedLock::new(pool, "caucus", "failover-probe", "c")?;
    assert_eq!(c.try_acquire_epoch(LONG, 0).await?, Some(1));
    Ok(())
}
