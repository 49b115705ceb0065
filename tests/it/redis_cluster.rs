//! A coordinator and workers on a six-node Redis Cluster
//! (`redis.mode = cluster`, three masters with a replica each): a batch
//! runs while the master holding the agent type's capacity semaphore is
//! SIGKILLed and its replica takes over. Every workflow completes, each
//! completion the coordinator recorded happened once, and the capacity cap
//! held throughout.

use std::time::Duration;

use crate::cluster_common::{assert_each_completion_applied_once, submit_numbered};
use crate::common::{coordinator, peak_concurrency, pipeline, task_events, worker, Api};
use caucus_harness::{RedisCluster, Service, Stack};
use serde_json::json;

/// Capacity cap of the agent type (below the workers' 6 slots, so only the
/// semaphore in Redis keeps it).
const CAP: usize = 3;

/// Env of every process: Redis Cluster, and a worker lease long enough to
/// outlast a failover (node timeout 1 s plus the election), so no running
/// task loses its lease and the completed events cover every run.
fn env(url: &str) -> Vec<(&'static str, String)> {
    vec![
        ("CAUCUS_REDIS_MODE", "cluster".into()),
        ("CAUCUS_REDIS_URL", url.into()),
        ("CAUCUS_WORKER_LEASE_TTL", "6s".into()),
        ("CAUCUS_WORKER_HEARTBEAT_INTERVAL", "300ms".into()),
        ("CAUCUS_WORKER_CAPACITY_CAP__ALPHA", CAP.to_string()),
    ]
}

fn refs<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_survives_a_redis_master_killed_mid_run() {
    let stack = Stack::start();
    let mut cluster = RedisCluster::start();
    let env = env(&cluster.url());
    let env = refs(&env);
    let mut c = coordinator(&stack, &env);
    let mut workers: Vec<Service> = (0..3)
        .map(|_| worker(&stack, "alpha", 2, "sleep:300", &env))
        .collect();
    let api = Api::connect(&stack).await;
    let stages = json!([{"name": "x", "agent": "alpha", "expected_duration": 1.0}]);
    let ids = submit_numbered(&api, pipeline("cluster", stages), "RC", 0..30).await;
    api.wait_some_completed(&ids, 6, Duration::from_secs(60))
        .await;

    let owner = cluster.master_for("caucus:{sem:alpha}:holders");
    cluster.kill(owner);
    tokio::task::block_in_place(|| cluster.wait_failover());
    assert_ne!(cluster.master_for("caucus:{sem:alpha}:holders"), owner);

    let wfs = api.wait_completed(&ids, Duration::from_secs(120)).await;
    let events = task_events(&api.nats).await;
    assert_each_completion_applied_once(&wfs, &["x"], &events);
    for w in &workers {
        assert!(
            !w.output().contains("capacity lease lost"),
            "a lease lapsed, so the completed events miss a run: {}",
            w.output()
        );
    }
    let peak = peak_concurrency(&events, "alpha");
    assert!(peak <= CAP, "{peak} tasks ran at once with a cap of {CAP}");
    assert_eq!(
        peak, CAP,
        "every capacity slot should have been busy at once"
    );
    assert!(c.running(), "coordinator exited: {}", c.output());
    for w in &mut workers {
        assert!(w.running(), "worker exited: {}", w.output());
    }
}
