//! The pre-debate sync lock holds the worker's findings for real: while an
//! agent's lock (`caucus:{lock:debate-sync:<agent>}`) is taken, the
//! findings of that agent's tasks do not reach CAUCUS_FINDINGS (nor does
//! the task complete); once it is released they land. A lock held past
//! `worker.sync_lock_wait` is logged and the finding published anyway.
//! Real servers, real coordinator and worker processes; the test itself
//! holds the lock as the facilitator's snapshot would.

use std::time::{Duration, Instant};

use crate::common::*;
use caucus_harness::Stack;
use caucus_shared::redis::sync_lock_key;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(30);
/// How long the test watches for a finding that must not appear.
const HELD_FOR: Duration = Duration::from_millis(1500);

async fn redis_conn(stack: &Stack) -> redis::aio::MultiplexedConnection {
    redis::Client::open(stack.redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Takes `agent`'s sync lock for `ttl` as the facilitator does (SET NX PX).
async fn hold_lock(conn: &mut redis::aio::MultiplexedConnection, agent: &str, ttl: Duration) {
    let ok: Option<String> = redis::cmd("SET")
        .arg(sync_lock_key("caucus", agent).unwrap())
        .arg("test-snapshot")
        .arg("NX")
        .arg("PX")
        .arg(ttl.as_millis() as u64)
        .query_async(conn)
        .await
        .unwrap();
    assert_eq!(ok.as_deref(), Some("OK"), "the lock was free");
}

async fn release_lock(conn: &mut redis::aio::MultiplexedConnection, agent: &str) {
    let n: i64 = redis::cmd("DEL")
        .arg(sync_lock_key("caucus", agent).unwrap())
        .query_async(conn)
        .await
        .unwrap();
    assert_eq!(n, 1, "the lock was still held when released");
}

async fn lock_held(conn: &mut redis::aio::MultiplexedConnection, agent: &str) -> bool {
    let owner: Option<String> = redis::cmd("GET")
        .arg(sync_lock_key("caucus", agent).unwrap())
        .query_async(conn)
        .await
        .unwrap();
    owner.is_some()
}

/// Findings `agent` published so far (envelopes on `caucus.findings.>`).
async fn findings_of(api: &Api, agent: &str) -> Vec<Stored> {
    stream_messages(&api.nats, "CAUCUS_FINDINGS", "caucus.findings.>")
        .await
        .into_iter()
        .filter(|m| m.body["from_agent"] == agent)
        .collect()
}

fn events_of<'a>(events: &'a [Value], wf: &str, status: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["workflow_id"] == wf && e["status"] == status)
        .collect()
}

