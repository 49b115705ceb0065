//! Partitions divided among members with fenced leases
//! (`caucus_shared::redis::partitions`), against a real redis-server.
//!
//! A member here is `divide` plus a server that holds each tenure until its
//! lease is lost, then (after an optional drain, like a scheduler finishing
//! its last write) drops it. "Killing" a member aborts both without a
//! release, as SIGKILL would. A sampler checks throughout that no partition
//! ever has two holders whose lease is valid.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use caucus_shared::config::RedisConfig;
use caucus_shared::health::Health;
use caucus_shared::redis::partitions::{divide, PartitionPlan, Tenure};
use caucus_shared::redis::{connect, RedisPool};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const PARTITIONS: u32 = 8;
const LEASE: Duration = Duration::from_secs(2);
const WAIT: Duration = Duration::from_secs(15);

fn plan() -> PartitionPlan {
    PartitionPlan {
        group: "partitions:test".into(),
        locks: (0..PARTITIONS)
            .map(|p| format!("test-partition-{p}"))
            .collect(),
        lease: LEASE,
    }
}

/// What happened to a partition, and when.
#[derive(Debug, Clone)]
enum Step {
    Taken { epoch: u64 },
    Dropped,
}

type Log = Arc<Mutex<Vec<(Instant, String, u32, Step)>>>;
type Holding = Arc<Mutex<BTreeMap<u32, Tenure>>>;

struct Member {
    token: String,
    holding: Holding,
    shutdown: CancellationToken,
    tasks: JoinSet<()>,
}

impl Member {
    fn start(pool: &RedisPool, token: &str, drain: Duration, log: &Log) -> Member {
        let holding: Holding = Arc::default();
        let shutdown = CancellationToken::new();
        let mut tasks = JoinSet::new();
        let (tx, mut rx) = mpsc::channel::<Tenure>(16);
        {
            let (pool, token, shutdown) = (pool.clone(), token.to_string(), shutdown.clone());
            tasks.spawn(async move {
                divide(
                    pool,
                    "caucus",
                    &token,
                    plan(),
                    tx,
                    shutdown,
                    Health::default(),
                )
                .await
                .expect("divide");
            });
        }
        let (h, l, t) = (holding.clone(), log.clone(), token.to_string());
        tasks.spawn(async move {
            let mut serving = JoinSet::new();
            while let Some(tenure) = rx.recv().await {
                let p = tenure.partition();
                let lost = tenure.lease().lost().clone();
                l.lock().unwrap().push((
                    Instant::now(),
                    t.clone(),
                    p,
                    Step::Taken {
                        epoch: tenure.lease().epoch(),
                    },
                ));
                h.lock().unwrap().insert(p, tenure);
                let (h, l, t) = (h.clone(), l.clone(), t.clone());
                serving.spawn(async move {
                    lost.cancelled().await;
                    tokio::time::sleep(drain).await;
                    // Logged before the drop: the lock is free only after.
                    l.lock()
                        .unwrap()
                        .push((Instant::now(), t, p, Step::Dropped));
                    h.lock().unwrap().remove(&p);
                });
            }
            // Tenures still held end with their holder.
            serving.join_all().await;
        });
        Member {
            token: token.to_string(),
            holding,
            shutdown,
            tasks,
        }
    }

    fn held(&self) -> BTreeSet<u32> {
        self.holding.lock().unwrap().keys().copied().collect()
    }

    /// The partitions whose lease this member may act on now.
    fn valid(&self) -> BTreeSet<u32> {
        self.holding
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, t)| t.lease().is_valid())
            .map(|(p, _)| *p)
            .collect()
    }

    /// As SIGKILL: nothing is released, the tenures vanish unreleased.
    fn kill(mut self) {
        self.tasks.abort_all();
        std::mem::forget(std::mem::take(&mut *self.holding.lock().unwrap()));
    }
}

async fn pool(url: String) -> Result<RedisPool> {
    Ok(connect(&RedisConfig {
        url,
        ..RedisConfig::default()
    })
    .await?)
}

