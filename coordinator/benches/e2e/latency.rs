//! Scenario 3: dispatch latency at low load, from the timestamps on the
//! wire (every process runs on this machine, so they share one clock).
//!
//! One workflow at a time runs through stock-analysis on one worker with
//! idle slots. For every task the bench records, from core subscriptions
//! to the task and event subjects:
//! - `dispatched_at` (coordinator, in the TaskDispatch body),
//! - `started_at` (worker, in the started event; a task that ends within
//!   `worker.started_delay` has none, and its completed event carries the
//!   same `started_at`),
//! - `at` of each dependency's completed event (worker, just before it
//!   publishes it).
//!
//! "ready → started" for a dependent task is its `started_at` minus the
//! latest completion `at` of its dependencies: the whole hop through
//! JetStream, the coordinator (consume, apply, dispatch) and back to a
//! worker. Root tasks become ready at submission, so for them (and all
//! tasks) "dispatch → started" is `started_at − dispatched_at`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result};
use caucus_coordinator::pipeline::{builtin, StageKind};
use caucus_harness::Stack;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde_json::{json, Value};

use crate::support::{coordinator, worker, Api, Completions, Latencies, STOCK_AGENTS};

/// Latencies of the three hops.
pub struct Run {
    pub ready_to_started: Latencies,
    pub ready_to_dispatched: Latencies,
    pub dispatch_to_started: Latencies,
}

#[derive(Default)]
struct Times {
    dispatched: Option<DateTime<Utc>>,
    started: Option<DateTime<Utc>>,
    completed: Option<DateTime<Utc>>,
}

fn ts(v: &Value) -> Option<DateTime<Utc>> {
    v.as_str()?.parse().ok()
}

fn ms(a: DateTime<Utc>, b: DateTime<Utc>) -> f64 {
    (b - a).num_microseconds().unwrap_or(i64::MAX) as f64 / 1000.0
}

pub async fn run(workflows: usize) -> Result<Run> {
    let stack = Stack::start();
    let _c = coordinator(&stack);
    let _w = worker(&stack, STOCK_AGENTS, 2, "noop");
    let api = Api::connect(&stack).await?;
    api.wait_capacity(STOCK_AGENTS, 2).await?;

    let times: Arc<Mutex<HashMap<String, Times>>> = Arc::default();
    let mut tasks_sub = api.nats.subscribe("caucus.tasks.>").await?;
    let mut events_sub = api.nats.subscribe("caucus.events.task.>").await?;
    api.nats.flush().await?;
    let recorder = {
        let times = times.clone();
        tokio::spawn(async move {
            loop {
                let (v, kind) = tokio::select! {
                    Some(m) = tasks_sub.next() => (m.payload, "dispatch"),
                    Some(m) = events_sub.next() => (m.payload, "event"),
                    else => break,
                };
                let Ok(v) = serde_json::from_slice::<Value>(&v) else {
                    continue;
                };
                let Some(id) = v["task_id"].as_str() else {
                    continue;
                };
                let mut map = times.lock().expect("times");
                let t = map.entry(id.to_string()).or_default();
                match (kind, v["status"].as_str()) {
                    ("dispatch", _) => t.dispatched = ts(&v["dispatched_at"]),
                    (_, Some("started")) => t.started = ts(&v["started_at"]),
                    (_, Some("completed")) => {
                        t.completed = ts(&v["at"]);
                        t.started = t.started.or(ts(&v["started_at"]));
                    }
                    _ => {}
                }
            }
        })
    };

    let mut done = Completions::subscribe(&api.nats).await?;
    let mut ids = Vec::with_capacity(workflows);
    for i in 0..workflows {
        let id = api
            .submit(&[format!("L{i}")], json!("stock-analysis"), 1000)
            .await?;
        ids.extend(id);
        done.wait((i + 1) * 6, Duration::from_secs(30)).await?;
    }
    // The recorder sees the last events a moment after the counter does.
    let expected = workflows * 6;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let complete = {
            let map = times.lock().expect("times");
            map.values()
                .filter(|t| t.dispatched.is_some() && t.started.is_some() && t.completed.is_some())
                .count()
        };
        if complete >= expected || tokio::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    recorder.abort();

    let spec = builtin("stock-analysis").context("stock-analysis")?;
    let map = times.lock().expect("times");
    let mut run = Run {
        ready_to_started: Latencies::default(),
        ready_to_dispatched: Latencies::default(),
        dispatch_to_started: Latencies::default(),
    };
    for wf in &ids {
        // Gates are decided, never dispatched (these approve themselves:
        // the report's ready → started includes that approval).
        for stage in spec.stages.iter().filter(|s| s.kind != StageKind::Gate) {
            let t = &map[&format!("{wf}/{}", stage.name)];
            let (Some(d), Some(s)) = (t.dispatched, t.started) else {
                anyhow::bail!("{wf}/{}: dispatch or start not seen", stage.name);
            };
            run.dispatch_to_started.record_ms(ms(d, s));
            let ready = stage
                .depends_on
                .iter()
                .filter_map(|dep| map.get(&format!("{wf}/{dep}")).and_then(|x| x.completed))
                .max();
            if let Some(r) = ready.filter(|_| !stage.depends_on.is_empty()) {
                run.ready_to_started.record_ms(ms(r, s));
                run.ready_to_dispatched.record_ms(ms(r, d));
            }
        }
    }
    Ok(run)
}

/// `p50 / p99 / max` in milliseconds.
pub fn summary(v: &Latencies) -> (f64, f64, f64) {
    (v.percentile_ms(50.0), v.percentile_ms(99.0), v.max_ms())
}
