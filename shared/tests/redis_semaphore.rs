//! Capacity semaphore against a real redis-server.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use caucus_shared::config::RedisConfig;
use caucus_shared::redis::{connect, Acquired, CapacitySemaphore, RedisPool, Renewed};
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

/// A semaphore without the recovery window after a data loss: a fresh
/// Redis looks like one that lost its data, and these tests are about
/// other behaviour. The window has its own tests below.
fn sem(pool: RedisPool, agent: &str) -> Result<CapacitySemaphore> {
    Ok(CapacitySemaphore::new(pool, "caucus", agent)?.with_recovery_grace(Duration::ZERO))
}

/// Polls `check` until it yields `Some`, failing after `timeout`.
async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_contenders_never_exceed_capacity_and_reach_it() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let sem = sem(pool(redis.url()).await?, "valuation")?;
    sem.register_worker("w1", 2, LONG).await?;
    assert_eq!(sem.register_worker("w2", 1, LONG).await?, 3);

    let in_flight = Arc::new(AtomicUsize::new(0));
    let high_water = Arc::new(AtomicUsize::new(0));
    let grants = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..50 {
        let (sem, in_flight, high_water, grants) = (
            sem.clone(),
            in_flight.clone(),
            high_water.clone(),
            grants.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let holder = format!("holder-{i}");
            let mut done = 0;
            while done < 4 {
                match sem.try_acquire(&holder, LONG).await? {
                    Some(lease) => {
                        // Counted only between grant and release, so this can
                        // only undercount what Redis holds, never overcount.
                        let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        high_water.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        anyhow::ensure!(sem.release(&lease).await?, "release of a live lease");
                        grants.fetch_add(1, Ordering::SeqCst);
                        done += 1;
                    }
                    None => tokio::time::sleep(Duration::from_millis(1)).await,
                }
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let hw = high_water.load(Ordering::SeqCst);
    assert!(hw <= 3, "high-water mark {hw} exceeded capacity 3");
    assert_eq!(hw, 3, "contention never filled the capacity");
    assert_eq!(grants.load(Ordering::SeqCst), 200);
    let st = sem.status().await?;
    assert_eq!((st.capacity, st.in_use), (3, 0));
    assert!(st.holders.is_empty());
    Ok(())
}

#[tokio::test]
async fn reacquire_by_the_same_holder_renews_instead_of_taking_a_second_slot() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let sem = sem(pool(redis.url()).await?, "business")?;
    sem.register_worker("w1", 2, LONG).await?;
    let first = sem
        .try_acquire("h1", Duration::from_secs(5))
        .await?
        .unwrap();
    let again = sem.try_acquire("h1", LONG).await?.unwrap();
    assert!(again.expires_at_ms > first.expires_at_ms);
    let st = sem.status().await?;
    assert_eq!(st.in_use, 1);
    assert_eq!(st.holders[0].0, "h1");
    assert!(sem.try_acquire("h2", LONG).await?.is_some());
    assert!(sem.try_acquire("h3", LONG).await?.is_none());
    assert!(sem.release(&first).await?);
    assert!(
        !sem.release(&first).await?,
        "second release must report false"
    );
    Ok(())
}

#[tokio::test]
async fn a_holder_that_stops_renewing_is_reclaimed_after_one_lease_period() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let sem = sem(pool(redis.url()).await?, "financial")?;
    sem.register_worker("w1", 1, LONG).await?;
    let ttl = Duration::from_millis(300);
    let dead = sem.try_acquire("dead-holder", ttl).await?.unwrap();
    assert!(sem.try_acquire("next", ttl).await?.is_none());

    let next = eventually(
        "the expired lease to be reclaimed",
        Duration::from_secs(5),
        || {
            let sem = sem.clone();
            async move { Ok(sem.try_acquire("next", LONG).await?) }
        },
    )
    .await?;
    // Server clock: the new lease was granted no earlier than the old expiry.
    let granted_at = next.expires_at_ms - LONG.as_millis() as i64;
    assert!(
        granted_at >= dead.expires_at_ms,
        "{granted_at} < {}",
        dead.expires_at_ms
    );
    assert!(
        !sem.renew(&dead, ttl).await?,
        "a reclaimed lease cannot be renewed"
    );
    assert!(!sem.release(&dead).await?);
    assert_eq!(
        sem.status().await?.holders,
        vec![("next".into(), next.expires_at_ms)]
    );
    Ok(())
}

#[tokio::test]
async fn a_renewed_lease_is_not_reclaimed() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let sem = sem(pool(redis.url()).await?, "strategy")?;
    sem.register_worker("w1", 1, LONG).await?;
    let ttl = Duration::from_millis(400);
    let lease = sem.try_acquire("busy", ttl).await?.unwrap();
    let until = Instant::now() + 3 * ttl;
    while Instant::now() < until {
        assert!(sem.renew(&lease, ttl).await?, "renew of a live lease");
        assert!(sem.try_acquire("other", ttl).await?.is_none());
        tokio::time::sleep(ttl / 8).await;
    }
    assert!(sem.release(&lease).await?);
    assert!(sem.try_acquire("other", ttl).await?.is_some());
    Ok(())
}

