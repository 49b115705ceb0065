//! Shared plumbing of the scenarios: real servers, release binaries, the
//! control API, counting completions off the wire, RSS and percentiles.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use caucus_harness::{Service, ServiceBuilder, Stack};
use caucus_shared::nats::api_request;
use caucus_shared::subjects::Subjects;
use futures::StreamExt;
use hdrhistogram::Histogram;
use serde_json::{json, Value};
use tokio::sync::watch;

/// The six agent types of the stock-analysis pipeline.
pub const STOCK_AGENTS: &str = "screening,business,financial,strategy,valuation,report";

/// Env for every process: production defaults (`info` logs, which carry
/// the readiness line and nothing per successful task).
fn base_env() -> Vec<(&'static str, &'static str)> {
    vec![("CAUCUS_TELEMETRY_LOG_LEVEL", "info")]
}

/// Starts a coordinator on `stack`.
pub fn coordinator(stack: &Stack) -> Service {
    coordinator_from(stack.service("caucus-coordinator"))
}

/// Starts a coordinator from a builder that carries the servers' env
/// (e.g. a role's credentials).
pub fn coordinator_from(mut b: ServiceBuilder) -> Service {
    for (k, v) in base_env() {
        b = b.env(k, v);
    }
    b.start()
}

/// Starts a worker process.
pub fn worker(stack: &Stack, agents: &str, slots: u32, handler: &str) -> Service {
    worker_from(stack.service("caucus-worker"), agents, slots, handler)
}

/// Starts a worker process from a builder that carries the servers' env.
pub fn worker_from(b: ServiceBuilder, agents: &str, slots: u32, handler: &str) -> Service {
    let mut b = b.args([
        "--agent",
        agents,
        "--slots",
        &slots.to_string(),
        "--handler",
        handler,
    ]);
    for (k, v) in base_env() {
        b = b.env(k, v);
    }
    b.start()
}

/// A NATS connection to `urls`, one URL or a comma-separated seed list
/// (a cluster's nodes, as caucus's `nats.url` takes them).
pub async fn connect(urls: &str) -> Result<async_nats::Client> {
    let seeds = urls
        .split(',')
        .map(|u| u.trim().parse::<async_nats::ServerAddr>())
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("NATS URL(s) {urls}"))?;
    Ok(async_nats::connect(seeds).await?)
}

/// A client of the coordinator's control API.
pub struct Api {
    pub nats: async_nats::Client,
    subjects: Subjects,
}

impl Api {
    pub async fn connect(stack: &Stack) -> Result<Api> {
        Ok(Api::with_client(connect(&stack.nats.url()).await?))
    }

    /// An API client on an open connection (e.g. one with credentials).
    pub fn with_client(nats: async_nats::Client) -> Api {
        Api {
            nats,
            subjects: Subjects::default(),
        }
    }

    /// One API call; while a fresh coordinator has not yet taken the
    /// leadership lock it answers `standby`, which is retried.
    pub async fn call(&self, op: &str, body: Value) -> Result<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = api_request(
                &self.nats,
                &self.subjects,
                "coordinator",
                op,
                &body,
                Duration::from_secs(60),
            )
            .await;
            match r {
                Ok(v) => return Ok(v),
                Err(e) if e.code == "standby" && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => bail!("coordinator.{op}: {}: {}", e.code, e.message),
            }
        }
    }

    /// Submits `items` through `pipeline`; returns the workflow ids.
    pub async fn submit(
        &self,
        items: &[String],
        pipeline: Value,
        unit_ms: u64,
    ) -> Result<Vec<String>> {
        let r = self
            .call(
                "submit",
                // Unattended: the built-in pipeline's review gate approves itself
                // (tests of gates submit with their own body).
                json!({"items": items, "pipeline": pipeline, "time_unit_ms": unit_ms,
                       "auto_approve_gates": true}),
            )
            .await?;
        let page_ids = |r: &Value| -> Result<Vec<String>> {
            Ok(r["workflow_ids"]
                .as_array()
                .context("reply without workflow_ids")?
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect())
        };
        let mut ids = page_ids(&r)?;
        // The reply carries the first page; the rest are read by cursor.
        let mut next = r["next_cursor"].as_u64();
        while let Some(cursor) = next {
            let page = self
                .call(
                    "submission",
                    json!({"submission_id": r["submission_id"], "cursor": cursor}),
                )
                .await?;
            ids.extend(page_ids(&page)?);
            next = page["next_cursor"].as_u64();
        }
        if ids.len() != items.len() {
            bail!("submitted {} items, got {} ids", items.len(), ids.len());
        }
        Ok(ids)
    }

    /// Polls until the coordinator's cached capacity of every agent in
    /// `agents` is `expected` (it re-reads Redis every tick), so a
    /// measurement never includes the wait for workers to be noticed.
    pub async fn wait_capacity(&self, agents: &str, expected: usize) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = self.call("status", json!({"ids": ["-"]})).await?;
            let ok = agents
                .split(',')
                .all(|a| r["capacity"][a].as_u64() == Some(expected as u64));
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("capacity never reached {expected}: {}", r["capacity"]);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The task a completion names: from its `Nats-Msg-Id`
/// (`<task_id>@<attempt>:<status>`, set by every worker), so the bench,
/// which shares the cores it measures, does not parse every event's JSON;
/// from the body when the header is missing.
fn task_of(m: &async_nats::Message) -> Option<String> {
    if let Some(id) = m.headers.as_ref().and_then(|h| h.get("Nats-Msg-Id")) {
        if let Some((task, _)) = id.as_str().rsplit_once('@') {
            return Some(task.to_string());
        }
    }
    let v = serde_json::from_slice::<Value>(&m.payload).ok()?;
    v["task_id"].as_str().map(str::to_string)
}

