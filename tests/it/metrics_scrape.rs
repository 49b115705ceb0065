//! `/metrics` after a batch (issue 12 item 2, acceptance): a coordinator
//! and a worker serve Prometheus text on `telemetry.metrics_addr`; after N
//! stock-analysis workflows complete, the counters and histograms of both
//! agree with what the batch did, read back from the coordinator's status.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use caucus_harness::{free_port, Stack};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{call, coordinator, pipeline, worker, Api};

/// Workflows in the batch.
const N: usize = 4;

const AGENTS: &str = "screening,business,financial,strategy,valuation,report";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_after_a_batch_agree_with_it() {
    let coord_addr = format!("127.0.0.1:{}", free_port());
    let worker_addr = format!("127.0.0.1:{}", free_port());
    let stack = Stack::start();
    let _c = coordinator(
        &stack,
        &[("CAUCUS_TELEMETRY_METRICS_ADDR", coord_addr.as_str())],
    );
    let _w = worker(
        &stack,
        AGENTS,
        2,
        "noop",
        &[("CAUCUS_TELEMETRY_METRICS_ADDR", worker_addr.as_str())],
    );
    for addr in [&coord_addr, &worker_addr] {
        wait_healthy(addr).await;
    }

    let api = Api::connect(&stack).await;
    let items: Vec<String> = (0..N).map(|i| format!("M{i}")).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let ids = api.submit(&refs, json!("stock-analysis"), 20).await;
    assert_eq!(ids.len(), N);
    let wfs = api.wait_completed(&ids, Duration::from_secs(120)).await;
    let batch = Batch::of(&wfs);
    assert!(
        batch.agents.len() >= 5,
        "the batch ran too few agent types: {:?}",
        batch.agents
    );

    // Counted as the coordinator applies events and as the worker finishes
    // a task: both may trail the status by a moment, never by more.
    let coord = settled("coordinator", &coord_addr, |m| {
        coordinator_mismatches(m, &batch)
    })
    .await;
    let work = settled("worker", &worker_addr, |m| worker_mismatches(m, &batch)).await;

    for (m, who) in [(&coord, "coordinator"), (&work, "worker")] {
        for name in m.histograms() {
            if let Err(e) = m.buckets_monotone(&name) {
                panic!("{who}: {name}: {e}");
            }
        }
    }
    assert!(
        coord
            .histograms()
            .contains("caucus_dispatch_latency_seconds"),
        "no dispatch latency histogram"
    );
}

/// Only the leader shows the scheduler's gauges: a standby reports
/// `caucus_coordinator_leader 0` and nothing per agent type; after a
/// takeover the new leader shows them, and the old one, woken from a pause
/// past its lease, stands by and drops its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_the_leader_shows_the_gauges() {
    let a_addr = format!("127.0.0.1:{}", free_port());
    let b_addr = format!("127.0.0.1:{}", free_port());
    let stack = Stack::start();
    let a = coordinator(
        &stack,
        &[("CAUCUS_TELEMETRY_METRICS_ADDR", a_addr.as_str())],
    );
    a.wait_for_output("leading", Duration::from_secs(20));
    let _w = worker(&stack, "valuation", 3, "noop", &[]);
    let b = coordinator(
        &stack,
        &[("CAUCUS_TELEMETRY_METRICS_ADDR", b_addr.as_str())],
    );
    for addr in [&a_addr, &b_addr] {
        wait_healthy(addr).await;
    }
    settled("leader", &a_addr, leading).await;
    settled("standby", &b_addr, standing_by).await;

    a.pause();
    b.wait_for_output("leading", Duration::from_secs(20));
    settled("new leader", &b_addr, leading).await;
    a.resume();
    a.wait_for_output("standing by", Duration::from_secs(20));
    settled("old leader", &a_addr, standing_by).await;
}