/// Polls `cond` every 10 ms until it holds or `WAIT` passes.
async fn until(what: &str, mut cond: impl FnMut() -> bool) -> Instant {
    let deadline = Instant::now() + WAIT;
    loop {
        if cond() {
            return Instant::now();
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Samples every 5 ms until dropped: a partition with two valid holders at
/// once fails the test that owns it.
fn no_double_holder(members: Vec<(String, Holding)>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let mut seen: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
            for (token, h) in &members {
                for (p, t) in h.lock().unwrap().iter() {
                    if t.lease().is_valid() {
                        seen.entry(*p).or_default().push(token);
                    }
                }
            }
            for (p, who) in seen {
                assert!(who.len() <= 1, "partition {p} held validly by {who:?}");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
}

fn epochs(log: &Log, token: &str) -> BTreeMap<u32, u64> {
    let mut out = BTreeMap::new();
    for (_, t, p, step) in log.lock().unwrap().iter() {
        if let (true, Step::Taken { epoch }) = (t == token, step) {
            out.insert(*p, *epoch);
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_split_eight_and_the_survivor_takes_all_within_the_lease() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let pool = pool(redis.url()).await?;
    let log: Log = Arc::default();
    let a = Member::start(&pool, "member-a", Duration::ZERO, &log);
    let b = Member::start(&pool, "member-b", Duration::ZERO, &log);
    let sampler = no_double_holder(vec![
        (a.token.clone(), a.holding.clone()),
        (b.token.clone(), b.holding.clone()),
    ]);
    until("a 4/4 split", || {
        a.valid().len() == 4 && b.valid().len() == 4
    })
    .await;
    // Sorted members "member-a", "member-b": a serves the even partitions.
    assert_eq!(a.held(), (0..PARTITIONS).filter(|p| p % 2 == 0).collect());
    assert_eq!(b.held(), (0..PARTITIONS).filter(|p| p % 2 == 1).collect());
    let b_epochs = epochs(&log, "member-b");

    let killed = Instant::now();
    b.kill();
    let all = until("the survivor to hold all 8", || {
        a.valid().len() == PARTITIONS as usize
    })
    .await;
    let took = all - killed;
    eprintln!("the survivor held all {PARTITIONS} partitions {took:?} after the kill");
    assert!(
        took <= LEASE + Duration::from_millis(300),
        "the survivor held every partition {took:?} after the kill (lease {LEASE:?})"
    );
    let a_epochs = epochs(&log, "member-a");
    for (p, e) in &b_epochs {
        assert!(a_epochs[p] > *e, "partition {p}: fenced above {e}");
    }
    assert!(!sampler.is_finished(), "{:?}", sampler.await);
    sampler.abort();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_joiner_gets_its_share_only_after_the_holder_let_go() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let pool = pool(redis.url()).await?;
    let log: Log = Arc::default();
    // The first member drains for 300 ms after losing a partition, as a
    // scheduler finishing its last write would.
    let drain = Duration::from_millis(300);
    let a = Member::start(&pool, "member-a", drain, &log);
    until("the first member to hold all 8", || {
        a.valid().len() == PARTITIONS as usize
    })
    .await;
    let b = Member::start(&pool, "member-b", Duration::ZERO, &log);
    let sampler = no_double_holder(vec![
        (a.token.clone(), a.holding.clone()),
        (b.token.clone(), b.holding.clone()),
    ]);
    until("a 4/4 split", || {
        a.held().len() == 4 && b.valid().len() == 4
    })
    .await;

    let log = log.lock().unwrap().clone();
    for p in b.held() {
        let dropped = log
            .iter()
            .find(|(_, t, q, s)| t == "member-a" && *q == p && matches!(s, Step::Dropped))
            .map(|(at, ..)| *at)
            .expect("the first member let the partition go");
        let taken = log
            .iter()
            .find(|(_, t, q, s)| t == "member-b" && *q == p && matches!(s, Step::Taken { .. }))
            .map(|(at, ..)| *at)
            .expect("the joiner took it");
        assert!(taken > dropped, "partition {p} taken before it was let go");
    }
    // Nothing else moved: the first member kept its own partitions.
    let moved_back = log
        .iter()
        .filter(|(_, t, _, s)| t == "member-a" && matches!(s, Step::Taken { .. }))
        .count();
    assert_eq!(moved_back, PARTITIONS as usize, "no partition moved twice");
    assert!(!sampler.is_finished(), "{:?}", sampler.await);
    sampler.abort();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_shuts_down_hands_over_at_once() -> Result<()> {
    let redis = caucus_harness::Redis::start();
    let pool = pool(redis.url()).await?;
    let log: Log = Arc::default();
    let a = Member::start(&pool, "member-a", Duration::ZERO, &log);
    let mut b = Member::start(&pool, "member-b", Duration::ZERO, &log);
    until("a 4/4 split", || {
        a.valid().len() == 4 && b.valid().len() == 4
    })
    .await;

    let stopped = Instant::now();
    b.shutdown.cancel();
    while let Some(r) = b.tasks.join_next().await {
        r.expect("a member shuts down cleanly");
    }
    assert!(b.held().is_empty(), "every tenure dropped");
    let all = until("the other member to hold all 8", || {
        a.valid().len() == PARTITIONS as usize
    })
    .await;
    // Released and left the group: no lease had to run out.
    assert!(
        all - stopped < LEASE / 2,
        "took {:?} after a clean shutdown",
        all - stopped
    );
    Ok(())
}
