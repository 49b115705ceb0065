//! `caucus-chaos`: runs the real stack under faults and checks, from the
//! outside, that no work was lost or done twice, that capacity held and
//! that nothing crashed. `scripts/chaos` builds the release binaries and
//! runs it; `scripts/chaos --help` lists the options.
//!
//! # The run
//!
//! In a temporary directory (kept with `--keep`): a real `nats-server -js`
//! and `redis-server` on free loopback ports (never the `.caucus` stack),
//! the facilitator, the correlator, two coordinators and two worker
//! processes per agent type of the built-in `stock-analysis` pipeline
//! (2 slots each, handler `sleep:<--task-ms>`, cluster capacity capped at
//! 3, valuation at 2, so the Redis semaphore, not the slot count, is what
//! holds capacity). Durations are shrunk so a fault outlasts them:
//! `coordinator.leader_lease` 2 s, `worker.ack_wait` 2 s, `worker.lease_ttl`
//! 1 s, `worker.fetch_wait` and `worker.heartbeat_interval` 200 ms,
//! `coordinator.tick` 50 ms (environment variables, `CAUCUS_*`).
//!
//! `--workflows N` stock-analysis workflows (with `auto_approve_gates`)
//! are submitted in waves, one a second over the first 60 % of
//! `--duration`, each wave with its own idempotency key, so a submit that
//! timed out is simply sent again (a coordinator that does not take keys
//! gets none; then the items of a failed submit are looked up in `status`
//! before the rest is sent again).
//!
//! Meanwhile a plan drawn from `--seed` (same seed, same faults in the same
//! order, same pause and downtime lengths) injects, one after another with
//! 0.3–1.2 s between them, every kind at least once and then random ones
//! until `--duration` is over: SIGKILL and restart (after 0–1 s) of the
//! leading coordinator, a worker (one running a task, when one is), the
//! facilitator, the correlator; SIGSTOP of the leading coordinator for
//! 1.5–2.5 × `leader_lease` and of a (busy) worker for 1.5–2.5 ×
//! `ack_wait`, then SIGCONT; SIGKILL of nats-server and a
//! restart on the same port and store directory after 0.3–2 s; Redis
//! `FLUSHALL`; SIGKILL of redis-server and a restart, empty, after
//! 0.2–1 s. The leading coordinator is the one whose log last said
//! `leading`, a busy worker one with a `started` event not yet followed by
//! its `completed`/`failed` (only to aim the faults; nothing is measured
//! from logs).
//!
//! Then it waits, polling with a deadline (`--settle`), until the
//! coordinator reports every workflow completed, and until the task queue
//! is empty and no task event has arrived for a second.
//!
//! # What it measures
//!
//! Only from outside: the coordinator's control API (NATS request/reply,
//! the same calls as the `caucus` CLI), the task events (the
//! `CAUCUS_EVENTS` stream, plus a plain subscription to
//! `caucus.events.task.>` held during the run, which also sees the events
//! the stream drops as duplicates of an attempt's status), the revisions
//! of the stored workflow records (the KV stream `KV_caucus_workflows`,
//! read as they are written), and the tool's own journal of what it
//! killed, paused or flushed, and when.
//!
//! 1. **Lost workflows**: acknowledged workflows (their ids came back from
//!    `submit`, or were found by item after a lost reply) that `status`
//!    does not report `completed` at the end, or does not list at all.
//!    Records stored without an acknowledgement and never completed are
//!    listed apart (`unacknowledged`), not counted.
//! 2. **Completions applied more than once**: a completion is applied
//!    when the coordinator writes it into the workflow record, so this
//!    reads the records' revisions: tasks whose stored record became
//!    `completed` more than once, went back from `completed`, or whose
//!    completion (attempt and `finished_at`) changed between revisions;
//!    tasks with a `completed` event for a later attempt than one the
//!    record had already completed (dispatched again after its completion
//!    was recorded); and tasks whose final record (`status` with tasks)
//!    is not completed, or at a later attempt, after the record had
//!    completed them. Not counted, but reported: an attempt that runs twice
//!    (redelivery: one completion per attempt and status reaches the
//!    stream) and a task completed in two attempts whose record completed
//!    only one (the coordinator retried an attempt that went silent, e.g.
//!    a stopped worker, and ignored the late completion).
//! 3. **Peak concurrent executions per agent type against its capacity**
//!    (workers' slots, capped). An execution is one (task, attempt,
//!    worker instance, `started_at`): it starts at `started_at` and ends at
//!    its `completed`/`failed` event's `at`; without one, at the SIGKILL of
//!    its worker if that came first, else when the handler's fixed sleep
//!    was over (counted from when its `started` event was stored, + 100
//!    ms), or when its worker woke up if it was stopped at that moment (a
//!    run cancelled because its lease was lost reports nothing). A stopped
//!    (SIGSTOP) worker runs nothing: its executions do not count while it
//!    is stopped; after its SIGCONT they count again only if the handler's
//!    sleep (wall-clock time) was not over by then — otherwise the worker
//!    merely reports, on waking, a run whose work ended while it was
//!    stopped. Nothing else is excused: capacity must hold across kills,
//!    Redis data losses and NATS restarts (docs/OPERATIONS.md).
//! 4. **Processes that died unasked**: any child (services, nats-server,
//!    redis-server) that exited without the tool killing it. It is
//!    restarted (at most 5 times) so the run goes on.
//!
//! It prints a summary (with `--json`, the JSON report on stdout and the
//! summary on stderr) and exits 0 when all four hold, 1 when one does not,
//! 2 when the run itself could not be made.