/// Counts distinct completed (and failed) tasks from the event subjects, as
/// they are published.
pub struct Completions {
    rx: watch::Receiver<(usize, usize)>,
    _task: tokio::task::JoinHandle<()>,
}

impl Completions {
    /// Subscribes before anything is submitted.
    pub async fn subscribe(nats: &async_nats::Client) -> Result<Completions> {
        // With partitioned coordinators the events carry the partition as
        // a last token (docs/PARTITIONS.md): both spellings.
        let done = futures::stream::select(
            nats.subscribe("caucus.events.task.*.completed").await?,
            nats.subscribe("caucus.events.task.*.completed.*").await?,
        );
        let failed = futures::stream::select(
            nats.subscribe("caucus.events.task.*.failed").await?,
            nats.subscribe("caucus.events.task.*.failed.*").await?,
        );
        let (mut done, mut failed) = (Box::pin(done), Box::pin(failed));
        nats.flush().await?;
        let (tx, rx) = watch::channel((0usize, 0usize));
        let task = tokio::spawn(async move {
            let mut seen = HashSet::new();
            let mut fails = 0usize;
            loop {
                tokio::select! {
                    Some(m) = done.next() => {
                        if let Some(id) = task_of(&m) {
                            seen.insert(id);
                        }
                    }
                    Some(_) = failed.next() => fails += 1,
                    else => break,
                }
                let _ = tx.send((seen.len(), fails));
            }
        });
        Ok(Completions { rx, _task: task })
    }

    /// Waits until `n` distinct tasks have completed; fails on any failed
    /// event or after `timeout`.
    pub async fn wait(&mut self, n: usize, timeout: Duration) -> Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let (done, failed) = *self.rx.borrow_and_update();
            if failed > 0 {
                bail!("{failed} task(s) failed");
            }
            if done >= n {
                return Ok(());
            }
            if tokio::time::timeout_at(deadline, self.rx.changed())
                .await
                .is_err()
            {
                bail!("timed out: {done} of {n} tasks completed");
            }
        }
    }
}

/// Item names `P0..Pn`.
pub fn items(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i}")).collect()
}

/// Resident set size of `pid` in bytes, from /proc.
pub fn rss_bytes(pid: u32) -> Result<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = s
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .context("no VmRSS line")?;
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .context("VmRSS without a value")?
        .parse()?;
    Ok(kb * 1024)
}

/// Latency samples in a histogram of microseconds (3 significant digits,
/// so a percentile is within 0.1 % of the exact sample), reported in
/// milliseconds.
pub struct Latencies(Histogram<u64>);

impl Default for Latencies {
    fn default() -> Self {
        Latencies(Histogram::new(3).expect("3 significant digits is a valid precision"))
    }
}

impl Latencies {
    /// Records one latency of `ms` milliseconds; a negative one (clock
    /// jitter between processes) counts as 0.
    pub fn record_ms(&mut self, ms: f64) {
        let us = (ms * 1000.0).round().max(0.0) as u64;
        self.0.saturating_record(us);
    }

    /// How many latencies were recorded.
    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The `p`-th percentile (0..=100) in milliseconds, NaN when empty.
    pub fn percentile_ms(&self, p: f64) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        self.0.value_at_percentile(p) as f64 / 1000.0
    }

    /// The largest latency in milliseconds, NaN when empty.
    pub fn max_ms(&self) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        self.0.max() as f64 / 1000.0
    }
}

/// Where the spawned binaries come from (they must be release builds).
pub fn bin_dir() -> String {
    let p = caucus_harness::bin_path("caucus-coordinator");
    p.parent()
        .map(|d| d.display().to_string())
        .unwrap_or_default()
}

/// CPU time (user + system) a process has used so far, in seconds.
pub fn cpu_secs(pid: u32) -> Result<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the `(comm)`: state is field 3, utime 14, stime 15.
    let rest = s.rsplit_once(')').context("stat without comm")?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 =
        f.get(11).context("utime")?.parse::<u64>()? + f.get(12).context("stime")?.parse::<u64>()?;
    Ok(ticks as f64 / CLOCK_TICKS_PER_SEC)
}

/// `USER_HZ`: 100 on every Linux this runs on.
const CLOCK_TICKS_PER_SEC: f64 = 100.0;

/// The pid of the server process listening on `port`, found by its
/// command line (the harness does not expose server pids; redis-server
/// rewrites its command line to `redis-server 127.0.0.1:<port>`).
pub fn server_pid(name: &str, port: u16) -> Option<u32> {
    let plain = port.to_string();
    let suffix = format!(":{port}");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let mut words = cmd.split_whitespace();
        let is_name = words.next().is_some_and(|a| a.ends_with(name));
        let has_port = words.any(|w| w == plain || w.ends_with(&suffix));
        (is_name && has_port).then_some(pid)
    })
}

/// CPU seconds used by named groups of processes between two samples.
pub struct CpuMeter {
    groups: Vec<(&'static str, Vec<u32>, f64)>,
}

impl CpuMeter {
    /// Starts metering `groups` of pids.
    pub fn start(groups: Vec<(&'static str, Vec<u32>)>) -> CpuMeter {
        let groups = groups
            .into_iter()
            .map(|(n, pids)| {
                let t = pids.iter().filter_map(|p| cpu_secs(*p).ok()).sum();
                (n, pids, t)
            })
            .collect();
        CpuMeter { groups }
    }

    /// (group, CPU seconds since start) for every group.
    pub fn stop(&self) -> Vec<(&'static str, f64)> {
        self.groups
            .iter()
            .map(|(n, pids, t0)| {
                let t: f64 = pids.iter().filter_map(|p| cpu_secs(*p).ok()).sum();
                (*n, t - t0)
            })
            .collect()
    }
}
