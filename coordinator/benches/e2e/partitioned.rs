//! Scenario 13: partitioned coordinators (docs/PARTITIONS.md). Scenario
//! 1's workload with one coordinator (one partition) against two
//! coordinators sharing 8 partitions (4 each), alternating, each side on
//! fresh servers: the second figure must not be lower than the first.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use caucus_harness::Stack;
use serde_json::json;

use crate::support::{coordinator_from, server_pid, Api};
use crate::throughput::{measure, run_on, Rig, Run, Servers};

/// Partitions of the partitioned side, by default (4 per coordinator;
/// `CAUCUS_BENCH_PARTITIONS` sets another count).
pub const PARTITIONS: usize = 8;
/// Coordinators of the partitioned side.
pub const COORDINATORS: usize = 2;

/// One side's layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One coordinator, one partition.
    One,
    /// [`COORDINATORS`] coordinators sharing [`PARTITIONS`] partitions.
    Partitioned,
}

impl Layout {
    pub fn name(self) -> String {
        match self {
            Layout::One => "1 coordinator x 1 partition  ".to_string(),
            Layout::Partitioned => format!(
                "{COORDINATORS} coordinators x {} partitions",
                partitions() / COORDINATORS
            ),
        }
    }
}

/// The partitioned side's partition count: `CAUCUS_BENCH_PARTITIONS`, else
/// [`PARTITIONS`].
pub fn partitions() -> usize {
    std::env::var("CAUCUS_BENCH_PARTITIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|p: &usize| *p >= COORDINATORS)
        .unwrap_or(PARTITIONS)
}

/// Every run, in order.
pub async fn run(rounds: usize, slots: u32, items: usize) -> Result<Vec<(Layout, Run)>> {
    let timeout = Duration::from_secs(180);
    let mut out = Vec::new();
    for round in 0..rounds {
        // Alternate which side goes first, so drift in the machine's load
        // does not favour one.
        let order = if round % 2 == 0 {
            [Layout::One, Layout::Partitioned]
        } else {
            [Layout::Partitioned, Layout::One]
        };
        for layout in order {
            let r = match layout {
                Layout::One => run_on(Stack::start(), 1, slots, items, timeout).await?,
                Layout::Partitioned => partitioned(slots, items, timeout).await?,
            };
            out.push((layout, r));
        }
    }
    Ok(out)
}

async fn partitioned(slots: u32, items: usize, timeout: Duration) -> Result<Run> {
    let stack = Stack::start();
    let servers = Servers {
        nats_url: stack.nats.url(),
        nats_pids: stack.nats.pid().into_iter().collect(),
        redis_pid: server_pid("redis-server", stack.redis.port()),
    };
    let p = partitions().to_string();
    let service = |bin: &str| {
        stack
            .service(bin)
            .env("CAUCUS_COORDINATOR_PARTITIONS", p.as_str())
    };
    let mut rig = Rig::start(service, &servers, 1, slots).await?;
    for _ in 1..COORDINATORS {
        rig.others
            .push(coordinator_from(service("caucus-coordinator")));
    }
    split(&rig.api, Duration::from_secs(60)).await?;
    measure(rig, slots, items, timeout).await
}

/// Waits until every coordinator holds its share of the partitions.
async fn split(api: &Api, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let total = partitions();
    let share = total / COORDINATORS;
    loop {
        if let Ok(v) = api.call("partitions", json!({})).await {
            let mut per: BTreeMap<String, usize> = BTreeMap::new();
            for p in v["partitions"]
                .as_object()
                .into_iter()
                .flat_map(|m| m.values())
            {
                if let Some(o) = p["owner"].as_str() {
                    *per.entry(o.to_string()).or_default() += 1;
                }
            }
            if per.len() == COORDINATORS && per.values().all(|n| *n == share || *n == share + 1) {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            bail!("the coordinators did not split the {total} partitions within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Mean tasks/s of `layout`'s runs.
pub fn mean(runs: &[(Layout, Run)], layout: Layout) -> f64 {
    let v: Vec<f64> = runs
        .iter()
        .filter(|(l, _)| *l == layout)
        .map(|(_, r)| r.tasks_per_sec())
        .collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}
