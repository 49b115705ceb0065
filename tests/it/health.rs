//! Health tells the truth (issue 16 item 5): with Redis stopped (SIGSTOP)
//! or gone (killed), the coordinator's and a worker's `health` turn
//! `degraded` within one lease period, naming Redis; the coordinator's API
//! says `unavailable` (Redis) rather than `standby` while nobody can lead;
//! and everything is `ok` again once Redis is back.

use std::time::{Duration, Instant};

use crate::common::{coordinator, eventually, worker, Api};
use caucus_harness::Stack;
use serde_json::{json, Value};

const LEASE: Duration = Duration::from_secs(3);

async fn health(api: &Api, service: &str) -> Option<Value> {
    api.call(service, "health", Value::Null).await.ok()
}

/// Waits until `service` reports `status` and returns the reply.
async fn wait_health(api: &Api, service: &str, status: &str, within: Duration) -> Value {
    eventually(&format!("{service} health {status}"), within, || async {
        health(api, service).await.filter(|h| h["status"] == status)
    })
    .await
}

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// One status call, no retry on `standby`.
async fn status_once(api: &Api) -> Result<Value, caucus_shared::nats::ApiError> {
    caucus_shared::nats::api_request(
        &api.nats,
        &api.subjects,
        "coordinator",
        "status",
        &json!({"ids": []}),
        Duration::from_secs(5),
    )
    .await
}

/// Waits (up to `within`) for the lone coordinator's `status` to answer
/// `unavailable` naming Redis; `standby` on the way is a failure (no other
/// instance leads).
async fn wait_unavailable(api: &Api, within: Duration) -> String {
    let deadline = Instant::now() + within;
    loop {
        match status_once(api).await {
            Err(e) if e.code == "unavailable" => {
                assert!(e.message.contains("Redis"), "{e:?}");
                return e.message;
            }
            Err(e) if e.code == "standby" => panic!("a lone coordinator said standby: {e:?}"),
            other => {
                assert!(
                    Instant::now() < deadline,
                    "status still answers {other:?} with Redis down"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

fn env() -> Vec<(&'static str, &'static str)> {
    vec![("CAUCUS_COORDINATOR_LEADER_LEASE", "3s")]
}

/// Once Redis is back: the coordinator and the worker report `ok` again
/// (within three lease periods) and `status` answers.
async fn wait_recovered(api: &Api) {
    wait_health(api, "coordinator", "ok", LEASE * 3).await;
    wait_health(api, "worker", "ok", LEASE * 3).await;
    crate::common::call(api, "status", json!({"ids": []}))
        .await
        .expect("status after Redis is back");
}

#[tokio::test(flavor = "multi_thread")]
async fn stopped_redis_degrades_health_and_status_says_unavailable_not_standby() {
    let stack = Stack::start();
    let c = coordinator(&stack, &env());
    let w = worker(&stack, "alpha", 3, "noop", &[]);
    let api = Api::connect(&stack).await;
    c.wait_for_output("leading", Duration::from_secs(20));
    wait_health(&api, "coordinator", "ok", Duration::from_secs(10)).await;
    wait_health(&api, "worker", "ok", Duration::from_secs(10)).await;
    w.wait_for_output("registered", Duration::from_secs(20));
    status_once(&api).await.expect("status while leading");

    let redis_pid = stack.redis.pid().expect("redis pid");
    let warns_before = c.output().matches("WARN").count();
    let worker_warns_before = w.output().matches("WARN").count();
    signal(redis_pid, "-STOP");
    let stopped = Instant::now();
    let h = wait_health(&api, "coordinator", "degraded", LEASE).await;
    assert!(
        h["degraded"]["redis"]
            .as_str()
            .unwrap_or_default()
            .contains("Redis unreachable"),
        "{h}"
    );
    let hw = wait_health(&api, "worker", "degraded", LEASE).await;
    assert!(hw["degraded"].to_string().contains("Redis"), "{hw}");
    assert!(stopped.elapsed() <= LEASE + Duration::from_secs(1));

    let why = wait_unavailable(&api, LEASE * 3).await;
    println!("status with Redis stopped: {why}");
    // Stay down a while: warnings are rate-limited, not repeated per tick.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let h = health(&api, "coordinator").await.expect("health");
    assert_eq!(h["status"], "degraded", "{h}");
    assert!(h["degraded"]["leadership"].as_str().is_some(), "{h}");
    let warns = c.output().matches("WARN").count() - warns_before;
    assert!(
        warns <= 10,
        "{warns} warnings in a few seconds:\n{}",
        c.output()
    );
    let warns = w.output().matches("WARN").count() - worker_warns_before;
    assert!(
        warns <= 10,
        "{warns} warnings in a few seconds:\n{}",
        w.output()
    );

    signal(redis_pid, "-CONT");
    wait_recovered(&api).await;
    drop(w);
}

#[tokio::test(flavor = "multi_thread")]
async fn killed_redis_degrades_health_until_it_restarts() {
    let mut stack = Stack::start();
    let c = coordinator(&stack, &env());
    let w = worker(&stack, "alpha", 1, "noop", &[]);
    let api = Api::connect(&stack).await;
    c.wait_for_output("leading", Duration::from_secs(20));
    wait_health(&api, "coordinator", "ok", Duration::from_secs(10)).await;
    wait_health(&api, "worker", "ok", Duration::from_secs(10)).await;

    // Registered in Redis (and bound to its consumers) before Redis goes:
    // a worker that cannot register at start exits instead.
    w.wait_for_output("registered", Duration::from_secs(20));
    stack.redis.kill();
    wait_health(&api, "coordinator", "degraded", LEASE).await;
    wait_health(&api, "worker", "degraded", LEASE).await;
    let why = wait_unavailable(&api, LEASE * 3).await;
    assert!(
        why.contains("leader lock") || why.contains("Redis unreachable"),
        "{why}"
    );
    let submit = caucus_shared::nats::api_request(
        &api.nats,
        &api.subjects,
        "coordinator",
        "submit",
        &json!({"items": ["x"], "pipeline": crate::common::pipeline("p", json!([{"name": "x", "agent": "alpha", "expected_duration": 1.0}]))}),
        Duration::from_secs(5),
    )
    .await;
    match submit {
        Err(e) => assert_eq!(e.code, "unavailable", "{e:?}"),
        Ok(v) => panic!("submit with Redis down: {v}"),
    }

    stack.redis.restart();
    wait_recovered(&api).await;
    drop(w);
}

#[tokio::test(flavor = "multi_thread")]
async fn correlator_health_names_the_leader_lease_while_redis_is_gone() {
    let mut stack = Stack::start();
    crate::topology_admin::init(&stack, &[], &[]);
    let c = stack
        .service("caucus-correlator")
        .env("CAUCUS_CORRELATOR_LEADER_LEASE", "3s")
        .env("CAUCUS_TELEMETRY_LOG_LEVEL", "info")
        .start();
    let api = Api::connect(&stack).await;
    c.wait_for_output("leading", Duration::from_secs(20));
    wait_health(&api, "correlator", "ok", Duration::from_secs(10)).await;

    stack.redis.kill();
    wait_health(&api, "correlator", "degraded", LEASE).await;
    let h = eventually("correlator leadership degraded", LEASE * 2, || async {
        health(&api, "correlator")
            .await
            .filter(|h| h["degraded"]["leadership"].is_string())
    })
    .await;
    assert!(
        h["degraded"]["leadership"]
            .as_str()
            .unwrap_or_default()
            .contains("Redis unreachable"),
        "{h}"
    );

    stack.redis.restart();
    wait_health(&api, "correlator", "ok", LEASE * 3).await;
}
