//! Autoscaling on the real backlog (issue 12 item 3): with more valuation
//! tasks ready than valuation capacity, `GET /scaling/valuation` reports
//! the backlog while the task consumer `workers-valuation` has nothing
//! pending (the coordinator dispatches no more than live capacity, so
//! JetStream lag cannot drive a scaler); a standby coordinator's endpoint
//! reports the leader's figures; an unknown agent type reports zeros.

use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull};
use caucus_harness::{free_port, Stack};
use caucus_shared::nats::consumers::task_consumer_name;
use caucus_shared::subjects::{StreamKind, Subjects};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{coordinator, eventually, pipeline, worker, Api};

/// Valuation tasks submitted at once, each on one item.
const ITEMS: [&str; 6] = ["V1", "V2", "V3", "V4", "V5", "V6"];

/// `GET path` on `addr` over plain HTTP/1.1: the status and the JSON body
/// (`Null` when the body is not JSON).
async fn get(addr: &str, path: &str) -> (u16, Value) {
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("send request");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await.expect("read response");
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("a status code");
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// The task consumer's `num_pending`: dispatches JetStream holds that no
/// worker has been handed yet (what the nats-jetstream KEDA scaler reads).
async fn consumer_lag(js: &jetstream::Context, agent: &str) -> u64 {
    let stream = Subjects::default().stream(StreamKind::Tasks);
    let mut c = js
        .get_consumer_from_stream::<pull::Config, _, _>(task_consumer_name(agent), stream)
        .await
        .expect("the task consumer");
    c.info().await.expect("consumer info").num_pending
}

/// The figures two views must share to be "the same backlog" (the oldest
/// wait grows between two reads).
fn figures(v: &Value) -> (u64, u64, u64) {
    (
        v["queue_depth"].as_u64().expect("queue_depth"),
        v["in_flight"].as_u64().expect("in_flight"),
        v["capacity"].as_u64().expect("capacity"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_endpoint_reports_the_backlog_that_consumer_lag_does_not() {
    let stack = Stack::start();
    let leader_addr = format!("127.0.0.1:{}", free_port());
    let standby_addr = format!("127.0.0.1:{}", free_port());
    let _leader = coordinator(
        &stack,
        &[("CAUCUS_TELEMETRY_METRICS_ADDR", leader_addr.as_str())],
    );
    // The first coordinator leads once its own endpoint answers (nobody
    // else could); the second then stands by.
    eventually(
        "the first coordinator to lead",
        Duration::from_secs(30),
        || {
            let addr = leader_addr.clone();
            async move { (get(&addr, "/scaling/valuation").await.0 == 200).then_some(()) }
        },
    )
    .await;
    let _standby = coordinator(
        &stack,
        &[("CAUCUS_TELEMETRY_METRICS_ADDR", standby_addr.as_str())],
    );
    let _w = worker(&stack, "valuation", 1, "sleep:1000", &[]);
    let api = Api::connect(&stack).await;
    let js = jetstream::new(api.nats.clone());
    let p = pipeline(
        "valuation-only",
        json!([{"name": "valuation", "agent": "valuation", "expected_duration": 1.0}]),
    );
    let ids = api.submit(&ITEMS, p, 10).await;

    // A moment with a backlog the coordinator holds and nothing pending
    // on the consumer.
    let (view, lag) = eventually(
        "a valuation backlog with the consumer's lag at 0",
        Duration::from_secs(30),
        || {
            let addr = leader_addr.clone();
            let js = js.clone();
            async move {
                let (status, v) = get(&addr, "/scaling/valuation").await;
                assert_eq!(status, 200, "{v}");
                let lag = consumer_lag(&js, "valuation").await;
                // The worker's slot registered (a task is then running).
                let running = v["capacity"] == 1 && v["in_flight"] == 1;
                let backlog = v["queue_depth"].as_u64() > Some(0)
                    && v["oldest_wait_seconds"].as_f64() > Some(0.0);
                (running && backlog && lag == 0).then_some((v, lag))
            }
        },
    )
    .await;
    assert_eq!(lag, 0);
    assert_eq!(view["schema_version"], 1, "{view}");
    assert_eq!(view["agent_type"], "valuation", "{view}");
    // One running, the rest waiting in the coordinator, none in JetStream.
    let depth = view["queue_depth"].as_u64().unwrap();
    assert!(depth < ITEMS.len() as u64, "{view}");

    // The standby asks the leader: between two reads of the leader that
    // agree, the standby reports the same figures.
    let (before, seen, after) = eventually(
        "the standby to report the leader's figures",
        Duration::from_secs(20),
        || {
            let (l, s) = (leader_addr.clone(), standby_addr.clone());
            async move {
                let (_, before) = get(&l, "/scaling/valuation").await;
                let (status, seen) = get(&s, "/scaling/valuation").await;
                assert_eq!(status, 200, "standby: {seen}");
                let (_, after) = get(&l, "/scaling/valuation").await;
                let steady = figures(&before) == figures(&after) && figures(&after).0 > 0;
                (steady && figures(&seen) == figures(&before)).then_some((before, seen, after))
            }
        },
    )
    .await;
    let wait = |v: &Value| v["oldest_wait_seconds"].as_f64().unwrap();
    assert!(
        wait(&before) <= wait(&seen) && wait(&seen) <= wait(&after),
        "oldest wait out of order: leader {before}, standby {seen}, leader {after}"
    );
    assert_eq!(seen["schema_version"], 1, "{seen}");

    // A type nobody runs: zeros, from either instance.
    for addr in [&leader_addr, &standby_addr] {
        let (status, v) = get(addr, "/scaling/no_such_agent").await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(
            v,
            json!({"schema_version": 1, "agent_type": "no_such_agent", "queue_depth": 0,
                   "oldest_wait_seconds": 0.0, "in_flight": 0, "capacity": 0})
        );
        // A name no agent type can have is the caller's mistake.
        let (status, v) = get(addr, "/scaling/bad%20name").await;
        assert_eq!(status, 400, "{v}");
        assert_eq!(v["error"]["code"], "bad_request", "{v}");
    }

    // Drained: the backlog is gone.
    api.wait_completed(&ids, Duration::from_secs(60)).await;
    let (_, v) = get(&standby_addr, "/scaling/valuation").await;
    assert_eq!(figures(&v), (0, 0, 1), "{v}");
}

/// With no coordinator able to lead (Redis, which holds the leader lock,
/// is gone) the endpoint answers 503 naming why, so KEDA does not read a
/// missing backlog as an empty one; once Redis is back it answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_leader_is_503() {
    let mut stack = Stack::start();
    let addr = format!("127.0.0.1:{}", free_port());
    let _c = coordinator(&stack, &[("CAUCUS_TELEMETRY_METRICS_ADDR", addr.as_str())]);
    eventually("the coordinator to lead", Duration::from_secs(30), || {
        let addr = addr.clone();
        async move { (get(&addr, "/scaling/valuation").await.0 == 200).then_some(()) }
    })
    .await;

    stack.redis.kill();
    let body = eventually("503 without a leader", Duration::from_secs(30), || {
        let addr = addr.clone();
        async move {
            let (status, v) = get(&addr, "/scaling/valuation").await;
            (status == 503).then_some(v)
        }
    })
    .await;
    assert!(
        ["unavailable", "standby"].contains(&body["error"]["code"].as_str().unwrap_or("")),
        "{body}"
    );
    assert!(body["error"]["message"].is_string(), "{body}");

    stack.redis.restart();
    eventually(
        "the coordinator to lead again",
        Duration::from_secs(30),
        || {
            let addr = addr.clone();
            async move { (get(&addr, "/scaling/valuation").await.0 == 200).then_some(()) }
        },
    )
    .await;
}
