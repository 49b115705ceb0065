//! A coordinator and a worker behind Redis Sentinel
//! (`redis.mode = sentinel`: the sentinels' addresses and the master's
//! name): workflows run through a failover, the master SIGKILLed while
//! their tasks run, and complete on the promoted replica.

use std::time::Duration;

use crate::common::{coordinator, eventually, pipeline, worker, Api};
use caucus_harness::{RedisSentinel, Stack};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn workflows_run_through_a_sentinel_failover() {
    let stack = Stack::start();
    let mut sentinel = RedisSentinel::start();
    let url = sentinel.url();
    // The worker lease outlasts the failover (down-after 1 s, then the
    // sentinels' vote and the promotion), so the running tasks keep theirs.
    let env = [
        ("CAUCUS_REDIS_MODE", "sentinel"),
        ("CAUCUS_REDIS_URL", url.as_str()),
        ("CAUCUS_REDIS_SENTINEL_MASTER", sentinel.master_name()),
        ("CAUCUS_WORKER_LEASE_TTL", "8s"),
        ("CAUCUS_WORKER_HEARTBEAT_INTERVAL", "300ms"),
    ];
    let mut c = coordinator(&stack, &env);
    let mut w = worker(&stack, "alpha", 2, "sleep:1500", &env);
    let api = Api::connect(&stack).await;
    let stages = json!([{"name": "x", "agent": "alpha", "expected_duration": 1.0}]);
    let ids = api
        .submit(&["S1", "S2", "S3", "S4"], pipeline("sentinel", stages), 10)
        .await;
    eventually("two tasks running", Duration::from_secs(30), || async {
        let running = api
            .status(&ids)
            .await
            .iter()
            .filter(|w| w["tasks"]["x"]["state"] == "running")
            .count();
        (running == 2).then_some(())
    })
    .await;

    let before = sentinel.master_port().expect("a master");
    let after = tokio::task::block_in_place(|| sentinel.kill_master());
    assert_ne!(before, after);

    let wfs = api.wait_completed(&ids, Duration::from_secs(90)).await;
    assert!(wfs.iter().all(|w| w["tasks"]["x"]["state"] == "completed"));
    assert!(
        !w.output().contains("capacity lease lost"),
        "a running task lost its lease over the failover: {}",
        w.output()
    );
    assert!(c.running(), "coordinator exited: {}", c.output());
    assert!(w.running(), "worker exited: {}", w.output());
}
