//! nats-server SIGKILLed and restarted on the same store in the middle of a
//! batch: every workflow completes, each task's recorded completion is the
//! one completion of its attempt, and the capacity held throughout (from
//! the recorded start and end of every run, across the restart).

use std::collections::HashMap;
use std::time::Duration;

use crate::common::{coordinator, pipeline, task_events, worker, Api};
use caucus_harness::Stack;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

fn ts(v: &Value) -> DateTime<Utc> {
    v.as_str().expect("timestamp").parse().expect("rfc3339")
}

#[tokio::test(flavor = "multi_thread")]
async fn nats_restart_mid_batch_loses_nothing_and_keeps_the_cap() {
    let mut stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let cap = [("CAUCUS_WORKER_CAPACITY_CAP__ALPHA", "2")];
    let _w: Vec<_> = (0..2)
        .map(|_| worker(&stack, "alpha,beta", 2, "sleep:60", &cap))
        .collect();
    let p = pipeline(
        "two",
        json!([
            {"name": "x", "agent": "alpha", "expected_duration": 1.0},
            {"name": "y", "agent": "beta", "expected_duration": 1.0, "depends_on": ["x"]}
        ]),
    );
    let items: Vec<String> = (0..30).map(|i| format!("N{i}")).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let ids = {
        let api = Api::connect(&stack).await;
        let ids = api.submit(&refs, p, 10).await;
        // Restart once part of the batch is done.
        api.wait_some_completed(&ids, 3, Duration::from_secs(30))
            .await;
        ids
    };
    stack.nats.kill();
    stack.nats.restart();

    let api = Api::connect(&stack).await;
    // The services reconnect by themselves; until the coordinator has,
    // nobody answers its API.
    crate::common::eventually(
        "coordinator answers again",
        Duration::from_secs(30),
        || async {
            api.call("coordinator", "status", json!({"ids": ["-"]}))
                .await
                .ok()
        },
    )
    .await;
    let wfs = api.wait_completed(&ids, Duration::from_secs(90)).await;
    assert_eq!(wfs.len(), 30);

    let events = task_events(&api.nats).await;
    let mut completions: HashMap<(String, u64), usize> = HashMap::new();
    let mut points: Vec<(DateTime<Utc>, i32)> = Vec::new();
    for e in events.iter().filter(|e| e["status"] == "completed") {
        *completions
            .entry((
                e["task_id"].as_str().unwrap().to_string(),
                e["attempt"].as_u64().unwrap(),
            ))
            .or_default() += 1;
        if e["agent_type"] == "alpha" {
            points.push((ts(&e["started_at"]), 1));
            points.push((ts(&e["at"]), -1));
        }
    }
    for w in &wfs {
        for k in ["x", "y"] {
            let t = &w["tasks"][k];
            let id = format!("{}/{k}", w["workflow_id"].as_str().unwrap());
            let attempt = t["attempt"].as_u64().unwrap();
            assert_eq!(completions.get(&(id.clone(), attempt)), Some(&1), "{id}");
        }
    }
    points.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut cur, mut max) = (0i32, 0i32);
    for (_, d) in points {
        cur += d;
        max = max.max(cur);
    }
    assert!(max <= 2, "{max} alpha runs at once with a cap of 2");
}