#[tokio::test]
async fn a_worker_that_stops_heartbeating_stops_contributing_capacity() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let sem = sem(pool(redis.url()).await?, "screening")?;
    sem.register_worker("steady", 2, LONG).await?;
    assert_eq!(
        sem.register_worker("doomed", 1, Duration::from_millis(300))
            .await?,
        3
    );
    assert_eq!(sem.status().await?.workers.len(), 2);

    let st = eventually("capacity to drop to 2", Duration::from_secs(5), || {
        let sem = sem.clone();
        async move { Ok(sem.status().await.map(|s| (s.capacity == 2).then_some(s))?) }
    })
    .await?;
    let ids: Vec<_> = st.workers.iter().map(|w| w.worker_id.as_str()).collect();
    assert_eq!(ids, ["steady"]);
    assert_eq!(st.workers[0].slots, 2);
    for h in ["a", "b"] {
        assert!(sem.try_acquire(h, LONG).await?.is_some());
    }
    assert!(sem.try_acquire("c", LONG).await?.is_none());

    // Graceful removal takes effect at once; the leases stay.
    assert!(sem.deregister_worker("steady").await?);
    let st = sem.status().await?;
    assert_eq!((st.capacity, st.in_use), (0, 2));
    assert!(!sem.deregister_worker("steady").await?);
    Ok(())
}

#[tokio::test]
async fn the_cap_limits_capacity_below_the_slot_sum_for_every_process() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let a = sem(pool(redis.url()).await?, "valuation")?;
    // A second "process" with its own pool.
    let b = sem(pool(redis.url()).await?, "valuation")?;
    a.register_worker("w1", 2, LONG).await?;
    a.register_worker("w2", 1, LONG).await?;
    assert_eq!(a.set_cap(Some(2)).await?, 2);
    let st = b.status().await?;
    assert_eq!((st.capacity, st.cap), (2, Some(2)));
    assert!(b.try_acquire("h1", LONG).await?.is_some());
    assert!(b.try_acquire("h2", LONG).await?.is_some());
    assert!(b.try_acquire("h3", LONG).await?.is_none());
    // A cap above the slot sum does not add capacity.
    assert_eq!(b.set_cap(Some(10)).await?, 3);
    assert_eq!(a.set_cap(None).await?, 3);
    assert_eq!(a.status().await?.cap, None);
    assert!(a.try_acquire("h3", LONG).await?.is_some());
    Ok(())
}

#[tokio::test]
async fn recovers_after_flushall_and_after_a_restart_without_rebuilding_the_pool() -> Result<()> {
    let mut redis = caucus_harness::Redis::start();
    let sem = sem(pool(redis.url()).await?, "report")?;
    sem.register_worker("w1", 1, LONG).await?;
    let lease = sem.try_acquire("h1", LONG).await?.unwrap();

    redis.command("FLUSHALL");
    assert_eq!(sem.status().await?.capacity, 0);
    assert_eq!(
        sem.status().await?.epoch,
        None,
        "the epoch went with the data"
    );
    assert!(
        sem.try_acquire("h2", LONG).await?.is_none(),
        "no workers, no capacity"
    );
    assert!(
        !sem.renew(&lease, LONG).await?,
        "no recovery window (grace 0): the lease died with the data"
    );
    assert_eq!(sem.register_worker("w1", 1, LONG).await?, 1);
    let lease = sem.try_acquire("h2", LONG).await?.unwrap();

    redis.restart();
    // Every pooled connection now points at the dead server; the first call
    // must still succeed (the heartbeat re-registers, as after FLUSHALL).
    assert_eq!(sem.register_worker("w1", 1, LONG).await?, 1);
    assert!(!sem.renew(&lease, LONG).await?);
    assert!(sem.try_acquire("h3", LONG).await?.is_some());
    assert_eq!(sem.status().await?.in_use, 1);
    Ok(())
}

