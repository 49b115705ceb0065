//! Scenario 10: the cost of observability. Scenario 1's no-op throughput
//! workload in three modes, rotated round by round so a drift of the
//! machine's load weighs on all alike:
//! - **off**: no exporter, sample ratio 0, no metrics;
//! - **traces**: every span sampled (ratio 1.0) and exported over OTLP
//!   gRPC, no metrics (the "tracing on");
//! - **all**: as compose and Helm run it: traces as above, `/metrics`
//!   served and metrics pushed over OTLP too.
//!
//! The receiver is a lean in-process OTLP/gRPC sink ([`crate::otlp_sink`])
//! that decodes and counts: the spans really cross gRPC, and the receiver
//! takes as little as possible of the two cores caucus shares with it.

use std::time::{Duration, Instant};

use anyhow::Result;
use caucus_harness::{free_port, Stack};

use crate::otlp_sink::Sink;
use crate::support::server_pid;
use crate::throughput::{measure, Rig, Run, Servers};

/// How long the last completion may take to arrive.
const TIMEOUT: Duration = Duration::from_secs(120);

/// What is on in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Nothing exported, nothing sampled.
    Off,
    /// Traces at ratio 1.0 over OTLP; no metrics.
    Traces,
    /// Traces, `/metrics` and metrics over OTLP.
    All,
}

impl Mode {
    /// Its name in the output.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Off => "off   ",
            Mode::Traces => "traces",
            Mode::All => "all   ",
        }
    }
}

/// Every run of the comparison, in the order they ran.
pub struct Comparison {
    /// (mode, result, spans received for the run).
    pub runs: Vec<(Mode, Run, u64)>,
}

impl Comparison {
    /// Mean tasks/s of the runs in mode `on`.
    pub fn mean(&self, on: Mode) -> f64 {
        let tps: Vec<f64> = self
            .runs
            .iter()
            .filter(|(o, _, _)| *o == on)
            .map(|(_, r, _)| r.tasks_per_sec())
            .collect();
        tps.iter().sum::<f64>() / tps.len().max(1) as f64
    }
    /// Mean CPU seconds per task of the coordinator and workers in mode `on`.
    pub fn cpu_per_task(&self, on: Mode) -> f64 {
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

/// `rounds` rounds of one run per mode, the order rotated each round.
pub async fn run(rounds: usize, workers: usize, slots: u32, n_items: usize) -> Result<Comparison> {
    let modes = [Mode::Off, Mode::Traces, Mode::All];
    let mut runs = Vec::with_capacity(modes.len() * rounds);
    for round in 0..rounds {
        for i in 0..modes.len() {
            let on = modes[(round + i) % modes.len()];
            let (r, spans) = one(on, workers, slots, n_items).await?;
            runs.push((on, r, spans));
        }
    }
    Ok(Comparison { runs })
}

/// One run on fresh servers; traced modes get a fresh receiver too.
async fn one(mode: Mode, workers: usize, slots: u32, n_items: usize) -> Result<(Run, u64)> {
    let stack = Stack::start();
    let on = mode != Mode::Off;
    let sink = if on { Some(Sink::start().await?) } else { None };
    let mut env: Vec<(String, String)> = match &sink {
        Some(sink) => vec![
            ("CAUCUS_TELEMETRY_SAMPLE_RATIO".into(), "1.0".into()),
            ("CAUCUS_TELEMETRY_OTLP_ENDPOINT".into(), sink.endpoint()),
        ],
        None => vec![("CAUCUS_TELEMETRY_SAMPLE_RATIO".into(), "0".into())],
    };
    if mode == Mode::Traces {
        env.push(("CAUCUS_TELEMETRY_OTLP_METRICS".into(), "false".into()));
    }
    let with_env = |mut b: caucus_harness::ServiceBuilder| {
        for (k, v) in &env {
            b = b.env(k, v);
        }
        if mode == Mode::All {
            b = b.env(
                "CAUCUS_TELEMETRY_METRICS_ADDR",
                format!("127.0.0.1:{}", free_port()),
            );
        }
        b
    };
    let servers = Servers {
        nats_url: stack.nats.url(),
        nats_pids: stack.nats.pid().into_iter().collect(),
        redis_pid: server_pid("redis-server", stack.redis.port()),
    };
    let rig = Rig::start(|bin| with_env(stack.service(bin)), &servers, workers, slots).await?;
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
