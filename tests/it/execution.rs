//! The execution guarantees of the coordinator and workers, on real
//! servers and real processes.

use std::collections::HashMap;
use std::time::Duration;

use crate::common::{coordinator, pipeline, task_events, worker, Api};
use caucus_harness::Stack;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

fn ts(v: &Value) -> DateTime<Utc> {
    v.as_str().expect("timestamp").parse().expect("rfc3339")
}

/// How many `completed` events each task published.
fn completions_by_task(events: &[Value]) -> HashMap<String, usize> {
    let mut completions: HashMap<String, usize> = HashMap::new();
    for e in events.iter().filter(|e| e["status"] == "completed") {
        *completions
            .entry(e["task_id"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    completions
}

/// Capacity 1, two ready tasks of one agent type: the one with the longer
/// remaining path starts first even though it was submitted second.
#[tokio::test(flavor = "multi_thread")]
async fn longest_remaining_path_starts_first() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let api = Api::connect(&stack).await;
    let short = pipeline(
        "short",
        json!([{"name": "x", "agent": "alpha", "expected_duration": 1.0}]),
    );
    let long = pipeline(
        "long",
        json!([
            {"name": "x", "agent": "alpha", "expected_duration": 1.0},
            {"name": "y", "agent": "beta", "expected_duration": 5.0, "depends_on": ["x"]}
        ]),
    );
    // No alpha worker yet: both tasks become ready and wait.
    let s = api.submit(&["S"], short, 10).await;
    let l = api.submit(&["L"], long, 10).await;
    let _a = worker(&stack, "alpha", 1, "sleep:50", &[]);
    let _b = worker(&stack, "beta", 1, "noop", &[]);
    let mut ids = s.clone();
    ids.extend(l.clone());
    let wfs = api.wait_completed(&ids, Duration::from_secs(30)).await;
    let started = |wf: &str| {
        let w = wfs.iter().find(|w| w["workflow_id"] == wf).unwrap();
        ts(&w["tasks"]["x"]["started_at"])
    };
    assert!(
        started(&l[0]) < started(&s[0]),
        "the long-path task must start first: long {} short {}",
        started(&l[0]),
        started(&s[0])
    );
}

/// 3 worker processes, cluster capacity capped at 2, 50 tasks: at most two
/// run at any moment (from the recorded start/end times), and two do.
#[tokio::test(flavor = "multi_thread")]
async fn capacity_is_never_exceeded_cluster_wide() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let cap = [("CAUCUS_WORKER_CAPACITY_CAP__ALPHA", "2")];
    let _w: Vec<_> = (0..3)
        .map(|_| worker(&stack, "alpha", 1, "sleep:20", &cap))
        .collect();
    let api = Api::connect(&stack).await;
    let items: Vec<String> = (0..50).map(|i| format!("T{i}")).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let p = pipeline(
        "one",
        json!([{"name": "x", "agent": "alpha", "expected_duration": 1.0}]),
    );
    let ids = api.submit(&refs, p, 10).await;
    api.wait_completed(&ids, Duration::from_secs(60)).await;
    let events = task_events(&api.nats).await;
    let mut spans: Vec<(DateTime<Utc>, DateTime<Utc>)> = Vec::new();
    let mut workers = std::collections::HashSet::new();
    for e in events.iter().filter(|e| e["status"] == "completed") {
        spans.push((ts(&e["started_at"]), ts(&e["at"])));
        workers.insert(e["worker_id"].as_str().unwrap().to_string());
    }
    assert_eq!(spans.len(), 50);
    let mut points: Vec<(DateTime<Utc>, i32)> = Vec::new();
    for (s, e) in &spans {
        points.push((*s, 1));
        points.push((*e, -1));
    }
    // Ends sort before starts at the same instant.
    points.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut cur, mut max) = (0, 0);
    for (_, d) in points {
        cur += d;
        max = max.max(cur);
    }
    assert!(max <= 2, "max concurrency {max} exceeds the capacity of 2");
    assert_eq!(max, 2, "two slots should have been busy at once");
    assert!(
        workers.len() >= 2,
        "work spread over the workers: {workers:?}"
    );
}

