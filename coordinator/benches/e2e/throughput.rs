//! Scenario 1: end-to-end throughput of no-op tasks on the stock-analysis
//! DAG with 1, 2 and 4 worker processes.

use std::time::{Duration, Instant};

use anyhow::Result;
use caucus_harness::{Service, ServiceBuilder, Stack};
use serde_json::json;

use crate::support::{
    connect, coordinator_from, items, server_pid, worker_from, Api, Completions, CpuMeter,
    STOCK_AGENTS,
};

/// Tasks per stock-analysis workflow.
const TASKS_PER_ITEM: usize = 6;
/// CPU group names of a cluster's nodes, in the order of its pids.
const NODE_LABELS: [&str; 3] = ["node 0", "node 1", "node 2"];

/// One run's result.
pub struct Run {
    pub workers: usize,
    pub tasks: usize,
    pub secs: f64,
    /// CPU seconds per process group during the run.
    pub cpu: Vec<(&'static str, f64)>,
    /// Messages stored per stream (dispatches, events, KV record writes).
    pub stored: Vec<(&'static str, u64)>,
}

impl Run {
    pub fn tasks_per_sec(&self) -> f64 {
        self.tasks as f64 / self.secs
    }

    /// CPU per task by process group, e.g. `coordinator 80 us, workers 52 us`.
    pub fn cpu_line(&self) -> String {
        let cpu: Vec<String> = self
            .cpu
            .iter()
            .map(|(n, s)| format!("{n} {:.0} us", 1e6 * s / self.tasks as f64))
            .collect();
        cpu.join(", ")
    }

    /// Messages stored per task by stream, e.g. `dispatches 1.00, events
    /// 1.00, kv writes 0.49`.
    pub fn stored_line(&self) -> String {
        let stored: Vec<String> = self
            .stored
            .iter()
            .map(|(n, c)| format!("{n} {:.2}", *c as f64 / self.tasks as f64))
            .collect();
        stored.join(", ")
    }
}

/// Submits `n_items` with `workers` processes of `slots` slots per agent
/// type; measures from the submit request to the last completed event.
pub async fn run(workers: usize, slots: u32, n_items: usize) -> Result<Run> {
    run_on(
        Stack::start(),
        workers,
        slots,
        n_items,
        Duration::from_secs(120),
    )
    .await
}

/// [`run`] on a given (fresh) stack, waiting at most `timeout` for the
/// last completion.
pub async fn run_on(
    stack: Stack,
    workers: usize,
    slots: u32,
    n_items: usize,
    timeout: Duration,
) -> Result<Run> {
    let servers = Servers {
        nats_url: stack.nats.url(),
        nats_pids: stack.nats.pid().into_iter().collect(),
        redis_pid: server_pid("redis-server", stack.redis.port()),
    };
    let rig = Rig::start(|bin| stack.service(bin), &servers, workers, slots).await?;
    // `stack` outlives the measurement: its servers stop when it drops.
    measure(rig, slots, n_items, timeout).await
}

/// Where a run's servers are: what the bench connects to and whose CPU it
/// meters.
pub struct Servers {
    /// One NATS URL, or a cluster's comma-separated seed list.
    pub nats_url: String,
    /// Every nats-server process (three for a cluster).
    pub nats_pids: Vec<u32>,
    /// redis-server's pid.
    pub redis_pid: Option<u32>,
}

/// The started processes of one run and the connections that drive and
/// watch it.
pub struct Rig {
    /// The coordinator, started first (it creates the streams).
    pub coordinator: Service,
    /// More coordinators (partitioned runs), counted with the first.
    pub others: Vec<Service>,
    /// The worker processes, `--handler noop`, every stock-analysis agent.
    pub workers: Vec<Service>,
    /// Calls the control API (as the operator when authentication is on).
    pub api: Api,
    /// Counts completions off the event subjects and reads stream counts:
    /// an instrument of the bench, not part of the workload.
    pub observer: async_nats::Client,
    /// The nats-server processes, for the CPU figures (one per node).
    pub nats_pids: Vec<u32>,
    /// redis-server's pid, for the CPU figures.
    pub redis_pid: Option<u32>,
}

impl Rig {
    /// Starts a coordinator, then `workers` no-op worker processes of
    /// `slots` slots for every stock-analysis agent, each from
    /// `service(bin)` (a builder already wired to the servers), and
    /// connects the bench to `servers` (one connection both calls the API
    /// and observes).
    pub async fn start(
        service: impl Fn(&str) -> ServiceBuilder,
        servers: &Servers,
        workers: usize,
        slots: u32,
    ) -> Result<Rig> {
        // The coordinator first: it creates the streams and the workers'
        // consumers, which the workers bind to.
        let coordinator = coordinator_from(service("caucus-coordinator"));
        let workers: Vec<_> = (0..workers)
            .map(|_| worker_from(service("caucus-worker"), STOCK_AGENTS, slots, "noop"))
            .collect();
        let api = Api::with_client(connect(&servers.nats_url).await?);
        Ok(Rig {
            coordinator,
            others: Vec::new(),
            workers,
            observer: api.nats.clone(),
            api,
            nats_pids: servers.nats_pids.clone(),
            redis_pid: servers.redis_pid,
        })
    }
}

/// Waits for `rig`'s workers to be seen, runs one warm-up workflow, then
/// submits `n_items` and measures from the submit request to the last
/// completed event.
pub async fn measure(rig: Rig, slots: u32, n_items: usize, timeout: Duration) -> Result<Run> {
    let Rig {
        coordinator: c,
        others,
        workers: w,
        api,
        observer,
        nats_pids,
        redis_pid,
    } = rig;
    api.wait_capacity(STOCK_AGENTS, slots as usize * w.len())
        .await?;
    let mut done = Completions::subscribe(&observer).await?;
    // Warm-up: one workflow end to end before the clock starts. A fresh
    // Redis has no semaphore epoch, which opens a recovery window of one
    // lease TTL (10 s) before the first lease (docs/RELIABILITY.md); the
    // timed run must not include it.
    api.submit(&items("W", 1), json!("stock-analysis"), 1000)
        .await?;
    done.wait(TASKS_PER_ITEM, timeout).await?;
    let js = async_nats::jetstream::new(observer.clone());
    let base = stored_now(&js).await?;
    let names = items("T", n_items);
    let tasks = n_items * TASKS_PER_ITEM;
    let mut groups = vec![
        (
            "coordinator",
            c.pid()
                .into_iter()
                .chain(others.iter().filter_map(|o| o.pid()))
                .collect(),
        ),
        ("workers", w.iter().filter_map(|s| s.pid()).collect()),
        ("nats-server", nats_pids.clone()),
        ("redis-server", redis_pid.into_iter().collect()),
    ];
    // On a cluster, each node too: a stream's leader does more than its
    // followers, so the sum alone hides where the cost lands.
    if nats_pids.len() > 1 {
        groups.extend(
            NODE_LABELS
                .iter()
                .zip(&nats_pids)
                .map(|(l, p)| (*l, vec![*p])),
        );
    }
    let meter = CpuMeter::start(groups);
    let t0 = Instant::now();
    // A unit of 1 s keeps "overdue" alerts out of the run (tasks are no-ops
    // and the worker does not pace them, so the unit changes nothing else).
    api.submit(&names, json!("stock-analysis"), 1000).await?;
    done.wait(TASKS_PER_ITEM + tasks, timeout).await?;
    let secs = t0.elapsed().as_secs_f64();
    let cpu = meter.stop();
    let stored = stored_now(&js)
        .await?
        .into_iter()
        .zip(base)
        .map(|((label, n), (_, b))| (label, n - b))
        .collect();
    Ok(Run {
        workers: w.len(),
        tasks,
        secs,
        cpu,
        stored,
    })
}

/// Messages stored so far in the streams a task writes to.
async fn stored_now(js: &async_nats::jetstream::Context) -> Result<Vec<(&'static str, u64)>> {
    let mut stored = Vec::new();
    for (label, name) in [
        ("dispatches", "CAUCUS_TASKS"),
        ("events", "CAUCUS_EVENTS"),
        ("kv writes", "KV_caucus_workflows"),
    ] {
        let mut s = js.get_stream(name).await?;
        stored.push((label, s.info().await?.state.last_sequence));
    }
    Ok(stored)
}
