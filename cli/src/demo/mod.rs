//! `caucus demo`: the plan for AAPL+MSFT, a paced batch with live progress,
//! its debates, gates and reports, then a second valuation worker and the
//! same batch again, planned and measured side by side. Every step it
//! announces is checked: a step that did not happen makes it exit 1.

mod reviewer;
mod story;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use caucus_shared::api::coordinator::plan::{Plan, PlanOp, PlanReply, PlanRequest};
use caucus_shared::api::coordinator::status::{Status, StatusRequest, WorkflowState, WorkflowView};
use caucus_shared::api::coordinator::submit::{Submit, SubmitRequest};
use caucus_shared::api::coordinator::workers::Workers;
use caucus_shared::api::facilitator::{ExpertLoad, ExpertLoadReply};
use caucus_shared::api::Empty;
use caucus_shared::Config;

use super::submit::{report_of, watch_until_done};
use super::Client;
use story::Step;

/// Tickers of the bundled (synthetic) data set used by the demo. The first
/// ten hold the debate story: AMZN, META, AMD, INTC, LLY and NKE, whose
/// margin debates the challenger rejects at level 1 (more than the
/// expert's three slots, so some are deferred to the gate), and NVDA and
/// TSLA, which the agents resolve themselves (DEBATES.md §9).
const TICKERS: &[&str] = &[
    "AAPL", "MSFT", "AMZN", "META", "AMD", "NVDA", "INTC", "TSLA", "LLY", "NKE", "BRK.B", "GOOGL",
    "JPM", "V", "JNJ", "WMT", "PG", "XOM", "UNH", "HD", "MA", "DIS", "KO", "PEP", "CSCO", "ORCL",
];

/// Fewest tickers whose batch plays the whole debate story.
const STORY_TICKERS: usize = 10;

/// How long to wait for the extra worker's capacity to show up.
const SCALE_DEADLINE: Duration = Duration::from_secs(30);
/// How long the demo waits for a valuation worker's slots to be
/// registered (a worker registers right after it reports ready).
const REGISTRATION_WAIT: Duration = Duration::from_secs(15);

/// How long the expert's re-runs may take before the demo gives up.
const RERUN_DEADLINE: Duration = Duration::from_secs(90);

