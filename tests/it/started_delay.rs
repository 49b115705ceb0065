//! `worker.started_delay`: a task that ends within it sends no `started`
//! (its completion, which carries `started_at`, stands for it), one that
//! runs longer is announced while it runs, and a zero delay announces every
//! task before its handler runs.

use std::time::Duration;

use caucus_harness::{Service, Stack};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::common::{coordinator, eventually, pipeline, task_events, worker, Api};

const WAIT: Duration = Duration::from_secs(30);

fn two_stages() -> Value {
    pipeline(
        "two",
        json!([
            {"name": "x", "agent": "alpha", "expected_duration": 1.0},
            {"name": "y", "agent": "alpha", "expected_duration": 1.0, "depends_on": ["x"]}
        ]),
    )
}

fn ts(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .unwrap_or_else(|| panic!("not a time: {v}"))
        .parse()
        .unwrap()
}

/// The events of `wf` with `status`, in stream order.
fn of<'a>(events: &'a [Value], wf: &str, status: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["workflow_id"] == wf && e["status"] == status)
        .collect()
}

/// One workflow of `pipeline` (item `item`) on a stack with a coordinator
/// and a one-slot `alpha` worker running `handler` with `worker_env`.
/// Fields drop in order: the client, then the worker, the coordinator and
/// last the servers.
struct Run {
    api: Api,
    ids: Vec<String>,
    _w: Service,
    _c: Service,
    _stack: Stack,
}

impl Run {
    async fn start(handler: &str, worker_env: &[(&str, &str)], item: &str, pipeline: Value) -> Run {
        let stack = Stack::start();
        let c = coordinator(&stack, &[]);
        let w = worker(&stack, "alpha", 1, handler, worker_env);
        let api = Api::connect(&stack).await;
        let ids = api.submit(&[item], pipeline, 10).await;
        Run {
            api,
            ids,
            _w: w,
            _c: c,
            _stack: stack,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_done_within_the_delay_sends_no_started_and_its_completion_stands_for_it() {
    // A long delay, so a slow machine cannot make a no-op outlast it.
    let run = Run::start(
        "noop",
        &[("CAUCUS_WORKER_STARTED_DELAY", "10s")],
        "A",
        two_stages(),
    )
    .await;
    let Run { api, ids, .. } = &run;
    let wf = api.wait_completed(ids, WAIT).await.remove(0);
    let events = task_events(&api.nats).await;
    assert!(of(&events, &ids[0], "started").is_empty(), "{events:#?}");
    let done = of(&events, &ids[0], "completed");
    assert_eq!(done.len(), 2, "{events:#?}");
    for e in done {
        let key = e["stage"].as_str().unwrap();
        let t = &wf["tasks"][key];
        // The record is what `started` then `completed` would have made.
        assert_eq!(t["state"], "completed", "{t}");
        assert_eq!(ts(&t["started_at"]), ts(&e["started_at"]), "{t}");
        assert_eq!(t["worker_id"], e["worker_id"], "{t}");
        assert!(ts(&t["started_at"]) <= ts(&t["finished_at"]), "{t}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_still_running_at_the_delay_is_announced_while_it_runs() {
    // Ack wait 30 s: no progress event (every ack_wait / 3) comes before
    // the task ends, so only `started` can tell that it runs.
    let run = Run::start(
        "sleep:2000",
        &[
            ("CAUCUS_WORKER_STARTED_DELAY", "300ms"),
            ("CAUCUS_WORKER_ACK_WAIT", "30s"),
        ],
        "L",
        pipeline(
            "one",
            json!([{"name": "x", "agent": "alpha", "expected_duration": 1.0}]),
        ),
    )
    .await;
    let Run { api, ids, .. } = &run;
    // Seen running before it ends (its record says so only once told).
    eventually("x running", WAIT, || async {
        let w = api.status(ids).await.remove(0);
        (w["tasks"]["x"]["state"] == "running").then_some(())
    })
    .await;
    let wf = api.wait_completed(ids, WAIT).await.remove(0);
    let events = task_events(&api.nats).await;
    let started = of(&events, &ids[0], "started");
    let done = of(&events, &ids[0], "completed");
    assert_eq!((started.len(), done.len()), (1, 1), "{events:#?}");
    let (s, d) = (started[0], done[0]);
    // Held back for the delay, from the attempt's own start.
    let held = ts(&s["at"]) - ts(&s["started_at"]);
    assert!(
        held.num_milliseconds() >= 300,
        "published {held} after the start"
    );
    assert!(ts(&s["at"]) < ts(&d["at"]), "{s} then {d}");
    assert_eq!(s["started_at"], d["started_at"]);
    let pos = |e: &Value| events.iter().position(|x| x == e).unwrap();
    assert!(pos(s) < pos(d), "stored before the completion");
    assert_eq!(ts(&wf["tasks"]["x"]["started_at"]), ts(&s["started_at"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn with_a_zero_delay_every_task_is_announced() {
    let run = Run::start(
        "noop",
        &[("CAUCUS_WORKER_STARTED_DELAY", "0s")],
        "Z",
        two_stages(),
    )
    .await;
    let Run { api, ids, .. } = &run;
    api.wait_completed(ids, WAIT).await;
    let events = task_events(&api.nats).await;
    let started = of(&events, &ids[0], "started");
    let done = of(&events, &ids[0], "completed");
    assert_eq!((started.len(), done.len()), (2, 2), "{events:#?}");
    for (s, d) in started.iter().zip(&done) {
        assert_eq!(s["task_id"], d["task_id"]);
        assert_eq!(s["started_at"], d["started_at"]);
    }
}