/// SIGKILL a worker mid-task: its lease is reclaimed, the task redelivered
/// to another worker, the workflow completes; a duplicate completion does
/// not change the record.
#[tokio::test(flavor = "multi_thread")]
async fn killed_worker_task_is_redelivered_and_recorded_once() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let api = Api::connect(&stack).await;
    let p = pipeline(
        "one",
        json!([{"name": "x", "agent": "alpha", "expected_duration": 1.0}]),
    );
    let mut victim = worker(&stack, "alpha", 1, "sleep:60000", &[]);
    let ids = api.submit(&["K"], p, 10).await;
    // Wait until the victim runs it.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let w = &api.status(&ids).await[0];
        if w["tasks"]["x"]["state"] == "running" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "task never started: {w}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    victim.kill();
    let _rescuer = worker(&stack, "alpha", 1, "noop", &[]);
    let wfs = api.wait_completed(&ids, Duration::from_secs(30)).await;
    let t = &wfs[0]["tasks"]["x"];
    assert_eq!(t["attempt"], 1, "a redelivery is the same attempt");
    assert_ne!(t["worker_id"], Value::Null);
    let finished = t["finished_at"].clone();

    // The same result arriving twice is recorded once.
    let events = task_events(&api.nats).await;
    let done = events
        .iter()
        .find(|e| e["status"] == "completed")
        .expect("completed event")
        .clone();
    let mut dup = done.clone();
    dup["at"] = json!(Utc::now());
    dup["output"] = json!({"tampered": true});
    let js = async_nats::jetstream::new(api.nats.clone());
    js.publish("caucus.events.task.alpha.completed", dup.to_string().into())
        .await
        .unwrap()
        .await
        .unwrap();
    // The coordinator has consumed it once its consumer has nothing pending.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut c: async_nats::jetstream::consumer::PullConsumer = js
            .get_consumer_from_stream("coordinator", "CAUCUS_EVENTS")
            .await
            .unwrap();
        let i = c.info().await.unwrap();
        if i.num_pending == 0 && i.num_ack_pending == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "duplicate never consumed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let t2 = api.status(&ids).await[0]["tasks"]["x"].clone();
    assert_eq!(t2["finished_at"], finished);
    assert_ne!(t2["output"], json!({"tampered": true}));
}

/// Kill the coordinator mid-batch; a new one resumes from KV and every
/// workflow completes, each task completed exactly once.
#[tokio::test(flavor = "multi_thread")]
async fn coordinator_restart_resumes_from_kv() {
    let stack = Stack::start();
    let mut c1 = coordinator(&stack, &[]);
    let _a = worker(&stack, "alpha", 2, "sleep:30", &[]);
    let _b = worker(&stack, "beta", 2, "sleep:30", &[]);
    let api = Api::connect(&stack).await;
    let p = pipeline(
        "two",
        json!([
            {"name": "x", "agent": "alpha", "expected_duration": 1.0},
            {"name": "y", "agent": "beta", "expected_duration": 1.0, "depends_on": ["x"]}
        ]),
    );
    let items: Vec<String> = (0..12).map(|i| format!("R{i}")).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let ids = api.submit(&refs, p, 10).await;
    // Let part of the batch finish, then kill the coordinator.
    api.wait_some_completed(&ids, 2, Duration::from_secs(20))
        .await;
    c1.kill();
    let _c2 = coordinator(&stack, &[]);
    let wfs = api.wait_completed(&ids, Duration::from_secs(60)).await;
    assert_eq!(wfs.len(), 12);
    let events = task_events(&api.nats).await;
    let completions = completions_by_task(&events);
    for w in &wfs {
        for k in ["x", "y"] {
            let t = &w["tasks"][k];
            assert_eq!(t["state"], "completed");
            // The restart re-dispatched nothing: one attempt, one
            // completion reported and recorded.
            assert_eq!(t["attempt"], 1, "{w}");
            let id = format!("{}/{k}", w["workflow_id"].as_str().unwrap());
            assert_eq!(
                completions.get(&id),
                Some(&1),
                "{id} completed exactly once"
            );
        }
    }
    assert_eq!(completions.len(), 24, "every task ran");
}

/// A coordinator killed while its record writes wait (`persist_delay`)
/// loses nothing and runs nothing twice: the events behind the unwritten
/// records were not acknowledged, so the next coordinator applies them
/// again; a task's completion that reaches it before its dependency's
/// redelivered completion waits for it instead of being dropped (the
/// re-dispatch is a duplicate JetStream drops, so dropping the completion
/// would leave the task silent until it ran a second attempt).
#[tokio::test(flavor = "multi_thread")]
async fn a_coordinator_killed_while_its_writes_wait_runs_no_task_twice() {
    let stack = Stack::start();
    let env = [
        ("CAUCUS_COORDINATOR_PERSIST_DELAY", "1900ms"),
        ("CAUCUS_WORKER_ACK_WAIT", "8s"),
    ];
    let mut c1 = coordinator(&stack, &env);
    let _a = worker(&stack, "alpha", 4, "noop", &env);
    let _b = worker(&stack, "beta", 4, "sleep:4000", &env);
    let api = Api::connect(&stack).await;
    let p = pipeline(
        "held",
        json!([
            {"name": "x", "agent": "alpha", "expected_duration": 1.0},
            {"name": "y", "agent": "beta", "expected_duration": 1.0, "depends_on": ["x"]}
        ]),
    );
    let ids = api.submit(&["H0", "H1", "H2", "H3"], p, 10).await;
    // Every `x` done and every `y` running, by the coordinator's memory.
    crate::common::eventually("x done and y running", Duration::from_secs(20), || {
        let api = &api;
        let ids = &ids;
        async move {
            let wfs = api.status(ids).await;
            wfs.iter()
                .all(|w| {
                    w["tasks"]["x"]["state"] == "completed" && w["tasks"]["y"]["state"] == "running"
                })
                .then_some(())
        }
    })
    .await;
    // The stored records do not say so yet: the writes are held back.
    let js = async_nats::jetstream::new(api.nats.clone());
    let records = js.get_key_value("caucus_workflows").await.unwrap();
    let mut behind = 0;
    for id in &ids {
        let body = records.get(id).await.unwrap().expect("record");
        let rec: Value = serde_json::from_slice(&body).unwrap();
        if rec["tasks"]["x"]["state"] != "completed" {
            behind += 1;
        }
    }
    assert!(
        behind > 0,
        "every record was written within the 1.9 s delay: nothing was held back"
    );
    c1.kill();
    let _c2 = coordinator(&stack, &env);
    let wfs = api.wait_completed(&ids, Duration::from_secs(60)).await;
    let events = task_events(&api.nats).await;
    let completions = completions_by_task(&events);
    for w in &wfs {
        for k in ["x", "y"] {
            assert_eq!(w["tasks"][k]["state"], "completed");
            assert_eq!(w["tasks"][k]["attempt"], 1, "ran twice: {w}");
            let id = format!("{}/{k}", w["workflow_id"].as_str().unwrap());
            assert_eq!(completions.get(&id), Some(&1), "{id} completed once");
        }
    }
}

