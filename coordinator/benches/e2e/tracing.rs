//! Scenario 10: the cost of observability. Scenario 1's no-op throughput
//! workload with telemetry off (no exporter, sample ratio 0, no metrics
//! listener) and on as compose and Helm run it (every span sampled at
//! ratio 1.0 and exported over OTLP gRPC, `/metrics` served and metrics
//! pushed over OTLP), alternating off, on, on, off, … so a drift of the
//! machine's load weighs on both sides alike.
//!
//! The receiver is a lean in-process OTLP/gRPC sink ([`crate::otlp_sink`])
//! that decodes and counts: the spans really cross gRPC, and the receiver
//! takes as little as possible of the two cores caucus shares with it.

use std::time::{Duration, Instant};

use anyhow::Result;
use caucus_harness::{free_port, Stack};

use crate::otlp_sink::Sink;
use crate::support::{coordinator_from, server_pid, worker_from, Api, STOCK_AGENTS};
use crate::throughput::{measure, Rig, Run};

/// How long the last completion may take to arrive.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Every run of the comparison, in the order they ran.
pub struct Comparison {
    /// (telemetry on, result, spans received for the run).
    pub runs: Vec<(bool, Run, u64)>,
}

impl Comparison {
    /// Mean tasks/s of the runs with telemetry `on` (or off).
    pub fn mean(&self, on: bool) -> f64 {
        let tps: Vec<f64> = self
            .runs
            .iter()
            .filter(|(o, _, _)| *o == on)
            .map(|(_, r, _)| r.tasks_per_sec())
            .collect();
        tps.iter().sum::<f64>() / tps.len().max(1) as f64
    }
    /// Mean CPU seconds per task of the coordinator and workers.
    pub fn cpu_per_task(&self, on: bool) -> f64 {
        let per: Vec<f64> = self
            .runs
            .iter()
            .filter(|(o, _, _)| *o == on)
            .map(|(_, r, _)| {
                let caucus: f64 = r
                    .cpu
                    .iter()
                    .filter(|(n, _)| matches!(*n, "coordinator" | "workers"))
                    .map(|(_, s)| s)
                    .sum();
                caucus / r.tasks as f64
            })
            .collect();
        per.iter().sum::<f64>() / per.len().max(1) as f64
    }
}

/// `rounds` pairs of runs, off/on in even rounds and on/off in odd ones.
pub async fn run(rounds: usize, workers: usize, slots: u32, n_items: usize) -> Result<Comparison> {
    let mut runs = Vec::with_capacity(2 * rounds);
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for on in order {
            let (r, spans) = one(on, workers, slots, n_items).await?;
            runs.push((on, r, spans));
        }
    }
    Ok(Comparison { runs })
}

/// One run on fresh servers; with `on`, a fresh receiver too.
async fn one(on: bool, workers: usize, slots: u32, n_items: usize) -> Result<(Run, u64)> {
    let stack = Stack::start();
    let sink = if on { Some(Sink::start().await?) } else { None };
    let env: Vec<(String, String)> = match &sink {
        Some(sink) => vec![
            ("CAUCUS_TELEMETRY_SAMPLE_RATIO".into(), "1.0".into()),
            ("CAUCUS_TELEMETRY_OTLP_ENDPOINT".into(), sink.endpoint()),
        ],
        None => vec![("CAUCUS_TELEMETRY_SAMPLE_RATIO".into(), "0".into())],
    };
    let with_env = |mut b: caucus_harness::ServiceBuilder| {
        for (k, v) in &env {
            b = b.env(k, v);
        }
        if on {
            b = b.env(
                "CAUCUS_TELEMETRY_METRICS_ADDR",
                format!("127.0.0.1:{}", free_port()),
            );
        }
        b
    };
    let coordinator = coordinator_from(with_env(stack.service("caucus-coordinator")));
    let workers: Vec<_> = (0..workers)
        .map(|_| {
            worker_from(
                with_env(stack.service("caucus-worker")),
                STOCK_AGENTS,
                slots,
                "noop",
            )
        })
        .collect();
    let api = Api::connect(&stack).await?;
    let rig = Rig {
        coordinator,
        workers,
        observer: api.nats.clone(),
        api,
        nats_pid: stack.nats.pid(),
        redis_pid: server_pid("redis-server", stack.redis.port()),
    };
    let r = measure(rig, slots, n_items, TIMEOUT).await?;
    // Spans still queued in the processes when the last task completed
    // arrive later: count until nothing has come for two seconds, so the
    // figure says whether spans were dropped (it includes the warm-up's).
    let spans = || sink.as_ref().map_or(0, Sink::spans);
    let mut last = spans();
    let mut quiet_since = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(60);
    while on && quiet_since.elapsed() < Duration::from_secs(2) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = spans();
        if now != last {
            last = now;
            quiet_since = Instant::now();
        }
    }
    Ok((r, last))
}