mod analysis;
mod cluster;
mod observe;
mod plan;
mod report;

use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use clap::Parser;
use serde_json::{json, Value};

use analysis::Outages;
use caucus_shared::subjects::StreamKind;
use cluster::{Cluster, Journal, Settings};
use plan::{FaultKind, PlannedFault, Timing};

/// The agent types of the built-in stock-analysis pipeline.
const AGENTS: [&str; 6] = [
    "screening",
    "business",
    "financial",
    "strategy",
    "valuation",
    "report",
];

/// Runs the caucus stack under seeded faults and checks for lost work,
/// completions applied twice, capacity overruns and crashed processes.
#[derive(Debug, Parser)]
#[command(name = "caucus-chaos", version)]
struct Opts {
    /// Stock-analysis workflows to submit.
    #[arg(long, default_value_t = 60)]
    workflows: usize,
    /// Fault window (at least; every fault kind runs once even if longer).
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Seed of the fault plan (random when absent; printed either way).
    #[arg(long)]
    seed: Option<u64>,
    /// The JSON report on stdout (the summary goes to stderr).
    #[arg(long)]
    json: bool,
    /// Keep the run directory (process logs, NATS store, server logs).
    #[arg(long)]
    keep: bool,
    /// How long each task runs (worker handler `sleep:MS`).
    #[arg(long, default_value_t = 300)]
    task_ms: u64,
    /// How long workflows may take to finish after the last fault.
    #[arg(long, default_value = "120s", value_parser = humantime::parse_duration)]
    settle: Duration,
    /// `coordinator.partitions`: with more than one, both coordinators
    /// are active, sharing the partitions (docs/PARTITIONS.md).
    #[arg(long, default_value_t = 1)]
    partitions: u32,
}

fn timing() -> Timing {
    Timing {
        leader_lease: Duration::from_secs(2),
        ack_wait: Duration::from_secs(2),
        lease_ttl: Duration::from_secs(1),
        fetch_wait: Duration::from_millis(200),
        heartbeat: Duration::from_millis(200),
        tick: Duration::from_millis(50),
    }
}

fn say(line: impl AsRef<str>) {
    eprintln!("[chaos] {}", line.as_ref());
}

