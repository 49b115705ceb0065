//! Capacity and task outcomes under faults, on real servers and processes:
//! an oversize output, Redis losing its data under running workers, a Redis
//! that stops answering, a lease deleted under a running task, and pattern
//! calls sharing the pipeline tasks' capacity.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{
    coordinator, eventually, peak_concurrency, pipeline, task_events, worker, Api,
};
use caucus_harness::{Redis, Service, Stack};
use chrono::Utc;
use serde_json::{json, Value};

fn one_stage(name: &str) -> Value {
    pipeline(
        name,
        json!([{"name": "x", "agent": "alpha", "expected_duration": 1.0}]),
    )
}

/// Publishes `n` alpha dispatches of workflow `<name>` straight onto the
/// work queue (the coordinator holds no such workflow and ignores their
/// events).
async fn publish_raw_dispatches(api: &Api, name: &str, n: usize) {
    let js = async_nats::jetstream::new(api.nats.clone());
    for i in 0..n {
        let d = json!({"task_id": format!("{name}/x#{i}"), "workflow_id": name, "item": format!("{name}{i}"),
                       "pipeline": name, "stage": "x", "agent_type": "alpha", "attempt": 1,
                       "dispatched_at": Utc::now()});
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Nats-Msg-Id", format!("{name}/x#{i}@1").as_str());
        js.publish_with_headers("caucus.tasks.alpha", headers, d.to_string().into())
            .await
            .expect("publish")
            .await
            .expect("stored");
    }
}

/// Whether `pid` runs (a zombie waiting for its reaper does not).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn redis_pid(redis: &Redis) -> u32 {
    let info = redis.command("INFO server");
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no process_id in INFO: {info}"))
}

fn signal(pid: u32, sig: &str) {
    let st = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()
        .expect("kill");
    assert!(st.success(), "kill -{sig} {pid}");
}

/// SIGCONTs Redis when dropped, so a failing test does not leave it stopped.
struct Stopped(u32);

impl Stopped {
    fn new(pid: u32) -> Self {
        signal(pid, "STOP");
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal(self.0, "CONT");
    }
}

/// An exec handler that, while `<dir>/hang` exists, writes the pid of a
/// `sleep` it forks to `<dir>/pid` and waits for it; otherwise it answers
/// at once.
fn hanging_handler(dir: &Path) -> String {
    format!(
        "exec:cat >/dev/null; if [ -f {h} ]; then sleep 60 & echo $! > {p}; wait; fi; echo '{{\"ok\":true}}'",
        h = dir.join("hang").display(),
        p = dir.join("pid").display()
    )
}

async fn wait_pid(dir: &Path) -> i32 {
    let file = dir.join("pid");
    eventually("the handler to start", Duration::from_secs(20), || async {
        std::fs::read_to_string(&file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
    })
    .await
}

async fn wait_killed(pid: i32, w: &Service) {
    eventually(
        "the handler's process to be killed",
        Duration::from_secs(10),
        || async { (!alive(pid)).then_some(()) },
    )
    .await;
    w.wait_for_output("capacity lease lost", Duration::from_secs(5));
}

/// The alpha workers' consumer.
async fn queue(api: &Api) -> async_nats::jetstream::consumer::Info {
    let js = async_nats::jetstream::new(api.nats.clone());
    let mut c: async_nats::jetstream::consumer::PullConsumer = js
        .get_consumer_from_stream("workers-alpha", "CAUCUS_TASKS")
        .await
        .expect("consumer");
    c.info().await.expect("info").clone()
}

/// A 600 KiB output fails its task permanently, as a `failed` event naming
/// the size and the limit (default 256 KiB), while the 200 other workflows
/// of the batch complete.
#[tokio::test(flavor = "multi_thread")]
async fn an_oversize_output_fails_its_task_permanently_and_others_complete() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    // {"blob": "x…"} is 614,400 bytes of JSON for the item BIG.
    let script = "exec:python3 -c 'import json,sys; t=json.load(sys.stdin); \
        print(json.dumps({\"blob\": \"x\" * (614400 - 11)} if t[\"item\"] == \"BIG\" else {\"ok\": True}))'";
    let _w = worker(&stack, "alpha", 8, script, &[]);
    let api = Api::connect(&stack).await;
    // BIG among 200 others.
    let mut items: Vec<String> = (0..200).map(|i| format!("OK{i}")).collect();
    items.insert(100, "BIG".into());
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let ids = api.submit(&refs, one_stage("out"), 10).await;
    let mut others = ids.clone();
    let big = vec![others.remove(100)];
    api.wait_completed(&others, Duration::from_secs(120)).await;
    let t = eventually("BIG's task to fail", Duration::from_secs(30), || async {
        let t = api.status(&big).await[0]["tasks"]["x"].clone();
        (t["state"] == "failed").then_some(t)
    })
    .await;
    let want = "output is 614,400 bytes, over worker.max_output_bytes = 262,144";
    assert!(t["error"].to_string().contains(want), "{t}");
    let events = task_events(&api.nats).await;
    let of_big: Vec<&Value> = events
        .iter()
        .filter(|e| e["workflow_id"] == big[0])
        .collect();
    let failed: Vec<&&Value> = of_big.iter().filter(|e| e["status"] == "failed").collect();
    assert_eq!(failed.len(), 1, "{of_big:?}");
    let err = &failed[0]["error"];
    assert_eq!(err["class"], "permanent", "{err}");
    assert_eq!(err["error_type"], "output_too_large", "{err}");
    assert_eq!(err["message"], want);
    assert!(
        of_big.iter().all(|e| e["status"] != "completed"),
        "{of_big:?}"
    );
    assert_eq!(
        events.iter().filter(|e| e["status"] == "completed").count(),
        200
    );
}