pub async fn run(client: &Client, config: &Config, n: usize, unit_ms: u64) -> anyhow::Result<i32> {
    let n = n.clamp(1, TICKERS.len());
    let tickers: Vec<String> = TICKERS[..n].iter().map(|s| s.to_string()).collect();
    client
        .call_ok("coordinator", "health", Value::Null)
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "{e}\nthe coordinator is not answering: start the stack with `scripts/stack up`"
            )
        })?;
    // The debate story needs the facilitator; without one the batches run
    // and are measured all the same.
    let facilitator = client
        .call_ok("facilitator", "health", Value::Null)
        .await
        .is_ok();
    let story = n >= STORY_TICKERS && facilitator;

    println!("== 1. The plan for AAPL + MSFT (stock-analysis) ==\n");
    let pair = ["AAPL".to_string(), "MSFT".to_string()];
    let p1 = plan(client, &pair, BTreeMap::new()).await?;
    print!("{}", p1.gantt);
    let p2 = plan(
        client,
        &pair,
        BTreeMap::from([("valuation".to_string(), 2)]),
    )
    .await?;
    println!(
        "with valuation capacity 2: makespan {} (was {})\n",
        fmt_units(p2.plan.makespan),
        fmt_units(p1.plan.makespan)
    );

    // The pipeline's own agent types, from the plan: only their live
    // capacities go to `plan` (another type, e.g. one whose worker died and
    // that still shows at capacity 0, has nothing to do with this batch).
    let agents = plan_agent_types(&p1.plan);
    // A worker registers its slots right after it reports ready, so a
    // demo started the moment the stack is up may ask first: wait a while.
    let deadline = Instant::now() + REGISTRATION_WAIT;
    let caps = loop {
        let caps = pipeline_capacities(&live_capacities(client).await?, &agents);
        if caps.get("valuation").copied().unwrap_or(0) > 0 || Instant::now() >= deadline {
            break caps;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let val1 = caps.get("valuation").copied().unwrap_or(0);
    if val1 == 0 {
        anyhow::bail!("no valuation worker is registered: start the stack with `scripts/stack up`");
    }
    wait_leases_settled(client, &agents).await?;
    if story {
        announce(client).await;
    } else if !facilitator {
        println!("(no facilitator is running: the batches hold no debate story)\n");
    } else {
        println!("(fewer than {STORY_TICKERS} tickers: the batches hold no debate story)\n");
    }
    println!(
        "== 2. A batch of {n} tickers, one time unit = {unit_ms} ms, live capacities {} ==\n",
        caps_line(&caps)
    );
    let b1 = batch(client, &tickers, unit_ms, &caps, story).await?;
    let dir = write_reports(client, &b1.ids).await?;
    println!("\nreports: {}/<ticker>.md", dir.display());
    println!(
        "planned makespan {:.1} s, measured {:.1} s\n",
        b1.planned, b1.measured
    );

    println!("== 3. Adding a second valuation worker ==\n");
    let mut extra = spawn_valuation_worker(config)?;
    let deadline = Instant::now() + SCALE_DEADLINE;
    let caps2 = loop {
        let c = pipeline_capacities(&live_capacities(client).await?, &agents);
        if c.get("valuation").copied().unwrap_or(0) > val1 {
            break c;
        }
        if Instant::now() > deadline {
            terminate(&mut extra);
            anyhow::bail!("the extra valuation worker did not register within {SCALE_DEADLINE:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let val2 = caps2.get("valuation").copied().unwrap_or(0);
    println!("valuation capacity {val1} → {val2}");
    let b2 = batch(client, &tickers, unit_ms, &caps2, story).await;
    terminate(&mut extra);
    let b2 = b2?;
    let (planned1, measured1, planned2, measured2) =
        (b1.planned, b1.measured, b2.planned, b2.measured);
    println!("\n== Result ==");
    println!("                 planned    measured");
    println!("valuation × {val1}:  {planned1:>7.1} s  {measured1:>8.1} s");
    println!("valuation × {val2}:  {planned2:>7.1} s  {measured2:>8.1} s");
    println!(
        "one more valuation worker finished the batch {:.0}% sooner (planned {:.0}%)",
        100.0 * (1.0 - measured2 / measured1),
        100.0 * (1.0 - planned2 / planned1)
    );
    let mut failed_steps = 0;
    for (name, b) in [("first", &b1), ("second", &b2)] {
        for s in &b.missing {
            eprintln!("the {name} batch did not show {}", s.describe());
            failed_steps += 1;
        }
    }
    if failed_steps > 0 {
        eprintln!(
            "demo incomplete: {failed_steps} announced step(s) did not happen \
             (a full expert queue from earlier debates is the usual cause: \
             caucus debates --state awaiting_human; caucus decide <id> --expert <name> --side challenger)"
        );
        return Ok(1);
    }
    if story {
        println!("every announced step happened in both batches");
    }
    Ok(0)
}

/// What the batches will show, before they run.
async fn announce(client: &Client) {
    let load = expert_load(client).await;
    println!("Each batch shows, and the demo checks:");
    for (i, s) in story::STEPS.iter().enumerate() {
        println!("  {}. {}", i + 1, s.describe());
    }
    println!(
        "expert load before the batch: {}\n",
        story::expert_load(&load)
    );
}

/// Each expert's load (none when the facilitator does not answer: the
/// story says "no experts configured").
async fn expert_load(client: &Client) -> ExpertLoadReply {
    client.op::<ExpertLoad>(&Empty {}).await.unwrap_or_default()
}

/// `{"screening": 5, …}` as `screening 5, …`.
fn caps_line(caps: &Capacities) -> String {
    caps.iter()
        .map(|(a, c)| format!("{a} {c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A makespan in time units, as people write it (`9`, `8.5`).
fn fmt_units(x: f64) -> String {
    if (x - x.round()).abs() < 1e-9 {
        format!("{}", x.round() as i64)
    } else {
        format!("{x:.1}")
    }
}

/// Capacity per agent type (slots).
type Capacities = BTreeMap<String, u32>;

/// `coordinator.plan` of `items` through stock-analysis with `capacities`.
async fn plan(
    client: &Client,
    items: &[String],
    capacities: Capacities,
) -> anyhow::Result<PlanReply> {
    let request = PlanRequest {
        items: items.to_vec(),
        pipeline: json!("stock-analysis"),
        capacities,
    };
    client.op_ok::<PlanOp>(&request).await
}

/// Each live agent type's capacity, from `coordinator.workers`.
async fn live_capacities(client: &Client) -> anyhow::Result<Capacities> {
    let w = client.op_ok::<Workers>(&Empty {}).await?;
    Ok(w.agents
        .into_iter()
        .map(|a| (a.agent_type, a.capacity))
        .collect())
}

/// Waits while the capacity semaphores of `agents` grant no lease: a Redis
/// that started empty looks like one that lost its data, and for one
/// `worker.lease_ttl` running tasks re-register first. Timing a batch
/// through that window would compare the plan with a wait.
async fn wait_leases_settled(client: &Client, agents: &BTreeSet<String>) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut said = false;
    loop {
        let w = client.op_ok::<Workers>(&Empty {}).await?;
        let wait = w
            .agents
            .iter()
            .filter(|a| agents.contains(&a.agent_type))
            .map(|a| a.recovering_ms)
            .max()
            .unwrap_or(0);
        if wait == 0 {
            return Ok(());
        }
        if !said {
            println!(
                "(Redis started empty: capacity leases are granted again in {:.1} s)\n",
                wait as f64 / 1000.0
            );
            said = true;
        }
        if Instant::now() > deadline {
            anyhow::bail!("capacity leases still recovering after 2 minutes");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Agent types that run tasks in a plan (gates have none).
fn plan_agent_types(plan: &Plan) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = plan.utilization.keys().cloned().collect();
    out.extend(plan.tasks.iter().filter_map(|t| t.agent_type.clone()));
    out
}

/// The live capacities `plan` is given: those of the pipeline's agent types
/// only, and only when at least 1 (a type of the pipeline with no live slot
/// keeps the pipeline's own figure rather than failing the plan with
/// "capacity 0").
fn pipeline_capacities(live: &Capacities, agents: &BTreeSet<String>) -> Capacities {
    live.iter()
        .filter(|(a, c)| agents.contains(*a) && **c > 0)
        .map(|(a, c)| (a.clone(), *c))
        .collect()
}

/// One measured batch.
struct Batch {
    /// Planned makespan, seconds.
    planned: f64,
    /// Measured makespan, seconds.
    measured: f64,
    /// Its workflows.
    ids: Vec<String>,
    /// Announced steps that did not happen.
    missing: Vec<Step>,
}

/// Plans with the live capacities, runs the batch while the demo reviewer
/// plays the person at the gates, then tells its debate story and lets the
/// expert decide what waits at level 3 (waiting for the re-runs that
/// causes, so the next batch starts from a quiet stack).
async fn batch(
    client: &Client,
    tickers: &[String],
    unit_ms: u64,
    caps: &Capacities,
    story: bool,
) -> anyhow::Result<Batch> {
    let p = plan(client, tickers, caps.clone()).await?;
    let planned = p.plan.makespan * unit_ms as f64 / 1000.0;
    let t0 = Instant::now();
    let request = SubmitRequest {
        items: tickers.to_vec(),
        pipeline: json!("stock-analysis"),
        time_unit_ms: Some(unit_ms),
        auto_approve_gates: true,
        idempotency_key: None,
    };
    let ids = client.op_ok::<Submit>(&request).await?.summary.workflow_ids;
    let stop = tokio_util::sync::CancellationToken::new();
    let reviewer = tokio::spawn(reviewer::review_gates(
        client.clone(),
        ids.clone(),
        stop.clone(),
    ));
    let fin = watch_until_done(client, &ids, true, false).await;
    stop.cancel();
    let reviewed = reviewer.await.unwrap_or_default();
    let fin = fin?;
    let measured = t0.elapsed().as_secs_f64();
    let workflows: BTreeMap<String, String> = fin
        .status()
        .workflows
        .iter()
        .map(|w| (w.workflow_id.clone(), w.item.clone()))
        .collect();
    let failed = fin
        .status()
        .workflows
        .iter()
        .filter(|w| w.state == WorkflowState::Failed)
        .count();
    if failed > 0 {
        println!("{failed} workflow(s) failed: see `caucus status --state failed`");
    }
    if !story {
        return Ok(Batch {
            planned,
            measured,
            ids,
            missing: Vec::new(),
        });
    }
    let debates = story::settled_debates(client, &workflows).await?;
    let load = expert_load(client).await;
    story::print(&debates, &reviewed, &load);
    let decided = story::expert_decides(client, &debates).await?;
    if !decided.is_empty() {
        println!(
            "\nthe expert decided {} level-3 debate(s) for the strategy analyst's margin: {}",
            decided.len(),
            decided.join(", ")
        );
        let reran = wait_settled(client, &workflows, &decided).await?;
        if reran.is_empty() {
            println!("  (their valuations already used that margin: nothing re-ran)");
        } else {
            println!(
                "  valuation and report re-ran with the decided margin for {}",
                reran.join(", ")
            );
        }
    }
    Ok(Batch {
        planned,
        measured,
        ids,
        missing: story::missing(&debates, &reviewed, &decided),
    })
}

/// Waits until every workflow of `items` has the expert's margin settled
/// and any re-run it caused finished; returns the items that re-ran.
async fn wait_settled(
    client: &Client,
    workflows: &BTreeMap<String, String>,
    items: &[String],
) -> anyhow::Result<Vec<String>> {
    let request = StatusRequest {
        ids: workflows
            .iter()
            .filter(|(_, item)| items.contains(item))
            .map(|(id, _)| id.clone())
            .collect(),
        ..StatusRequest::default()
    };
    let deadline = Instant::now() + RERUN_DEADLINE;
    loop {
        let wfs = client.op_ok::<Status>(&request).await?.workflows;
        let settled = |w: &WorkflowView| {
            w.resolved_assumptions
                .get("operating_margin")
                .is_some_and(|m| !m.is_null())
                && w.state == WorkflowState::Completed
                && w.reruns.iter().all(|r| r.completed_at.is_some())
        };
        if wfs.len() == request.ids.len() && wfs.iter().all(settled) {
            return Ok(wfs
                .into_iter()
                .filter(|w| !w.reruns.is_empty())
                .map(|w| w.item)
                .collect());
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "the expert's decisions had not settled every workflow after {RERUN_DEADLINE:?}"
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Writes each completed workflow's report to `<state>/reports/<item>.md`,
/// named by the item as typed (`BRK.B.md`).
async fn write_reports(client: &Client, ids: &[String]) -> anyhow::Result<PathBuf> {
    let dir = state_dir().join("reports");
    std::fs::create_dir_all(&dir)?;
    // One workflow per request: lists carry no outputs, and a whole
    // batch's outputs would not fit one reply.
    for id in ids {
        let request = StatusRequest {
            ids: vec![id.clone()],
            tasks: true,
            ..StatusRequest::default()
        };
        let st = client.op_ok::<Status>(&request).await?;
        for w in st.workflows {
            if w.state != WorkflowState::Completed {
                continue;
            }
            if let Some(md) = report_of(&w) {
                std::fs::write(dir.join(report_file_name(&w.item)), md)?;
            }
        }
    }
    Ok(dir)
}

/// `<item>.md` with the item as typed; only characters a file name cannot
/// hold (a path separator, a leading dot, control characters) become `_`.
fn report_file_name(item: &str) -> String {
    let mut name: String = item
        .chars()
        .map(|c| {
            if c == '/' || c == '\\' || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    if name.is_empty() || name.starts_with('.') {
        name.insert(0, '_');
    }
    format!("{name}.md")
}

/// The local stack's state directory (`$CAUCUS_STATE` or `.caucus`).
fn state_dir() -> PathBuf {
    super::stack::state_dir().unwrap_or_else(|| Path::new(".caucus").to_path_buf())
}

fn spawn_valuation_worker(config: &Config) -> anyhow::Result<Child> {
    let exe = std::env::current_exe()?;
    let bin = exe.with_file_name("caucus-worker");
    if !bin.is_file() {
        anyhow::bail!("{} not found next to the caucus binary", bin.display());
    }
    let log_dir = state_dir().join("logs");
    std::fs::create_dir_all(&log_dir)?;
    let log = std::fs::File::create(log_dir.join("demo-worker-valuation.log"))?;
    let child = Command::new(bin)
        .args([
            "--agent",
            "valuation",
            "--slots",
            "1",
            "--handler",
            "builtin",
        ])
        .env("CAUCUS_NATS_URL", &config.nats.url)
        .env("CAUCUS_REDIS_URL", &config.redis.url)
        .env("CAUCUS_SUBJECT_PREFIX", &config.subject_prefix)
        .env("CAUCUS_WORKER_PACE", "true")
        // As the worker role, not the operator whose credentials the CLI holds.
        .envs(crate::credentials::role_env("worker")?)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    Ok(child)
}

fn terminate(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_named_by_the_item_as_typed() {
        assert_eq!(report_file_name("BRK.B"), "BRK.B.md");
        assert_eq!(report_file_name("AAPL"), "AAPL.md");
        assert_eq!(report_file_name("a/b"), "a_b.md");
        assert_eq!(report_file_name(".."), "_...md");
        assert_eq!(report_file_name(""), "_.md");
    }

    #[test]
    fn the_story_tickers_come_first() {
        let debating = ["AMZN", "META", "AMD", "INTC", "LLY", "NKE", "NVDA", "TSLA"];
        for t in debating {
            assert!(TICKERS[..STORY_TICKERS].contains(&t), "{t}");
        }
        assert_eq!(fmt_units(9.0), "9");
        assert_eq!(fmt_units(8.5), "8.5");
    }

    #[test]
    fn plan_agent_types_are_the_task_running_types() {
        let load = json!({"capacity": 1, "tasks": 1, "busy_time": 1.0, "utilization": 1.0,
                          "queueing_delay": 0.0});
        let task = |kind: &str, agent: Option<&str>| {
            json!({"task_id": "A/x", "item": "A", "stage": "x", "kind": kind,
                   "agent_type": agent, "ready": 0.0, "start": 0.0, "end": 1.0,
                   "on_critical_path": true})
        };
        let plan: Plan = serde_json::from_value(json!({
            "schema_version": 1, "pipeline": "p", "items": ["A"], "makespan": 1.0,
            "critical_path": [], "critical_path_tasks": [], "critical_path_length": 1.0,
            "topological_order": [], "sequential_time": 1.0, "parallelism_factor": 1.0,
            "capacities": {}, "utilization": {"screening": load, "valuation": load},
            "tasks": [task("task", Some("report")), task("gate", None)],
        }))
        .unwrap();
        let got: Vec<String> = plan_agent_types(&plan).into_iter().collect();
        assert_eq!(got, ["report", "screening", "valuation"]);
    }

    #[test]
    fn only_the_pipelines_live_capacities_reach_the_plan() {
        let live: Capacities = [
            ("screening", 5),
            ("valuation", 1),
            ("dev", 0),
            ("reviewer", 1),
            ("report", 0),
        ]
        .into_iter()
        .map(|(a, n)| (a.to_string(), n))
        .collect();
        let agents: BTreeSet<String> = ["screening", "valuation", "report"]
            .into_iter()
            .map(String::from)
            .collect();
        let caps = pipeline_capacities(&live, &agents);
        // `dev` (a dead extra worker's type) and `reviewer` (not in the
        // pipeline) are left out; `report` at 0 keeps the pipeline's figure.
        let want: Capacities = [("screening".to_string(), 5), ("valuation".to_string(), 1)].into();
        assert_eq!(caps, want);
    }
}