fn one_stage(agent: &str) -> Value {
    pipeline(
        "sync-gate",
        json!([{ "name": agent, "agent": agent, "expected_duration": 1.0 }]),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_builtin_agents_finding_waits_for_its_sync_lock_and_lands_once_it_is_released() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let _w = worker(&stack, "financial", 1, "builtin", &[]);
    let api = Api::connect(&stack).await;
    let mut redis = redis_conn(&stack).await;

    // A snapshot of `financial` is being cut: its lock is taken.
    hold_lock(&mut redis, "financial", Duration::from_secs(60)).await;
    let wf = api.submit(&["AAPL"], one_stage("financial"), 1000).await;
    let wf = &wf[0];
    eventually("the financial task to start", WAIT, || async {
        let ev = task_events(&api.nats).await;
        (!events_of(&ev, wf, "started").is_empty()).then_some(())
    })
    .await;
    // The built-in analysis takes milliseconds; its findings are ready, but
    // they wait for the lock, and so does the task's completion.
    tokio::time::sleep(HELD_FOR).await;
    assert!(lock_held(&mut redis, "financial").await);
    assert_eq!(
        findings_of(&api, "financial").await.len(),
        0,
        "no finding of financial while its sync lock is held"
    );
    let ev = task_events(&api.nats).await;
    assert!(events_of(&ev, wf, "completed").is_empty());
    let cut = {
        let js = async_nats::jetstream::new(api.nats.clone());
        let mut s = js.get_stream("CAUCUS_FINDINGS").await.unwrap();
        s.info().await.unwrap().state.last_sequence
    };

    // The snapshot is cut: the lock goes, the findings follow.
    release_lock(&mut redis, "financial").await;
    let released = Instant::now();
    eventually("financial's first finding", WAIT, || async {
        (!findings_of(&api, "financial").await.is_empty()).then_some(())
    })
    .await;
    let landed = released.elapsed();
    assert!(
        landed < Duration::from_secs(5),
        "published soon after the release ({landed:?})"
    );
    // The worker publishes its findings one after another (the capex
    // anomalies, then the margin), all before `completed`: read them once
    // the task is done, not when the first one is seen.
    api.wait_completed(std::slice::from_ref(wf), WAIT).await;
    let found = findings_of(&api, "financial").await;
    assert!(found
        .iter()
        .any(|f| f.body["content"]["metric"] == "operating_margin"
            && f.subject == "caucus.findings.AAPL"));
    for f in &found {
        assert_eq!(f.body["correlation_id"], json!(wf));
        assert!(f.msg_id.as_deref().unwrap().contains(":finding:"));
    }
    // Every finding landed after the cut taken while the lock was held.
    let all = {
        let js = async_nats::jetstream::new(api.nats.clone());
        let mut s = js.get_stream("CAUCUS_FINDINGS").await.unwrap();
        s.info().await.unwrap().state.messages
    };
    assert_eq!(cut, 0);
    assert_eq!(all as usize, found.len());
    // Waiting kept the task's message and lease alive: it ran once.
    let ev = task_events(&api.nats).await;
    assert_eq!(events_of(&ev, wf, "started").len(), 1, "{ev:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_agents_finding_held_past_the_wait_is_published_anyway_with_an_error_logged() {
    let stack = Stack::start();
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    // An outside agent behind `exec:` reporting one finding.
    let handler = format!(
        "exec:touch {}; echo '{{\"ok\": true, \"findings\": [{{\"finding\": \"new price data\", \"confidence\": 0.9}}]}}'",
        ran.display()
    );
    let _c = coordinator(&stack, &[]);
    let w = worker(
        &stack,
        "outside",
        1,
        &handler,
        &[("CAUCUS_WORKER_SYNC_LOCK_WAIT", "2500ms")],
    );
    let api = Api::connect(&stack).await;
    let mut redis = redis_conn(&stack).await;

    hold_lock(&mut redis, "outside", Duration::from_secs(60)).await;
    let wf = api.submit(&["MSFT"], one_stage("outside"), 1000).await;
    let wf = &wf[0];
    eventually("the exec handler to run", WAIT, || async {
        ran.exists().then_some(())
    })
    .await;
    let handler_done = Instant::now();
    let f = eventually("the finding, published past the wait", WAIT, || async {
        let f = findings_of(&api, "outside").await;
        (!f.is_empty()).then_some(f)
    })
    .await;
    let after = handler_done.elapsed();
    assert!(
        after >= Duration::from_millis(2000),
        "it waited about worker.sync_lock_wait first ({after:?})"
    );
    assert!(
        lock_held(&mut redis, "outside").await,
        "the lock is still held: the wait ran out"
    );
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].subject, "caucus.findings.MSFT");
    assert_eq!(f[0].body["content"]["finding"], "new price data");
    api.wait_completed(std::slice::from_ref(wf), WAIT).await;
    w.wait_for_output(
        "sync lock `caucus:{lock:debate-sync:outside}` of agent `outside` still held after",
        Duration::from_secs(5),
    );
    let out = w.output();
    let line = out
        .lines()
        .find(|l| l.contains("still held after"))
        .unwrap();
    assert!(line.contains("ERROR"), "logged as an error: {line}");
}