/// Open gates are counted, and a workflow a person rejects at its gate
/// (no task event ends it) is counted as finished `failed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn open_gates_and_a_rejection_are_counted() {
    let addr = format!("127.0.0.1:{}", free_port());
    let stack = Stack::start();
    let _c = coordinator(&stack, &[("CAUCUS_TELEMETRY_METRICS_ADDR", addr.as_str())]);
    let _w = worker(&stack, "alpha", 2, "noop", &[]);
    let api = Api::connect(&stack).await;
    let p = pipeline(
        "gated",
        json!([
            {"name": "x", "agent": "alpha"},
            {"name": "review", "kind": "gate", "depends_on": ["x"]},
            {"name": "y", "agent": "alpha", "depends_on": ["review"]}
        ]),
    );
    let r = call(
        &api,
        "submit",
        json!({"items": ["G1", "G2"], "pipeline": p, "time_unit_ms": 20}),
    )
    .await
    .expect("submit");
    let ids: Vec<String> = r["workflow_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 2);
    settled("coordinator", &addr, |m| {
        let mut out = Vec::new();
        expect(
            &mut out,
            "caucus_gates_open",
            m.sum("caucus_gates_open", &[]),
            2,
        );
        out
    })
    .await;

    call(
        &api,
        "gate_decide",
        json!({"workflow_id": ids[0], "action": "reject", "reviewer": "ana",
               "rationale": "not convinced"}),
    )
    .await
    .expect("reject");
    let m = settled("coordinator", &addr, |m| {
        let mut out = Vec::new();
        expect(
            &mut out,
            "caucus_gates_open",
            m.sum("caucus_gates_open", &[]),
            1,
        );
        expect(
            &mut out,
            "caucus_workflows_finished_total{state=failed}",
            m.sum("caucus_workflows_finished_total", &[("state", "failed")]),
            1,
        );
        expect(
            &mut out,
            "caucus_workflows{state=failed}",
            m.sum("caucus_workflows", &[("state", "failed")]),
            1,
        );
        out
    })
    .await;
    assert_eq!(
        m.sum("caucus_workflows_finished_total", &[("state", "completed")]),
        None,
        "nothing completed"
    );
    // The gate is no task: only the two `x` tasks ran.
    assert_eq!(
        m.sum(
            "caucus_tasks_completed_total",
            &[("agent_type", "alpha"), ("outcome", "completed")]
        ),
        Some(2.0)
    );
}

/// A leader's gauges: the worker's capacity and the leader flag.
fn leading(m: &Metrics) -> Vec<String> {
    let mut out = Vec::new();
    expect(
        &mut out,
        "caucus_coordinator_leader",
        m.sum("caucus_coordinator_leader", &[]),
        1,
    );
    expect(
        &mut out,
        "caucus_capacity_slots{agent_type=valuation}",
        m.sum("caucus_capacity_slots", &[("agent_type", "valuation")]),
        3,
    );
    expect(
        &mut out,
        "caucus_task_queue_depth{agent_type=valuation}",
        m.sum("caucus_task_queue_depth", &[("agent_type", "valuation")]),
        0,
    );
    expect(
        &mut out,
        "caucus_gates_open",
        m.sum("caucus_gates_open", &[]),
        0,
    );
    out
}

/// A standby's gauges: the leader flag at 0 and none of the scheduler's.
fn standing_by(m: &Metrics) -> Vec<String> {
    let mut out = Vec::new();
    expect(
        &mut out,
        "caucus_coordinator_leader",
        m.sum("caucus_coordinator_leader", &[]),
        0,
    );
    for name in [
        "caucus_task_queue_depth",
        "caucus_task_oldest_wait_seconds",
        "caucus_capacity_slots",
        "caucus_capacity_in_use",
        "caucus_workflows",
        "caucus_gates_open",
    ] {
        if let Some(v) = m.sum(name, &[]) {
            out.push(format!("{name} shown by a standby: {v}"));
        }
    }
    out
}

/// What the batch did, from the coordinator's status of its workflows.
struct Batch {
    /// Per agent type: attempts dispatched (a task's attempt number counts
    /// its attempts) and tasks completed.
    agents: BTreeMap<String, Counts>,
    workflows: usize,
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    attempts: u64,
    completed: u64,
}

impl Batch {
    fn of(wfs: &[Value]) -> Batch {
        let mut agents: BTreeMap<String, Counts> = BTreeMap::new();
        for w in wfs {
            let tasks = w["tasks"].as_object().expect("status with tasks");
            for t in tasks.values() {
                // Gates wait for a person (here: approve themselves); no
                // worker runs them.
                if !t["gate"].is_null() || t["attempt"] == 0 {
                    continue;
                }
                let c = agents
                    .entry(t["agent_type"].as_str().unwrap().to_string())
                    .or_default();
                c.attempts += t["attempt"].as_u64().unwrap();
                if t["state"] == "completed" {
                    c.completed += 1;
                }
            }
        }
        Batch {
            agents,
            workflows: wfs.len(),
        }
    }
}

