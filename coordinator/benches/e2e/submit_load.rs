//! Scenario 7: dispatch latency of running work while a large submit is
//! being stored.
//!
//! One worker (agent `alpha`, 2 idle slots, no-op handler) runs a stream
//! of three-stage chains (a → b → c), one workflow after another, as in
//! scenario 3. First alone (the baseline), then while one 10,000-item
//! submit (a one-stage pipeline on an agent type no worker runs, so its
//! tasks only wait) is being stored and taken over by the scheduler. For
//! each task of the chains the bench records, off the wire, `dispatched_at`
//! (coordinator), `started_at` (worker) and the completion time of its
//! dependency; "during" counts the tasks dispatched between the submit's
//! request and its answer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use caucus_harness::Stack;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde_json::{json, Value};

use crate::support::{coordinator, worker, Api, Completions, Latencies};

/// Chains run first and not measured (connections, consumers warming up).
const WARM_UP: usize = 5;

/// Chains in the baseline.
const BASELINE_CHAINS: usize = 100;

/// Latencies of the three hops.
#[derive(Default)]
pub struct Samples {
    pub ready_to_started: Latencies,
    pub ready_to_dispatched: Latencies,
    pub dispatch_to_started: Latencies,
}

pub struct Run {
    pub baseline: Samples,
    pub during: Samples,
    /// Request → answer of one large submit, mean.
    pub submit_secs: f64,
    /// Size of the largest answer.
    pub reply_bytes: usize,
    /// Chains that ran while they were stored.
    pub chains_during: usize,
}

#[derive(Default, Clone, Copy)]
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

fn chain() -> Value {
    json!({"name": "chain", "capacities": {"alpha": 2}, "stages": [
        {"name": "a", "agent": "alpha", "expected_duration": 1.0},
        {"name": "b", "agent": "alpha", "expected_duration": 1.0, "depends_on": ["a"]},
        {"name": "c", "agent": "alpha", "expected_duration": 1.0, "depends_on": ["b"]}
    ]})
}

/// `rounds` submits of `items` each, one after another, with
/// `coordinator.submit_chunk` = `chunk` (None: the default).
pub async fn run(items: usize, rounds: usize, chunk: Option<usize>) -> Result<Run> {
    let stack = Stack::start();
    let _c = match chunk {
        Some(n) => stack
            .service("caucus-coordinator")
            .env("CAUCUS_TELEMETRY_LOG_LEVEL", "info")
            .env("CAUCUS_COORDINATOR_SUBMIT_CHUNK", n.to_string())
            .start(),
        None => coordinator(&stack),
    };
    let _w = worker(&stack, "alpha", 2, "noop");
    let api = Arc::new(Api::connect(&stack).await?);
    api.wait_capacity("alpha", 2).await?;

    let times: Arc<Mutex<HashMap<String, Times>>> = Arc::default();
    let mut tasks_sub = api.nats.subscribe("caucus.tasks.alpha").await?;
    let mut events_sub = api.nats.subscribe("caucus.events.task.alpha.>").await?;
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
                    (_, Some("completed")) => t.completed = ts(&v["at"]),
                    _ => {}
                }
            }
        })
    };
    let mut done = Completions::subscribe(&api.nats).await?;
    let mut finished = 0usize;
    let one_chain = |i: usize| {
        let api = api.clone();
        async move {
            let id = api.submit(&[format!("C{i}")], chain(), 1000).await?;
            Ok::<_, anyhow::Error>(id.into_iter().next().unwrap_or_default())
        }
    };

    for i in 0..WARM_UP {
        one_chain(i).await?;
        finished += 3;
        done.wait(finished, Duration::from_secs(30)).await?;
    }
    let mut baseline_ids = Vec::new();
    for i in WARM_UP..WARM_UP + BASELINE_CHAINS {
        baseline_ids.push(one_chain(i).await?);
        finished += 3;
        done.wait(finished, Duration::from_secs(30)).await?;
    }

    // The large submits, one after another, and chains while each is stored.
    let mut i = WARM_UP + BASELINE_CHAINS;
    let mut during_ids = Vec::new();
    let mut windows = Vec::new();
    let (mut submit_secs, mut reply_bytes) = (0.0, 0);
    for round in 0..rounds {
        let big: Vec<String> = (0..items).map(|n| format!("S{round}-{n:06}")).collect();
        let body = json!({"items": big, "time_unit_ms": 1000, "pipeline":
            {"name": "idle", "capacities": {"idle": 1},
             "stages": [{"name": "x", "agent": "idle", "expected_duration": 1.0}]}});
        let from = Utc::now();
        let t0 = Instant::now();
        let submit = {
            let api = api.clone();
            tokio::spawn(async move {
                let r = api.call("submit", body).await?;
                Ok::<_, anyhow::Error>((r, t0.elapsed(), Utc::now()))
            })
        };
        while !submit.is_finished() {
            during_ids.push(one_chain(i).await?);
            i += 1;
            finished += 3;
            done.wait(finished, Duration::from_secs(60)).await?;
        }
        let (reply, took, to) = submit.await??;
        if reply["count"].as_u64() != Some(items as u64) {
            bail!("large submit: {reply}");
        }
        submit_secs += took.as_secs_f64();
        reply_bytes = reply_bytes.max(serde_json::to_vec(&reply)?.len());
        windows.push((from, to));
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    recorder.abort();

    let map = times.lock().expect("times");
    let collect = |ids: &[String], windows: &[(DateTime<Utc>, DateTime<Utc>)]| {
        let mut s = Samples::default();
        for wf in ids {
            for (stage, dep) in [("a", None), ("b", Some("a")), ("c", Some("b"))] {
                let t = map
                    .get(&format!("{wf}/{stage}"))
                    .copied()
                    .unwrap_or_default();
                let (Some(d), Some(st)) = (t.dispatched, t.started) else {
                    continue;
                };
                if !windows.is_empty() && !windows.iter().any(|(a, b)| *a <= d && d <= *b) {
                    continue;
                }
                s.dispatch_to_started.record_ms(ms(d, st));
                if let Some(r) = dep
                    .and_then(|dep| map.get(&format!("{wf}/{dep}")))
                    .and_then(|x| x.completed)
                {
                    s.ready_to_started.record_ms(ms(r, st));
                    s.ready_to_dispatched.record_ms(ms(r, d));
                }
            }
        }
        s
    };
    Ok(Run {
        baseline: collect(&baseline_ids, &[]),
        during: collect(&during_ids, &windows),
        submit_secs: submit_secs / rounds.max(1) as f64,
        reply_bytes,
        chains_during: during_ids.len(),
    })
}
