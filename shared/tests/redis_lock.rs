//! Owned lock against a real redis-server.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use caucus_shared::config::RedisConfig;
use caucus_shared::redis::{connect, OwnedLock, RedisPool};
use caucus_shared::Error;
use tokio::time::Instant;

const LONG: Duration = Duration::from_secs(30);

async fn pool(url: String) -> Result<RedisPool> {
    Ok(connect(&RedisConfig {
        url,
        ..RedisConfig::default()
    })
    .await?)
}

#[tokio::test]
async fn a_non_owner_never_releases_or_extends_the_lock() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let pool = pool(redis.url()).await?;
    let a = OwnedLock::new(pool.clone(), "caucus", "debate-sync:D1", "owner-a")?;
    let b = OwnedLock::new(pool.clone(), "caucus", "debate-sync:D1", "owner-b")?;

    assert!(a.try_acquire(LONG).await?);
    assert!(
        a.try_acquire(LONG).await?,
        "the owner may re-take its own lock"
    );
    assert!(!b.try_acquire(LONG).await?);
    assert!(!b.release().await?);
    assert!(!b.extend(LONG).await?);
    assert_eq!(b.owner().await?.as_deref(), Some("owner-a"));

    assert!(a.extend(LONG).await?);
    assert!(a.release().await?);
    assert_eq!(a.owner().await?, None);
    assert!(!a.release().await?, "released twice");
    assert!(b.try_acquire(LONG).await?);
    assert_eq!(a.owner().await?.as_deref(), Some("owner-b"));
    Ok(())
}

#[tokio::test]
async fn ttl_expiry_lets_the_next_owner_in_and_the_late_owner_cannot_touch_it() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let pool = pool(redis.url()).await?;
    let a = OwnedLock::new(pool.clone(), "caucus", "debate-sync:D2", "owner-a")?;
    let b = OwnedLock::new(pool.clone(), "caucus", "debate-sync:D2", "owner-b")?;
    assert!(a.try_acquire(Duration::from_millis(300)).await?);
    assert!(!b.try_acquire(LONG).await?);

    let got = b
        .acquire(LONG, Instant::now() + Duration::from_secs(5))
        .await?;
    assert!(got, "the lock did not expire within 5 s");
    assert_eq!(b.owner().await?.as_deref(), Some("owner-b"));
    assert!(
        !a.release().await?,
        "the late owner deleted the new owner's lock"
    );
    assert!(!a.extend(LONG).await?);
    assert_eq!(b.owner().await?.as_deref(), Some("owner-b"));
    Ok(())
}

#[tokio::test]
async fn acquire_gives_up_at_the_deadline_while_the_lock_is_held() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let pool = pool(redis.url()).await?;
    let a = OwnedLock::new(pool.clone(), "caucus", "held", "owner-a")?;
    let b = OwnedLock::new(pool, "caucus", "held", "owner-b")?;
    assert!(a.try_acquire(LONG).await?);
    assert!(
        !b.acquire(LONG, Instant::now() + Duration::from_millis(150))
            .await?
    );
    assert_eq!(b.owner().await?.as_deref(), Some("owner-a"));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_contenders_hold_it_one_at_a_time() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let pool = pool(redis.url()).await?;
    let inside = Arc::new(AtomicUsize::new(0));
    let high_water = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..20 {
        let lock = OwnedLock::new(pool.clone(), "caucus", "contended", &format!("owner-{i}"))?;
        let (inside, high_water) = (inside.clone(), high_water.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..3 {
                let deadline = Instant::now() + Duration::from_secs(20);
                anyhow::ensure!(lock.acquire(LONG, deadline).await?, "starved");
                let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                high_water.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                anyhow::ensure!(lock.release().await?, "owner release failed");
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    assert_eq!(high_water.load(Ordering::SeqCst), 1);
    Ok(())
}

#[tokio::test]
async fn invalid_lock_names_are_rejected() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let pool = pool(redis.url()).await?;
    let e = OwnedLock::new(pool.clone(), "caucus", "debate}{x", "a").unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidName {
                kind: "lock name",
                ..
            }
        ),
        "{e}"
    );
    let e = OwnedLock::new(pool.clone(), "caucus", "ok", "").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    let lock = OwnedLock::new(pool, "caucus", "ok", "a")?;
    let e = lock.try_acquire(Duration::ZERO).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    Ok(())
}

/// A standby takes over within the lease of the holder's last renewal: it
/// polls every lease/4 but wakes when the holder's lock runs out, so a poll
/// phase that would land a quarter lease late does not.
#[tokio::test]
async fn a_standby_takes_over_when_the_silent_holders_lease_runs_out() -> Result<()> {
    use caucus_shared::health::Health;
    use caucus_shared::redis::leadership;
    use tokio_util::sync::CancellationToken;

    let redis = caucus_harness::Redis::start();
    let pool = pool(redis.url()).await?;
    let lease = Duration::from_secs(2);
    let holder = OwnedLock::new(pool.clone(), "caucus", "coordinator-leader", "holder")?;
    let standby = OwnedLock::new(pool.clone(), "caucus", "coordinator-leader", "standby")?;
    let shutdown = CancellationToken::new();
    let health = Health::default();
    let taken = Instant::now();
    // The holder takes the lock and then falls silent (no keeper).
    let held = leadership::acquire(&holder, lease, 0, &shutdown, &health)
        .await
        .expect("the free lock");
    // Out of phase with the expiry by 300 ms: polls at 0.3, 0.8, 1.3, 1.8
    // and 2.3 s would take over 300 ms past the lease.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let next = leadership::acquire(&standby, lease, 0, &shutdown, &health)
        .await
        .expect("the expired lock");
    let after = taken.elapsed();
    assert!(next.epoch() > held.epoch(), "fenced");
    assert!(
        after < lease + Duration::from_millis(150),
        "took over {after:?} after the holder's last renewal (lease {lease:?})"
    );
    Ok(())
}