fn coordinator_mismatches(m: &Metrics, b: &Batch) -> Vec<String> {
    let mut out = Vec::new();
    for (a, c) in &b.agents {
        let agent = [("agent_type", a.as_str())];
        expect(
            &mut out,
            format!("caucus_tasks_dispatched_total{{agent_type={a}}}"),
            m.sum("caucus_tasks_dispatched_total", &agent),
            c.attempts,
        );
        expect(
            &mut out,
            format!("caucus_tasks_completed_total{{agent_type={a},outcome=completed}}"),
            m.sum(
                "caucus_tasks_completed_total",
                &[("agent_type", a), ("outcome", "completed")],
            ),
            c.completed,
        );
        // Every attempt of the batch started on the worker.
        expect(
            &mut out,
            format!("caucus_dispatch_latency_seconds_count{{agent_type={a}}}"),
            m.sum("caucus_dispatch_latency_seconds_count", &agent),
            c.attempts,
        );
        expect(
            &mut out,
            format!("caucus_task_duration_seconds_count{{agent_type={a}}}"),
            m.sum("caucus_task_duration_seconds_count", &agent),
            c.completed,
        );
        match m.sum("caucus_capacity_slots", &agent) {
            Some(v) if v >= 1.0 => {}
            other => out.push(format!(
                "caucus_capacity_slots{{agent_type={a}}}: {other:?}"
            )),
        }
    }
    // Every task completed: an attempt before its last was retried, and
    // none failed.
    for (a, c) in &b.agents {
        let retried = m
            .sum(
                "caucus_tasks_completed_total",
                &[("agent_type", a), ("outcome", "retried")],
            )
            .unwrap_or(0.0);
        expect(
            &mut out,
            format!("caucus_tasks_completed_total{{agent_type={a},outcome=retried}}"),
            Some(retried),
            c.attempts - c.completed,
        );
    }
    if let Some(v) = m.sum("caucus_tasks_completed_total", &[("outcome", "failed")]) {
        out.push(format!(
            "caucus_tasks_completed_total{{outcome=failed}}: {v}"
        ));
    }
    let n = b.workflows as u64;
    expect(
        &mut out,
        "caucus_workflows_finished_total{state=completed}",
        m.sum("caucus_workflows_finished_total", &[("state", "completed")]),
        n,
    );
    expect(
        &mut out,
        "caucus_workflows_submitted_total",
        m.sum("caucus_workflows_submitted_total", &[]),
        n,
    );
    expect(
        &mut out,
        "caucus_coordinator_leader",
        m.sum("caucus_coordinator_leader", &[]),
        1,
    );
    expect(
        &mut out,
        "caucus_workflows{state=completed}",
        m.sum("caucus_workflows", &[("state", "completed")]),
        n,
    );
    expect(
        &mut out,
        "caucus_gates_open",
        m.sum("caucus_gates_open", &[]),
        0,
    );
    out
}

/// Notes in `out` when `got` is not `want`.
fn expect(out: &mut Vec<String>, what: impl std::fmt::Display, got: Option<f64>, want: u64) {
    if got != Some(want as f64) {
        out.push(format!("{what}: {got:?}, expected {want}"));
    }
}

fn worker_mismatches(m: &Metrics, b: &Batch) -> Vec<String> {
    let mut out = Vec::new();
    for (a, c) in &b.agents {
        let tasks = m.sum(
            "caucus_worker_tasks_total",
            &[("agent_type", a), ("outcome", "completed")],
        );
        if tasks != Some(c.completed as f64) {
            out.push(format!(
                "caucus_worker_tasks_total{{agent_type={a},outcome=completed}}: {tasks:?}, expected {}",
                c.completed
            ));
        }
        // Every handler label (this worker runs the built-in one).
        let runs = m.sum("caucus_worker_handler_seconds_count", &[("agent_type", a)]);
        if runs != Some(c.attempts as f64) {
            out.push(format!(
                "caucus_worker_handler_seconds_count{{agent_type={a}}}: {runs:?}, expected {}",
                c.attempts
            ));
        }
    }
    out
}

/// Scrapes `addr` until `mismatches` finds none, or panics with the last
/// ones (and the scrape) after a deadline.
async fn settled(who: &str, addr: &str, mismatches: impl Fn(&Metrics) -> Vec<String>) -> Metrics {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = http_get(addr, "/metrics").await;
        assert_eq!(status, 200, "{who} /metrics: {body}");
        let m = Metrics::parse(&body);
        let wrong = mismatches(&m);
        if wrong.is_empty() {
            return m;
        }
        if Instant::now() > deadline {
            panic!(
                "{who} /metrics is not what the test expects:\n{}\n--- scrape:\n{body}",
                wrong.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `GET /healthz` until it answers 200.
async fn wait_healthy(addr: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok((status, _)) = try_get(addr, "/healthz").await {
            if status == 200 {
                return;
            }
        }
        assert!(
            Instant::now() < deadline,
            "{addr}/healthz never answered 200"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn http_get(addr: &str, path: &str) -> (u16, String) {
    try_get(addr, path)
        .await
        .unwrap_or_else(|e| panic!("GET http://{addr}{path}: {e}"))
}

/// A plain HTTP/1.0 GET (the server closes the connection after its
/// answer, so the body is the rest of the stream).
async fn try_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut raw))
        .await
        .map_err(|_| std::io::Error::other("timed out"))??;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("no header end in {text:?}")))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line in {head:?}")))?;
    Ok((status, body.to_string()))
}

/// One sample of the Prometheus text format.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// A series' labels other than `le`, in order.
type Labels = Vec<(String, String)>;