fn main() -> ExitCode {
    let opts = Opts::parse();
    match run(opts) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("[chaos] ERROR: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(opts: Opts) -> Result<bool> {
    let seed = opts.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64 % 1_000_000)
    });
    let mut run_dir = tempfile::Builder::new()
        .prefix("caucus-chaos-")
        .tempdir()
        .context("run directory")?;
    if opts.keep {
        run_dir.disable_cleanup(true);
    }
    let settings = Settings {
        run_dir: run_dir.path().to_path_buf(),
        timing: timing(),
        task_ms: opts.task_ms,
        agents: AGENTS.iter().map(|a| a.to_string()).collect(),
        workers_per_agent: 2,
        slots: 2,
        partitions: opts.partitions,
        caps: AGENTS
            .iter()
            .map(|a| (a.to_string(), if *a == "valuation" { 2 } else { 3 }))
            .collect(),
    };
    // Planned for twice the window: the controller stops once every kind
    // ran and the window is over.
    let plan = plan::plan(seed, opts.duration * 2, &settings.timing);
    say(format!(
        "seed {seed}: {} workflows, faults for {:?}, tasks of {} ms, run dir {}",
        opts.workflows,
        opts.duration,
        opts.task_ms,
        run_dir.path().display()
    ));
    let journal = Arc::new(Mutex::new(Journal::default()));
    let cluster = Cluster::start(&settings, journal.clone())?;
    say(format!(
        "stack up: {} (NATS), {} (Redis), {} services",
        cluster.nats.url(),
        cluster.redis.url(),
        cluster.names(cluster::Role::Worker).len() + 4
    ));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (report, mut cluster) =
        rt.block_on(drive(&opts, seed, &settings, plan, cluster, journal))?;
    if opts.keep {
        cluster.keep_files();
    }
    drop(cluster);
    let ok = report.ok;
    let text = report::summary(&report);
    if opts.json {
        eprint!("{text}");
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{text}");
    }
    if opts.keep {
        say(format!("run directory kept: {}", run_dir.path().display()));
    }
    Ok(ok)
}

/// The faults, on their own thread: returns the cluster once `stop` is set.
fn controller(
    mut cluster: Cluster,
    plan: Vec<PlannedFault>,
    window: Duration,
    t0: Instant,
    t0_utc: chrono::DateTime<chrono::Utc>,
    done: tokio::sync::oneshot::Sender<()>,
    stop: Arc<AtomicBool>,
) -> Cluster {
    for (i, f) in plan.iter().enumerate() {
        if i >= FaultKind::ALL.len() && t0.elapsed() >= window {
            break;
        }
        cluster.idle(f.gap);
        let r = cluster.inject(f);
        say(format!(
            "+{:5.1}s {} {} ({} ms){}",
            (r.start - t0_utc).num_milliseconds() as f64 / 1000.0,
            f.kind.name(),
            r.target,
            (r.end - r.start).num_milliseconds(),
            r.note.map(|n| format!(": {n}")).unwrap_or_default()
        ));
    }
    let _ = done.send(());
    while !stop.load(Ordering::SeqCst) {
        cluster.idle(Duration::from_millis(100));
    }
    cluster.check();
    cluster
}

