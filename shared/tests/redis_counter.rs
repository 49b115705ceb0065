//! Bounded counter (expert queues) against a real redis-server.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use caucus_shared::config::RedisConfig;
use caucus_shared::redis::{connect, AddOutcome, BoundedCounter, RedisPool};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_concurrent_adders_never_exceed_max() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let counter = BoundedCounter::new(pool(redis.url()).await?, "caucus")?;
    let in_queue = Arc::new(AtomicUsize::new(0));
    let high_water = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..30 {
        let (counter, in_queue, high_water) =
            (counter.clone(), in_queue.clone(), high_water.clone());
        tasks.push(tokio::spawn(async move {
            let member = format!("debate-{i}");
            let mut done = 0;
            while done < 3 {
                let out = counter.try_add("expert-1", &member, 3, LONG).await?;
                anyhow::ensure!(out.count <= 3, "count {} over max", out.count);
                if !out.added {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    continue;
                }
                let n = in_queue.fetch_add(1, Ordering::SeqCst) + 1;
                high_water.fetch_max(n, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                in_queue.fetch_sub(1, Ordering::SeqCst);
                anyhow::ensure!(counter.remove("expert-1", &member).await?, "remove");
                done += 1;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let hw = high_water.load(Ordering::SeqCst);
    assert!(hw <= 3, "high-water mark {hw} over max 3");
    assert_eq!(hw, 3, "contention never filled the queue");
    assert_eq!(counter.count("expert-1").await?, 0);
    Ok(())
}

#[tokio::test]
async fn adding_is_idempotent_per_member() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let c = BoundedCounter::new(pool(redis.url()).await?, "caucus")?;
    let yes = |count| AddOutcome { added: true, count };
    assert_eq!(c.try_add("expert-2", "d1", 3, LONG).await?, yes(1));
    assert_eq!(c.try_add("expert-2", "d1", 3, LONG).await?, yes(1));
    assert_eq!(c.try_add("expert-2", "d2", 3, LONG).await?, yes(2));
    assert_eq!(c.try_add("expert-2", "d3", 3, LONG).await?, yes(3));
    // Full: a member already in is renewed, a new one is refused.
    assert_eq!(c.try_add("expert-2", "d2", 3, LONG).await?, yes(3));
    assert_eq!(
        c.try_add("expert-2", "d4", 3, LONG).await?,
        AddOutcome {
            added: false,
            count: 3
        }
    );
    // Counters are independent per key.
    assert_eq!(c.try_add("expert-3", "d4", 3, LONG).await?, yes(1));

    let mut m = c.members("expert-2").await?;
    m.sort();
    assert_eq!(m, ["d1", "d2", "d3"]);
    assert!(c.remove("expert-2", "d2").await?);
    assert!(!c.remove("expert-2", "d2").await?);
    assert_eq!(c.count("expert-2").await?, 2);
    assert_eq!(c.try_add("expert-2", "d4", 3, LONG).await?, yes(3));
    Ok(())
}

#[tokio::test]
async fn expired_members_free_their_place() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let c = BoundedCounter::new(pool(redis.url()).await?, "caucus")?;
    c.try_add("expert-9", "crashed", 2, Duration::from_millis(300))
        .await?;
    c.try_add("expert-9", "alive", 2, LONG).await?;
    assert!(!c.try_add("expert-9", "new", 2, LONG).await?.added);

    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let out = c.try_add("expert-9", "new", 2, LONG).await?;
        if out.added {
            assert_eq!(out.count, 2);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "expired member never freed its place"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let mut m = c.members("expert-9").await?;
    m.sort();
    assert_eq!(m, ["alive", "new"]);
    assert!(!c.remove("expert-9", "crashed").await?);
    Ok(())
}

#[tokio::test]
async fn invalid_queue_names_are_rejected() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let c = BoundedCounter::new(pool(redis.url()).await?, "caucus")?;
    let e = c.try_add("expert {1}", "d", 3, LONG).await.unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidName {
                kind: "queue name",
                ..
            }
        ),
        "{e}"
    );
    let e = c.try_add("expert-1", "", 3, LONG).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    Ok(())
}
