//! The CPU cost of one task's spans, without the servers: the `dispatch`
//! span as the coordinator makes it (parented on a stored traceparent, its
//! context injected into the message headers, entered while publishing)
//! and the `task` span as the worker makes it (parented on those headers,
//! its context injected into the two events it publishes), through the real
//! telemetry set-up of `caucus_shared::telemetry`.
//!
//! Each mode runs in a child process (the global subscriber is set once):
//! - `off`: sample ratio 0, no exporter (what scenario 10 compares against);
//! - `traces`: ratio 1.0, exported over OTLP gRPC to an in-process sink on
//!   its own runtime.
//!
//! CPU is read per thread from `/proc/self/task/*/schedstat` (nanoseconds)
//! and reported per task by where it was spent: the loop's thread (making,
//! entering and ending spans), the SDK's batch thread and the runtime that
//! drives the gRPC client (exporting). The sink's threads are left out.
//!
//! `cargo bench -p caucus-coordinator --bench span_cost` (Linux only).

#[path = "e2e/otlp_sink.rs"]
#[allow(dead_code)]
mod otlp_sink;

use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use caucus_shared::config::TelemetryConfig;
use caucus_shared::nats::trace;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Tasks per mode (override with `CAUCUS_BENCH_SPAN_TASKS`).
const TASKS: usize = 100_000;

/// Tasks between flushes: 20,000 spans, under `telemetry.trace_queue_size`.
const CHUNK: usize = 10_000;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--test") || !args.iter().any(|a| a == "--bench") {
        return Ok(());
    }
    if let Ok(mode) = std::env::var("CAUCUS_SPAN_COST_MODE") {
        return child(&mode);
    }
    let tasks = tasks();
    println!("[span cost] {tasks} tasks (a dispatch span + a task span each) per mode, CPU per task in us");
    for mode in ["off", "traces", "off", "traces"] {
        let out = std::process::Command::new(&args[0])
            .arg("--bench")
            .env("CAUCUS_SPAN_COST_MODE", mode)
            .output()?;
        print!("{}", String::from_utf8_lossy(&out.stdout));
        if !out.status.success() {
            anyhow::bail!("{mode}: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    Ok(())
}

fn tasks() -> usize {
    std::env::var("CAUCUS_BENCH_SPAN_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(TASKS)
}

fn child(mode: &str) -> anyhow::Result<()> {
    let tasks = tasks();
    let sink_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("sink")
        .enable_all()
        .build()?;
    let sink = sink_rt.block_on(otlp_sink::Sink::start())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("export-rt")
        .enable_all()
        .build()?;
    let traced = mode == "traces";
    let cfg = TelemetryConfig {
        sample_ratio: if traced { 1.0 } else { 0.0 },
        otlp_endpoint: traced.then(|| sink.endpoint()),
        ..TelemetryConfig::default()
    };
    let guard = rt.block_on(async { caucus_shared::telemetry::init(&cfg, "span-cost") })?;
    // Warm up (allocations, the gRPC connection), then measure.
    let stored = stored_root();
    rt.block_on(async { one_pass(&stored, 2_000) });
    let before = threads();
    let started = Instant::now();
    // In chunks the export queue holds, each flushed before the next: a
    // queue that overflows drops spans, and dropped spans cost nothing.
    let mut left = tasks;
    while left > 0 {
        let n = left.min(CHUNK);
        rt.block_on(async { one_pass(&stored, n) });
        guard.flush();
        left -= n;
    }
    let elapsed = started.elapsed();
    let after = threads();
    // Everything queued has been exported by the flush; let the sink count.
    let deadline = Instant::now() + Duration::from_secs(10);
    while traced && sink.spans() < 2 * tasks as u64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let per = |group: &str| -> f64 {
        let ns: u64 = after
            .iter()
            .filter(|(g, _, _)| g == group)
            .map(|(_, tid, ns)| {
                ns - before
                    .iter()
                    .find(|(_, t, _)| t == tid)
                    .map_or(0, |(_, _, b)| *b)
            })
            .sum();
        ns as f64 / 1_000.0 / tasks as f64
    };
    let (main, batch, export) = (per("main"), per("batch"), per("export"));
    println!(
        "  {mode:<6}: loop thread {main:6.2}, batch thread {batch:6.2}, gRPC runtime {export:6.2}, total {:6.2} (receiver {:6.2}); {:.0} tasks/s in the loop; {} spans received",
        main + batch + export,
        per("sink"),
        tasks as f64 / elapsed.as_secs_f64(),
        sink.spans()
    );
    drop(guard);
    Ok(())
}

/// A workflow root as the coordinator stores it (sampled when tracing).
fn stored_root() -> (String, Option<String>) {
    let root = tracing::info_span!(parent: None, "submit");
    trace::traceparent_of(&root.context()).unwrap_or_else(|| {
        (
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00".into(),
            None,
        )
    })
}

/// `n` tasks' spans, made as the coordinator and the worker make them.
fn one_pass(stored: &(String, Option<String>), n: usize) {
    for i in 0..n {
        let task_id = format!("wf-{i}/valuation");
        // Coordinator: runtime/scheduler/dispatch.rs.
        let parent = trace::context_from(&stored.0, stored.1.as_deref());
        let dispatch = tracing::info_span!(
            parent: None,
            "dispatch",
            otel.kind = "producer",
            caucus.task_id = task_id.as_str(),
            caucus.workflow_id = "wf",
            caucus.item = "AAPL",
            caucus.stage = "valuation",
            caucus.agent_type = "valuation",
            caucus.attempt = 1i64,
            caucus.queue_wait_ms = 0i64
        );
        trace::set_parent(&dispatch, parent);
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Msg-Id", task_id.as_str());
        trace::inject_context(&dispatch.context(), &mut headers);
        // Entered while publishing and while awaiting the ack.
        dispatch.in_scope(|| std::hint::black_box(&headers));
        dispatch.in_scope(|| std::hint::black_box(&headers));
        drop(dispatch);
        // Worker: runtime/task_span.rs and the two events it publishes.
        let task = tracing::info_span!(
            "task",
            otel.kind = "consumer",
            caucus.task_id = task_id.as_str(),
            caucus.workflow_id = "wf",
            caucus.item = "AAPL",
            caucus.stage = "valuation",
            caucus.agent_type = "valuation",
            caucus.attempt = 1i64,
            caucus.worker_id = "w1",
        );
        trace::set_remote_parent(&task, Some(&headers));
        task.in_scope(|| {
            std::hint::black_box(trace::headers());
            std::hint::black_box(trace::headers());
        });
        drop(task);
    }
}

/// (group, tid, on-CPU ns) of every thread of this process.
fn threads() -> Vec<(String, u64, u64)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(tid) = e.file_name().to_string_lossy().parse::<u64>() else {
            continue;
        };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        let ns = std::fs::read_to_string(e.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0);
        let comm = comm.trim();
        let group = if comm.starts_with("sink") {
            "sink"
        } else if comm.starts_with("OpenTelemetry") {
            "batch"
        } else if comm.starts_with("export-rt") {
            "export"
        } else {
            "main"
        };
        out.push((group.to_string(), tid, ns));
    }
    out
}