async fn drive(
    opts: &Opts,
    seed: u64,
    settings: &Settings,
    plan: Vec<PlannedFault>,
    mut cluster: Cluster,
    journal: Arc<Mutex<Journal>>,
) -> Result<(report::Report, Cluster)> {
    let api = observe::Api::connect(&cluster.nats.url()).await?;
    let tap = observe::Tap::start(&api).await?;
    cluster.busy = Some(tap.busy.clone());
    let kv = observe::KvWatch::start(&api);
    let capacity = settings.capacity();

    // Every worker registered before the clock starts (else the first
    // wave waits for capacity, which is not what is measured).
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Value::Null;
    loop {
        if let Ok(r) = api.status(json!({"ids": ["-"]}), deadline).await {
            seen = r["capacity"].clone();
            if capacity
                .iter()
                .all(|(a, c)| seen[a].as_u64() == Some(*c as u64))
            {
                break;
            }
        }
        if Instant::now() >= deadline {
            say(format!("capacity not all registered after 30 s: {seen}"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let t0 = Instant::now();
    let t0_utc = chrono::Utc::now();
    let stop = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let ctl = {
        let stop = stop.clone();
        let window = opts.duration;
        std::thread::spawn(move || controller(cluster, plan, window, t0, t0_utc, done_tx, stop))
    };

    // Waves, one a second over the first 60 % of the window.
    let items: Vec<String> = (0..opts.workflows)
        .map(|i| format!("CHAOS-{i:04}"))
        .collect();
    let window = opts.duration.mul_f64(0.6);
    let waves = (window.as_secs_f64().round() as usize).clamp(1, opts.workflows.max(1));
    let per_wave = opts.workflows.div_ceil(waves).max(1);
    let unit_ms = (opts.task_ms / 2).max(1);
    let mut submitted = observe::Submitted::default();
    for (w, chunk) in items.chunks(per_wave).enumerate() {
        let at = t0 + window.mul_f64(w as f64 / waves as f64);
        tokio::time::sleep_until(at.into()).await;
        let key = format!("chaos-{seed}-wave-{w}");
        let s = api
            .submit(
                chunk,
                unit_ms,
                &key,
                Instant::now() + Duration::from_secs(60),
            )
            .await;
        submitted.keyed = s.keyed;
        submitted.workflows.extend(s.workflows);
        submitted.ambiguous += s.ambiguous;
        submitted.unsubmitted.extend(s.unsubmitted);
    }
    say(format!(
        "submitted {} workflows ({} ambiguous submit(s), {} item(s) never accepted)",
        submitted.workflows.len(),
        submitted.ambiguous,
        submitted.unsubmitted.len()
    ));
    let _ = done_rx.await;
    let faults_secs = t0.elapsed().as_secs_f64();
    say(format!(
        "faults over after {faults_secs:.1}s; waiting up to {:?} for the workflows",
        opts.settle
    ));

    // Settle: every acknowledged workflow completed, or the deadline.
    let mut tracked: Vec<(String, String)> = submitted.workflows.clone();
    tracked.sort();
    tracked.dedup();
    let ids: Vec<String> = tracked.iter().map(|(i, _)| i.clone()).collect();
    let settle_deadline = Instant::now() + opts.settle;
    let t_settle = Instant::now();
    loop {
        let done = match api
            .status(
                json!({"ids": ids}),
                Instant::now() + Duration::from_secs(10),
            )
            .await
        {
            Ok(r) => r["workflows"].as_array().map_or(0, |w| {
                w.iter().filter(|w| w["state"] == "completed").count()
            }),
            Err(_) => 0,
        };
        if done == ids.len() {
            say(format!(
                "all {done} workflows completed {:.1}s after the last fault",
                t_settle.elapsed().as_secs_f64()
            ));
            break;
        }
        if Instant::now() >= settle_deadline {
            say(format!(
                "settle deadline: {done} of {} completed",
                ids.len()
            ));
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    if !observe::quiesce(
        &api,
        Duration::from_secs(1),
        Instant::now() + Duration::from_secs(20),
    )
    .await
    {
        say("the task queue or the event stream did not go quiet within 20 s");
    }

    // Read everything back.
    let stored = observe::stored_events(&api).await?;
    let failures = observe::stream_bodies(&api, StreamKind::Failures, "caucus.failures.>").await?;
    let control = observe::stream_bodies(&api, StreamKind::Control, "caucus.control.>").await?;
    let tapped = tap.finish();
    let kv = kv
        .finish(&api.js(), Instant::now() + Duration::from_secs(20))
        .await?;
    let mut all_ids: Vec<String> = ids.clone();
    for id in kv.workflows.keys() {
        if !all_ids.contains(id) {
            all_ids.push(id.clone());
        }
    }
    let finals_v = api
        .status(
            json!({"ids": all_ids, "tasks": true}),
            Instant::now() + Duration::from_secs(30),
        )
        .await?;
    stop.store(true, Ordering::SeqCst);
    let cluster = tokio::task::spawn_blocking(move || ctl.join())
        .await?
        .map_err(|_| anyhow::anyhow!("the controller thread panicked"))?;
    let journal = journal.lock().expect("journal").clone();

    let mut finals: HashMap<String, Value> = HashMap::new();
    for w in finals_v["workflows"].as_array().into_iter().flatten() {
        if let Some(id) = w["workflow_id"].as_str() {
            finals.insert(id.to_string(), w.clone());
        }
    }
    let outages = outages(&journal);
    let inputs = report::Inputs {
        seed,
        opts_workflows: opts.workflows,
        duration: opts.duration,
        task_ms: opts.task_ms,
        timing: settings.timing,
        capacity,
        faults_secs,
        t0: t0_utc,
        submitted,
        tracked,
        finals,
        kv,
        tapped,
        stored,
        outages,
        journal,
        failures,
        control,
        run_dir: opts.keep.then(|| settings.run_dir.clone()),
    };
    Ok((report::build(inputs), cluster))
}

/// Kills and pauses, keyed by worker instance id.
fn outages(j: &Journal) -> Outages {
    let mut o = Outages::default();
    for inc in &j.incarnations {
        if let (Some(id), Some(at), Some("killed")) =
            (&inc.instance_id, inc.ended, inc.end.as_deref())
        {
            o.kills.insert(id.clone(), at);
        }
    }
    for (_, id, from, to) in &j.pauses {
        o.pauses.push((id.clone(), *from, *to));
    }
    o
}