/// After a data loss no lease is granted for one grace period, while the
/// holders of leases granted before it re-register them; then capacity
/// counts them all, so it is not exceeded.
#[tokio::test]
async fn after_a_flush_holders_re_register_before_anyone_gets_a_new_lease() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let grace = Duration::from_millis(600);
    let sem = CapacitySemaphore::new(pool(redis.url()).await?, "caucus", "valuation")?
        .with_recovery_grace(grace);
    sem.register_worker("w1", 2, LONG).await?;
    // A fresh Redis has no epoch either: the first contact opened a window.
    let st = sem.status().await?;
    assert!(st.epoch.is_some() && st.recovering_ms > 0, "{st:?}");
    let mut a = eventually("the first window to end", Duration::from_secs(5), || {
        let sem = sem.clone();
        async move {
            Ok(match sem.acquire("a", LONG).await? {
                Acquired::Granted(l) => Some(l),
                _ => None,
            })
        }
    })
    .await?;
    let mut b = sem.try_acquire("b", LONG).await?.unwrap();
    assert_eq!(a.epoch, b.epoch);
    let before = a.epoch.clone();

    redis.command("FLUSHALL");
    // The heartbeat re-registers: capacity 2 again, but nothing is granted.
    assert_eq!(sem.register_worker("w1", 2, LONG).await?, 2);
    match sem.acquire("c", LONG).await? {
        Acquired::Recovering { remaining_ms } => {
            assert!(remaining_ms > 0 && remaining_ms <= 600, "{remaining_ms}")
        }
        other => panic!("a new lease during recovery: {other:?}"),
    }
    // The running holders re-create their leases.
    assert_eq!(sem.renew_lease(&mut a, LONG).await?, Renewed::Recreated);
    assert_ne!(a.epoch, before, "the lease moved to the new epoch");
    assert_eq!(sem.renew_lease(&mut a, LONG).await?, Renewed::Extended);
    assert_eq!(sem.renew_lease(&mut b, LONG).await?, Renewed::Recreated);
    assert_eq!(sem.status().await?.in_use, 2);
    // After the window: full, not recovering, and still nobody gets a third.
    let full = eventually("the window to end", Duration::from_secs(5), || {
        let sem = sem.clone();
        async move {
            Ok(match sem.acquire("c", LONG).await? {
                Acquired::Recovering { .. } => None,
                other => Some(other),
            })
        }
    })
    .await?;
    assert_eq!(full, Acquired::Full);
    assert_eq!(sem.status().await?.recovering_ms, 0);
    assert!(sem.release(&a).await?);
    assert!(sem.try_acquire("c", LONG).await?.is_some());
    Ok(())
}

/// A lease of an earlier epoch is re-created only inside the window: a
/// holder that comes back later has stopped (or must have), and a lease
/// removed without a data loss is gone for good.
#[tokio::test]
async fn leases_are_re_created_only_after_a_data_loss_and_inside_the_window() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let grace = Duration::from_millis(300);
    let sem = CapacitySemaphore::new(pool(redis.url()).await?, "caucus", "strategy")?
        .with_recovery_grace(grace);
    sem.register_worker("w1", 2, LONG).await?;
    let mut a = eventually("the first window to end", Duration::from_secs(5), || {
        let sem = sem.clone();
        async move { Ok(sem.try_acquire("a", LONG).await?) }
    })
    .await?;
    let mut b = sem.try_acquire("b", LONG).await?.unwrap();

    // Same epoch, lease removed (an operator, or it expired): gone.
    redis.command("ZREM caucus:{sem:strategy}:holders a");
    assert_eq!(sem.renew_lease(&mut a, LONG).await?, Renewed::Gone);

    // After a flush, a renewal past the window is too late.
    redis.command("FLUSHALL");
    sem.register_worker("w1", 2, LONG).await?;
    eventually("the window to end", Duration::from_secs(5), || {
        let sem = sem.clone();
        async move { Ok((sem.status().await?.recovering_ms == 0).then_some(())) }
    })
    .await?;
    assert_eq!(sem.renew_lease(&mut b, LONG).await?, Renewed::Gone);
    assert_eq!(sem.status().await?.in_use, 0);
    Ok(())
}

#[tokio::test]
async fn lists_agent_types_with_registered_workers() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let pool = pool(redis.url()).await?;
    for t in ["valuation", "screening", "fin.v2:eu"] {
        sem(pool.clone(), t)?.register_worker("w1", 1, LONG).await?;
    }
    CapacitySemaphore::new(pool.clone(), "other", "macro")?
        .register_worker("w1", 1, LONG)
        .await?;
    CapacitySemaphore::new(pool.clone(), "caucus", "lapsing")?
        .register_worker("w1", 1, Duration::from_millis(200))
        .await?;
    let types = eventually("the lapsed type to vanish", Duration::from_secs(5), || {
        let pool = pool.clone();
        async move {
            let t = CapacitySemaphore::agent_types(&pool, "caucus").await?;
            Ok((!t.iter().any(|t| t == "lapsing")).then_some(t))
        }
    })
    .await?;
    assert_eq!(types, ["fin.v2:eu", "screening", "valuation"]);
    assert_eq!(
        CapacitySemaphore::agent_types(&pool, "other").await?,
        ["macro"]
    );
    Ok(())
}

#[tokio::test]
async fn invalid_names_and_arguments_are_rejected_specifically() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let pool = pool(redis.url()).await?;
    for bad in ["valu{ation}", "", "two words", "a/b", "ü"] {
        let e = CapacitySemaphore::new(pool.clone(), "caucus", bad).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidName { kind: "agent type", name, .. } if name == bad),
            "{bad:?}: {e}"
        );
        assert!(e.to_string().contains("invalid agent type"), "{e}");
    }
    let e = CapacitySemaphore::new(pool.clone(), "cau}cus", "valuation").unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidName {
                kind: "key prefix",
                ..
            }
        ),
        "{e}"
    );

    let sem = CapacitySemaphore::new(pool, "caucus", "valuation")?;
    let e = sem.try_acquire("h", Duration::ZERO).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    let e = sem.register_worker("", 1, LONG).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    Ok(())
}
