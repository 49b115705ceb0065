//! Scenario 12: end-to-end throughput on a 3-node JetStream cluster with
//! `nats.replicas = 3` (every stream, bucket and durable consumer R3),
//! against scenario 1's single server (R1), measured in one run.
//!
//! Each side is scenario 1's workload with one worker ([`throughput`]'s
//! warm-up and clock) plus the raw JetStream round trip ([`raw`]) on
//! streams of the side's replication, each on fresh servers. The sides
//! alternate R1, R3, R3, R1, … so a drift of the machine's load weighs on
//! both alike.

use std::time::Duration;

use anyhow::{Context as _, Result};
use caucus_harness::{NatsCluster, Redis, ServiceBuilder, Stack};

use crate::raw;
use crate::support::server_pid;
use crate::throughput::{self, measure, Rig, Run, Servers};

/// How long the last completion may take to arrive.
const TIMEOUT: Duration = Duration::from_secs(300);
/// Worker processes per run (scenario 1's first row).
const WORKERS: usize = 1;

/// Where the streams live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One nats-server, every stream R1 (scenario 1).
    Single,
    /// Three nats-servers in one cluster, every stream R3.
    Cluster,
}

impl Layout {
    /// Its name in the output (one width for both).
    pub fn name(self) -> &'static str {
        match self {
            Layout::Single => "R1, 1 node ",
            Layout::Cluster => "R3, 3 nodes",
        }
    }

    /// Stream replicas on this layout.
    fn replicas(self) -> usize {
        match self {
            Layout::Single => 1,
            Layout::Cluster => 3,
        }
    }
}

/// One side of one round.
pub struct Side {
    pub layout: Layout,
    /// Scenario 1's workload on this layout.
    pub run: Run,
    /// Raw JetStream round trips per second on this layout.
    pub raw: f64,
}

/// Every side of the comparison, in the order they ran.
pub struct Comparison {
    pub sides: Vec<Side>,
}

impl Comparison {
    /// Mean of `f` over the sides on `layout`.
    fn mean_of(&self, layout: Layout, f: impl Fn(&Side) -> f64) -> f64 {
        let v: Vec<f64> = self
            .sides
            .iter()
            .filter(|s| s.layout == layout)
            .map(f)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    }

    /// Mean end-to-end tasks/s on `layout`.
    pub fn tasks_per_sec(&self, layout: Layout) -> f64 {
        self.mean_of(layout, |s| s.run.tasks_per_sec())
    }

    /// Mean raw round trips/s on `layout`.
    pub fn raw(&self, layout: Layout) -> f64 {
        self.mean_of(layout, |s| s.raw)
    }

    /// Mean CPU seconds per task of process group `group` on `layout`.
    pub fn cpu_per_task(&self, layout: Layout, group: &str) -> f64 {
        self.mean_of(layout, |s| {
            let secs: f64 = s
                .run
                .cpu
                .iter()
                .filter(|(n, _)| *n == group)
                .map(|(_, c)| c)
                .sum();
            secs / s.run.tasks as f64
        })
    }
}

/// `rounds` pairs of sides (`slots` slots per agent type, `n_items`
/// stock-analysis items, `raw_total` raw round trips with `raw_in_flight`
/// outstanding), R1 first in even rounds and R3 first in odd ones.
pub async fn run(
    rounds: usize,
    slots: u32,
    n_items: usize,
    raw_total: usize,
    raw_in_flight: usize,
) -> Result<Comparison> {
    let mut sides = Vec::with_capacity(2 * rounds);
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [Layout::Single, Layout::Cluster]
        } else {
            [Layout::Cluster, Layout::Single]
        };
        for layout in order {
            let raw = raw_on(layout, raw_total, raw_in_flight).await?;
            let run = match layout {
                Layout::Single => {
                    throughput::run_on(Stack::start(), WORKERS, slots, n_items, TIMEOUT).await?
                }
                Layout::Cluster => on_cluster(slots, n_items).await?,
            };
            sides.push(Side { layout, run, raw });
        }
    }
    Ok(Comparison { sides })
}

/// The raw round trip on fresh servers of `layout`.
async fn raw_on(layout: Layout, total: usize, in_flight: usize) -> Result<f64> {
    match layout {
        Layout::Single => {
            let stack = Stack::start();
            raw::round_trip(&stack.nats.url(), total, in_flight, 1).await
        }
        Layout::Cluster => {
            let nats = NatsCluster::start();
            raw::round_trip(&nats.url(), total, in_flight, layout.replicas()).await
        }
    }
}

/// Scenario 1's workload on a fresh 3-node cluster and a fresh Redis, every
/// process given all three nodes' URLs (as `tests/it/nats_cluster.rs` does).
async fn on_cluster(slots: u32, n_items: usize) -> Result<Run> {
    let nats = NatsCluster::start();
    let redis = Redis::start();
    let servers = Servers {
        nats_url: nats.url(),
        nats_pids: node_pids(&nats)?,
        redis_pid: server_pid("redis-server", redis.port()),
    };
    let replicas = Layout::Cluster.replicas().to_string();
    let service = |bin: &str| {
        ServiceBuilder::new(bin)
            .env("CAUCUS_NATS_URL", nats.url())
            .env("CAUCUS_NATS_REPLICAS", &replicas)
            .env("CAUCUS_REDIS_URL", redis.url())
    };
    let rig = Rig::start(service, &servers, WORKERS, slots).await?;
    // `nats` and `redis` outlive the measurement.
    measure(rig, slots, n_items, TIMEOUT).await
}

/// The pid of every node, in node order, found by its client port (the
/// harness does not expose a node's pid).
fn node_pids(nats: &NatsCluster) -> Result<Vec<u32>> {
    nats.url()
        .split(',')
        .map(|url| {
            let port: u16 = url
                .rsplit(':')
                .next()
                .and_then(|p| p.parse().ok())
                .with_context(|| format!("no port in {url}"))?;
            server_pid("nats-server", port).with_context(|| format!("no nats-server on {url}"))
        })
        .collect()
}