/// Transient errors retry with backoff up to the policy; a task over its
/// expected duration is flagged overdue.
#[tokio::test(flavor = "multi_thread")]
async fn transient_errors_retry_and_overdue_is_flagged() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("n");
    // Fails transiently (exit 75) twice, then succeeds.
    let script = format!(
        "n=$(cat {c} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {c}; \
         if [ $n -le 2 ]; then echo 'upstream timed out' >&2; exit 75; fi; echo '{{\"ok\":true}}'",
        c = counter.display()
    );
    let _w = worker(&stack, "alpha", 1, &format!("exec:{script}"), &[]);
    let _slow = worker(&stack, "slow", 1, "sleep:400", &[]);
    let api = Api::connect(&stack).await;
    let p = pipeline(
        "retry",
        json!([{"name": "x", "agent": "alpha", "expected_duration": 1.0,
                "retry": {"max_attempts": 3, "backoff_initial_ms": 50, "backoff_max_ms": 200}}]),
    );
    let ids = api.submit(&["R"], p, 10).await;
    let wfs = api.wait_completed(&ids, Duration::from_secs(30)).await;
    assert_eq!(wfs[0]["tasks"]["x"]["attempt"], 3);
    assert_eq!(wfs[0]["tasks"]["x"]["output"], json!({"ok": true}));

    // One more transient failure than the policy allows: tier 2, the
    // workflow pauses with a checkpoint (it used to fail).
    std::fs::write(&counter, "-5").unwrap();
    let p = pipeline(
        "retry2",
        json!([{"name": "x", "agent": "alpha", "expected_duration": 1.0,
                "retry": {"max_attempts": 2, "backoff_initial_ms": 10, "backoff_max_ms": 10}}]),
    );
    let ids2 = api.submit(&["F"], p, 10).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let w = &api.status(&ids2).await[0];
        if w["state"] == "paused" {
            assert_eq!(w["tasks"]["x"]["attempt"], 2);
            assert!(
                w["failure"]
                    .as_str()
                    .unwrap()
                    .contains("after 2 attempt(s)"),
                "{w}"
            );
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{w}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Expected 1 unit = 50 ms, runs 400 ms: flagged overdue while running.
    let p = pipeline(
        "slow",
        json!([{"name": "s", "agent": "slow", "expected_duration": 1.0}]),
    );
    let ids3 = api.submit(&["O"], p, 50).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let w = &api.status(&ids3).await[0];
        if w["tasks"]["s"]["overdue"] == true {
            assert_eq!(w["overdue_tasks"], json!(["s"]));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never flagged: {w}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    api.wait_completed(&ids3, Duration::from_secs(20)).await;
}

/// Bad submissions get specific errors, never a timeout.
#[tokio::test(flavor = "multi_thread")]
async fn bad_submissions_get_specific_errors() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let api = Api::connect(&stack).await;
    let cyc = pipeline(
        "cyc",
        json!([
            {"name": "a", "agent": "alpha", "expected_duration": 1.0, "depends_on": ["b"]},
            {"name": "b", "agent": "alpha", "expected_duration": 1.0, "depends_on": ["a"]}
        ]),
    );
    let e = api
        .call(
            "coordinator",
            "submit",
            json!({"items": ["X"], "pipeline": cyc}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, "invalid_pipeline");
    assert!(e.message.contains("cycle"), "{}", e.message);
    let e = api
        .call(
            "coordinator",
            "submit",
            json!({"items": ["X"], "pipeline": "nope"}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, "unknown_pipeline");
    let e = api
        .call(
            "coordinator",
            "submit",
            json!({"items": [], "pipeline": "stock-analysis"}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, "bad_request");
    let e = api
        .call("coordinator", "status", json!({"states": ["sleeping"]}))
        .await
        .unwrap_err();
    assert!(e.message.contains("sleeping"), "{}", e.message);
}