/// A parsed scrape.
struct Metrics {
    samples: Vec<Sample>,
}

impl Metrics {
    /// Parses the Prometheus text exposition format (comments skipped).
    fn parse(text: &str) -> Metrics {
        let samples = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| parse_sample(l).unwrap_or_else(|| panic!("unparsable sample line {l:?}")))
            .collect();
        Metrics { samples }
    }

    /// The sum of the samples named `name` carrying every label of `with`;
    /// `None` when there is none.
    fn sum(&self, name: &str, with: &[(&str, &str)]) -> Option<f64> {
        let mut found = None;
        for s in &self.samples {
            if s.name == name
                && with
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            {
                *found.get_or_insert(0.0) += s.value;
            }
        }
        found
    }

    /// Names of the histograms (their `_bucket` series).
    fn histograms(&self) -> BTreeSet<String> {
        self.samples
            .iter()
            .filter_map(|s| s.name.strip_suffix("_bucket"))
            .map(str::to_string)
            .collect()
    }

    /// Each series of histogram `name`: bucket counts never fall as `le`
    /// rises, and the `+Inf` bucket equals `_count`.
    fn buckets_monotone(&self, name: &str) -> Result<(), String> {
        let bucket = format!("{name}_bucket");
        let mut series: BTreeMap<Labels, Vec<(f64, f64)>> = BTreeMap::new();
        for s in self.samples.iter().filter(|s| s.name == bucket) {
            let le = s.labels.get("le").ok_or("a bucket without le")?;
            let le: f64 = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().map_err(|_| format!("le {le}"))?
            };
            let key = s
                .labels
                .iter()
                .filter(|(k, _)| *k != "le")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            series.entry(key).or_default().push((le, s.value));
        }
        for (key, mut buckets) in series {
            buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            if buckets.windows(2).any(|w| w[1].1 < w[0].1) {
                return Err(format!("{key:?}: counts fall: {buckets:?}"));
            }
            let inf = buckets.last().filter(|b| b.0.is_infinite()).map(|b| b.1);
            let with: Vec<(&str, &str)> =
                key.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let count = self
                .samples
                .iter()
                .find(|s| {
                    s.name == format!("{name}_count")
                        && s.labels.len() == with.len()
                        && with
                            .iter()
                            .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
                })
                .map(|s| s.value);
            if inf.is_none() || inf != count {
                return Err(format!("{key:?}: +Inf bucket {inf:?}, _count {count:?}"));
            }
        }
        Ok(())
    }
}

/// `name{k="v",...} value` or `name value` (an optional timestamp after
/// the value is ignored).
fn parse_sample(line: &str) -> Option<Sample> {
    let (name, rest) = match line.find(['{', ' ']) {
        Some(i) => line.split_at(i),
        None => return None,
    };
    let mut labels = BTreeMap::new();
    let rest = if let Some(mut r) = rest.strip_prefix('{') {
        loop {
            r = r.trim_start_matches(',');
            if let Some(after) = r.strip_prefix('}') {
                break after;
            }
            let (k, after) = r.split_once("=\"")?;
            let mut v = String::new();
            let mut chars = after.char_indices();
            let end = loop {
                let (i, c) = chars.next()?;
                match c {
                    '\\' => match chars.next()?.1 {
                        'n' => v.push('\n'),
                        other => v.push(other),
                    },
                    '"' => break i,
                    c => v.push(c),
                }
            };
            labels.insert(k.trim().to_string(), v);
            r = &after[end + 1..];
        }
    } else {
        rest
    };
    let value = rest.split_whitespace().next()?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().ok()?,
    };
    Some(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

#[test]
fn the_parser_reads_labels_escapes_and_plain_samples() {
    let m = Metrics::parse(
        "# HELP x y\n# TYPE x counter\n\
         caucus_x_total{agent_type=\"a\",outcome=\"completed\"} 3\n\
         caucus_x_total{agent_type=\"b\\\"q\",outcome=\"completed\"} 4\n\
         caucus_g 1.5\n\
         h_bucket{le=\"0.1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_count 2\nh_sum 0.3\n",
    );
    assert_eq!(
        m.sum("caucus_x_total", &[("outcome", "completed")]),
        Some(7.0)
    );
    assert_eq!(
        m.sum("caucus_x_total", &[("agent_type", "b\"q")]),
        Some(4.0)
    );
    assert_eq!(m.sum("caucus_g", &[]), Some(1.5));
    assert_eq!(m.sum("caucus_missing", &[]), None);
    assert!(m.buckets_monotone("h").is_ok());
    let bad = Metrics::parse("h_bucket{le=\"0.1\"} 3\nh_bucket{le=\"+Inf\"} 2\nh_count 2\n");
    assert!(bad.buckets_monotone("h").is_err());
}