/// Redis loses its data (FLUSHALL, twice) while workers run tasks: the
/// running tasks re-register their leases before anybody gets a new one,
/// so the cap of 2 holds throughout, and every task completes once. Besides
/// the coordinator's workflows (which it dispatches only up to capacity)
/// the queue holds dispatches published straight onto the work queue, as a
/// stale coordinator or an outside dispatcher would: idle slots always
/// have work waiting, so only the workers' leases keep the cap.
#[tokio::test(flavor = "multi_thread")]
async fn flushall_under_running_workers_never_exceeds_capacity() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let cap = [("CAUCUS_WORKER_CAPACITY_CAP__ALPHA", "2")];
    let workers: Vec<Service> = (0..3)
        .map(|_| worker(&stack, "alpha", 2, "sleep:300", &cap))
        .collect();
    let api = Api::connect(&stack).await;
    let items: Vec<String> = (0..24).map(|i| format!("F{i}")).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let ids = api.submit(&refs, one_stage("flush"), 10).await;
    publish_raw_dispatches(&api, "raw", 24).await;
    let completed = |n: usize| {
        let api = &api;
        async move {
            let done = task_events(&api.nats)
                .await
                .iter()
                .filter(|e| e["status"] == "completed")
                .count();
            (done >= n).then_some(())
        }
    };
    eventually("4 completions", Duration::from_secs(30), || completed(4)).await;
    stack.redis.command("FLUSHALL");
    eventually("12 completions", Duration::from_secs(30), || completed(12)).await;
    stack.redis.command("FLUSHALL");
    api.wait_completed(&ids, Duration::from_secs(60)).await;
    eventually("48 completions", Duration::from_secs(60), || completed(48)).await;

    let events = task_events(&api.nats).await;
    let mut per_task: HashMap<String, usize> = HashMap::new();
    for e in events.iter().filter(|e| e["status"] == "completed") {
        *per_task
            .entry(e["task_id"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert_eq!(per_task.len(), 48);
    assert!(per_task.values().all(|n| *n == 1), "{per_task:?}");
    // Every run completed (none was cancelled), so the completed events
    // cover every run and the peak is exact.
    for w in &workers {
        assert!(
            !w.output().contains("capacity lease lost"),
            "{}",
            w.output()
        );
    }
    let peak = peak_concurrency(&events, "alpha");
    assert!(peak <= 2, "{peak} tasks ran at once with a cap of 2");
    assert_eq!(peak, 2, "both slots should have been busy at once");
    assert!(
        workers
            .iter()
            .any(|w| w.output().contains("capacity lease re-registered")),
        "a running task should have re-registered its lease after FLUSHALL"
    );
}

/// Redis stops answering (SIGSTOP) while a worker runs a task: within one
/// lease period the handler's processes are killed and the task handed
/// back, and the worker takes no task while Redis is silent; once Redis
/// answers again the task runs and completes.
#[tokio::test(flavor = "multi_thread")]
async fn a_worker_whose_redis_stops_answering_cancels_and_takes_no_task() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hang"), "").unwrap();
    let w = worker(&stack, "alpha", 1, &hanging_handler(dir.path()), &[]);
    let api = Api::connect(&stack).await;
    let ids = api.submit(&["S"], one_stage("stop"), 10).await;
    let pid = wait_pid(dir.path()).await;
    std::fs::remove_file(dir.path().join("pid")).unwrap();

    let stopped_at = Instant::now();
    let stopped = Stopped::new(redis_pid(&stack.redis));
    wait_killed(pid, &w).await;
    // lease_ttl is 1 s; the handler must stop before its lease could
    // expire (a generous bound for a loaded machine).
    let took = stopped_at.elapsed();
    assert!(took < Duration::from_secs(3), "cancelled after {took:?}");
    w.wait_for_output("returned to the queue", Duration::from_secs(5));
    // Observe two lease periods: the worker fetches nothing (every delivery,
    // a redelivery too, would move the consumer's delivered sequence).
    let delivered = queue(&api).await.delivered.consumer_sequence;
    let until = Instant::now() + Duration::from_secs(2);
    while Instant::now() < until {
        let q = queue(&api).await;
        assert_eq!(q.delivered.consumer_sequence, delivered, "a task was taken");
        assert!(!dir.path().join("pid").exists(), "the handler ran again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::remove_file(dir.path().join("hang")).unwrap();
    drop(stopped);
    api.wait_completed(&ids, Duration::from_secs(30)).await;
    let events = task_events(&api.nats).await;
    assert!(
        events.iter().all(|e| e["status"] != "failed"),
        "a lost lease hands the task back, it does not fail it: {events:?}"
    );
}

/// The lease of a running task is deleted in Redis (same epoch: not a data
/// loss, so its slot may be someone else's): the handler is cancelled at the
/// next renewal and the task runs again under a new lease.
#[tokio::test(flavor = "multi_thread")]
async fn a_deleted_lease_cancels_the_running_task() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hang"), "").unwrap();
    let w = worker(&stack, "alpha", 1, &hanging_handler(dir.path()), &[]);
    let api = Api::connect(&stack).await;
    let ids = api.submit(&["L"], one_stage("lease"), 10).await;
    let pid = wait_pid(dir.path()).await;
    std::fs::remove_file(dir.path().join("hang")).unwrap();
    let holders = stack
        .redis
        .command("ZRANGE caucus:{sem:alpha}:holders 0 -1");
    let holder = holders
        .lines()
        .find(|l| l.contains('/'))
        .unwrap_or_else(|| panic!("no holder: {holders}"))
        .to_string();
    let removed = stack
        .redis
        .command(&format!("ZREM caucus:{{sem:alpha}}:holders {holder}"));
    assert!(removed.starts_with(":1"), "{removed}");
    wait_killed(pid, &w).await;
    api.wait_completed(&ids, Duration::from_secs(30)).await;
}

/// Pattern calls are ordinary tasks on `caucus.tasks.<agent>`: run beside
/// a pipeline batch on the same agent type, both together never exceed the
/// cap of 2.
#[tokio::test(flavor = "multi_thread")]
async fn pattern_calls_and_pipeline_tasks_share_one_capacity() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let cap = [("CAUCUS_WORKER_CAPACITY_CAP__ALPHA", "2")];
    let _w: Vec<Service> = (0..2)
        .map(|_| worker(&stack, "alpha", 2, "sleep:150", &cap))
        .collect();
    let api = Api::connect(&stack).await;
    let items: Vec<String> = (0..8).map(|i| format!("P{i}")).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let ids = api.submit(&refs, one_stage("shared"), 10).await;
    let run = api
        .call(
            "coordinator",
            "run_pattern",
            json!({"pattern": "parallel", "agents": ["alpha", "alpha", "alpha", "alpha", "alpha", "alpha"],
                   "task": "share the slots", "call_timeout_ms": 30000}),
        )
        .await
        .expect("run_pattern");
    assert_eq!(run["state"], "completed", "{run}");
    api.wait_completed(&ids, Duration::from_secs(30)).await;
    // The pattern runner hears of its calls' completions on core NATS,
    // which the server can deliver before the EVENTS stream has stored
    // them: read the stream once it holds all 14.
    let events = eventually("14 completed events", Duration::from_secs(20), || async {
        let ev = task_events(&api.nats).await;
        let n = ev.iter().filter(|e| e["status"] == "completed").count();
        (n >= 14).then_some(ev)
    })
    .await;
    let done: Vec<&Value> = events
        .iter()
        .filter(|e| e["status"] == "completed")
        .collect();
    let pattern = done
        .iter()
        .filter(|e| {
            e["workflow_id"]
                .as_str()
                .is_some_and(|w| w.starts_with("pattern-"))
        })
        .count();
    assert_eq!(pattern, 6, "every pattern call ran on a worker");
    assert_eq!(done.len(), 14);
    let peak = peak_concurrency(&events, "alpha");
    assert!(
        peak <= 2,
        "{peak} calls and tasks ran at once with a cap of 2"
    );
}

/// A task longer than the coordinator's silence window (`ack_wait +
/// lease_ttl`, 3 s here) is kept alive by the worker's `progress` events:
/// it completes in its first attempt.
#[tokio::test(flavor = "multi_thread")]
async fn a_long_task_sends_progress_and_is_not_taken_for_silent() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let _w = worker(&stack, "alpha", 1, "sleep:4500", &[]);
    let api = Api::connect(&stack).await;
    let ids = api.submit(&["LONG"], one_stage("long"), 10).await;
    let wfs = api.wait_completed(&ids, Duration::from_secs(30)).await;
    assert_eq!(wfs[0]["tasks"]["x"]["attempt"], 1, "{}", wfs[0]);
    let events = task_events(&api.nats).await;
    let beats = events.iter().filter(|e| e["status"] == "progress").count();
    assert!(
        beats >= 3,
        "{beats} progress events in 4.5 s (every ack_wait/3)"
    );
}
