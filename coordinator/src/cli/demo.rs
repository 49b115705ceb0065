//! `caucus demo`: the plan for AAPL+MSFT, a paced batch with live progress
//! and reports, then a second valuation worker and the same batch again,
//! planned and measured side by side.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use caucus_shared::Config;

use super::submit::{report_of, watch_until_done};
use super::Client;

/// Tickers of the bundled (synthetic) data set used by the demo.
const TICKERS: &[&str] = &[
    "AAPL", "MSFT", "GOOGL", "AMZN", "TSLA", "META", "NVDA", "BRK.B", "JPM", "V", "JNJ", "WMT",
    "PG", "XOM", "UNH", "HD", "MA", "DIS", "KO", "PEP", "NFLX", "INTC", "CSCO", "ORCL",
];

/// How long to wait for the extra worker's capacity to show up.
const SCALE_DEADLINE: Duration = Duration::from_secs(30);

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

    println!("== 1. The plan for AAPL + MSFT (stock-analysis) ==\n");
    let p1 = plan(client, &["AAPL", "MSFT"], json!({})).await?;
    print!("{}", p1["gantt"].as_str().unwrap_or_default());
    let p2 = plan(client, &["AAPL", "MSFT"], json!({"valuation": 2})).await?;
    println!(
        "with valuation capacity 2: makespan {} (was {})\n",
        p2["makespan"], p1["makespan"]
    );

    // The pipeline's own agent types, from the plan: only their live
    // capacities go to `plan` (another type, e.g. one whose worker died and
    // that still shows at capacity 0, has nothing to do with this batch).
    let agents = plan_agent_types(&p1);
    let caps = pipeline_capacities(&live_capacities(client).await?, &agents);
    let val1 = caps.get("valuation").and_then(Value::as_u64).unwrap_or(0);
    if val1 == 0 {
        anyhow::bail!("no valuation worker is registered: start the stack with `scripts/stack up`");
    }
    wait_leases_settled(client, &agents).await?;
    println!(
        "== 2. A batch of {n} tickers, one time unit = {unit_ms} ms, live capacities {} ==\n",
        Value::Object(caps.clone())
    );
    let (planned1, measured1, ids1) = batch(client, &tickers, unit_ms, &caps).await?;
    let dir = write_reports(client, &ids1).await?;
    println!("\nreports: {}/<ticker>.md", dir.display());
    println!(
        "planned makespan {:.1} s, measured {:.1} s\n",
        planned1, measured1
    );

    println!("== 3. Adding a second valuation worker ==\n");
    let mut extra = spawn_valuation_worker(config)?;
    let deadline = Instant::now() + SCALE_DEADLINE;
    let caps2 = loop {
        let c = pipeline_capacities(&live_capacities(client).await?, &agents);
        if c.get("valuation").and_then(Value::as_u64).unwrap_or(0) > val1 {
            break c;
        }
        if Instant::now() > deadline {
            let _ = extra.kill();
            anyhow::bail!("the extra valuation worker did not register within {SCALE_DEADLINE:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!("valuation capacity {} → {}", val1, caps2["valuation"]);
    let (planned2, measured2, _) = batch(client, &tickers, unit_ms, &caps2).await?;
    terminate(&mut extra);
    println!("\n== Result ==");
    println!("                 planned    measured");
    println!("valuation × {val1}:  {planned1:>7.1} s  {measured1:>8.1} s");
    println!(
        "valuation × {}:  {planned2:>7.1} s  {measured2:>8.1} s",
        caps2["valuation"]
    );
    println!(
        "one more valuation worker finished the batch {:.0}% sooner (planned {:.0}%)",
        100.0 * (1.0 - measured2 / measured1),
        100.0 * (1.0 - planned2 / planned1)
    );
    Ok(0)
}

async fn plan(client: &Client, items: &[&str], caps: Value) -> anyhow::Result<Value> {
    client
        .call_ok(
            "coordinator",
            "plan",
            json!({"items": items, "pipeline": "stock-analysis", "capacities": caps}),
        )
        .await
}

async fn live_capacities(client: &Client) -> anyhow::Result<serde_json::Map<String, Value>> {
    let w = client
        .call_ok("coordinator", "workers", Value::Null)
        .await?;
    let mut m = serde_json::Map::new();
    for a in w["agents"].as_array().into_iter().flatten() {
        if let Some(name) = a["agent_type"].as_str() {
            m.insert(name.to_string(), a["capacity"].clone());
        }
    }
    Ok(m)
}

/// Waits while the capacity semaphores of `agents` grant no lease: a Redis
/// that started empty looks like one that lost its data, and for one
/// `worker.lease_ttl` running tasks re-register first. Timing a batch
/// through that window would compare the plan with a wait.
async fn wait_leases_settled(client: &Client, agents: &BTreeSet<String>) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut said = false;
    loop {
        let w = client
            .call_ok("coordinator", "workers", Value::Null)
            .await?;
        let wait = w["agents"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["agent_type"].as_str().is_some_and(|t| agents.contains(t)))
            .filter_map(|a| a["recovering_ms"].as_u64())
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

/// Agent types that run tasks in a `coordinator.plan` reply (gates have none).
fn plan_agent_types(plan: &Value) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = plan["utilization"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    out.extend(
        plan["tasks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["agent_type"].as_str().map(str::to_string)),
    );
    out
}

/// The live capacities `plan` is given: those of the pipeline's agent types
/// only, and only when at least 1 (a type of the pipeline with no live slot
/// keeps the pipeline's own figure rather than failing the plan with
/// "capacity 0").
fn pipeline_capacities(
    live: &serde_json::Map<String, Value>,
    agents: &BTreeSet<String>,
) -> serde_json::Map<String, Value> {
    live.iter()
        .filter(|(a, c)| agents.contains(*a) && c.as_u64().unwrap_or(0) > 0)
        .map(|(a, c)| (a.clone(), c.clone()))
        .collect()
}

/// Plans with the live capacities, runs the batch, returns (planned s, measured s).
async fn batch(
    client: &Client,
    tickers: &[String],
    unit_ms: u64,
    caps: &serde_json::Map<String, Value>,
) -> anyhow::Result<(f64, f64, Vec<String>)> {
    let p = client
        .call_ok(
            "coordinator",
            "plan",
            json!({"items": tickers, "pipeline": "stock-analysis", "capacities": caps}),
        )
        .await?;
    let planned = p["makespan"].as_f64().unwrap_or(0.0) * unit_ms as f64 / 1000.0;
    let t0 = Instant::now();
    let reply = client
        .call_ok(
            "coordinator",
            "submit",
            json!({"items": tickers, "pipeline": "stock-analysis", "time_unit_ms": unit_ms,
                   "auto_approve_gates": true}),
        )
        .await?;
    let ids: Vec<String> = reply["workflow_ids"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(String::from))
        .collect();
    let stop = tokio_util::sync::CancellationToken::new();
    let reviewer = tokio::spawn(review_gates(client.clone(), ids.clone(), stop.clone()));
    let fin = watch_until_done(client, &ids, true).await;
    stop.cancel();
    let reviewed = reviewer.await.unwrap_or_default();
    let fin = fin?;
    let measured = t0.elapsed().as_secs_f64();
    print_reviews(client, &ids, &reviewed).await;
    let failed = fin["workflows"]
        .as_array()
        .map(|a| a.iter().filter(|w| w["state"] == "failed").count())
        .unwrap_or(0);
    if failed > 0 {
        println!("{failed} workflow(s) failed: see `caucus status --state failed`");
    }
    Ok((planned, measured, ids))
}

/// What the demo's reviewer did at the gates.
#[derive(Debug, Default)]
struct Reviewed {
    /// Provisional decisions confirmed.
    confirmed: Vec<String>,
    /// The first decision package that needed a review, as printed.
    first_package: Option<String>,
}

/// Plays the person at the gates while a batch runs: a gate whose workflow
/// has provisional decisions waits for a review (automatic approval only
/// goes through when nothing needs review), so this confirms each
/// conservative default; the gate then approves itself.
async fn review_gates(
    client: Client,
    ids: Vec<String>,
    stop: tokio_util::sync::CancellationToken,
) -> Reviewed {
    let mut out = Reviewed::default();
    while !stop.is_cancelled() {
        let open = client
            .call("coordinator", "gates", json!({}))
            .await
            .ok()
            .and_then(|v| v["gates"].as_array().cloned())
            .unwrap_or_default();
        for g in open {
            let Some(wf) = g["workflow_id"].as_str() else {
                continue;
            };
            if !ids.iter().any(|i| i == wf) {
                continue;
            }
            let Ok(pkg) = client
                .call("coordinator", "gate", json!({"workflow_id": wf}))
                .await
            else {
                continue;
            };
            let decisions = pkg["provisional"]["decisions"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if decisions.is_empty() {
                continue;
            }
            if out.first_package.is_none() {
                out.first_package = Some(super::gate::render_package(&pkg));
            }
            for d in decisions {
                let Some(id) = d["debate_id"].as_str() else {
                    continue;
                };
                let r = client
                    .call(
                        "coordinator",
                        "gate_review",
                        json!({"workflow_id": wf, "debate_id": id, "action": "confirm",
                               "reviewer": "demo-reviewer"}),
                    )
                    .await;
                if r.is_ok() {
                    out.confirmed
                        .push(format!("{} {id}", pkg["item"].as_str().unwrap_or("?")));
                }
            }
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(Duration::from_millis(300)) => {}
        }
    }
    out
}

/// Debates of the batch and what the reviewer did, after the live display.
async fn print_reviews(client: &Client, ids: &[String], reviewed: &Reviewed) {
    let Ok(all) = client.call("facilitator", "debates", json!({})).await else {
        return;
    };
    let ours: Vec<&Value> = all["debates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| {
            d["workflow_id"]
                .as_str()
                .is_some_and(|w| ids.iter().any(|i| i == w))
        })
        .collect();
    if ours.is_empty() {
        println!(
            "
no debates in this batch"
        );
        return;
    }
    let mut by: std::collections::BTreeMap<String, usize> = Default::default();
    for d in &ours {
        let how = d["resolution"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("open ({})", d["state"].as_str().unwrap_or("?")));
        *by.entry(format!("L{} {how}", d["level"])).or_default() += 1;
    }
    println!(
        "
{} debate(s) between the financial and strategy analysts on the operating margin:",
        ours.len()
    );
    for (k, n) in by {
        println!("  {n:>3} × {k}");
    }
    if let Ok(load) = client.call("facilitator", "expert_load", json!({})).await {
        println!("  expert load: {load}");
    }
    if let Some(p) = &reviewed.first_package {
        println!(
            "
The first gate that needed a person (decision package):
"
        );
        for line in p.lines() {
            println!("  {line}");
        }
    }
    if !reviewed.confirmed.is_empty() {
        println!(
            "
the demo reviewer confirmed {} provisional decision(s) at the gates: {}",
            reviewed.confirmed.len(),
            reviewed.confirmed.join(", ")
        );
    }
}

async fn write_reports(client: &Client, ids: &[String]) -> anyhow::Result<PathBuf> {
    let root = super::stack::repo_root().unwrap_or_else(|| PathBuf::from("."));
    let dir = root.join(".caucus").join("reports");
    std::fs::create_dir_all(&dir)?;
    // One workflow per request: lists carry no outputs, and a whole
    // batch's outputs would not fit one reply.
    for id in ids {
        let st = client
            .call_ok("coordinator", "status", json!({"ids": [id], "tasks": true}))
            .await?;
        for w in st["workflows"].as_array().into_iter().flatten() {
            if w["state"] != "completed" {
                continue;
            }
            let item = w["item"].as_str().unwrap_or("");
            if let Some(md) = report_of(w) {
                let file = caucus_shared::subjects::encode_token(item);
                std::fs::write(dir.join(format!("{file}.md")), md)?;
            }
        }
    }
    Ok(dir)
}

fn spawn_valuation_worker(config: &Config) -> anyhow::Result<Child> {
    let exe = std::env::current_exe()?;
    let bin = exe.with_file_name("caucus-worker");
    if !bin.is_file() {
        anyhow::bail!("{} not found next to the caucus binary", bin.display());
    }
    let root = super::stack::repo_root().unwrap_or_else(|| PathBuf::from("."));
    let log_dir = root.join(".caucus").join("logs");
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
    fn plan_agent_types_are_the_task_running_types() {
        let plan = json!({
            "utilization": {"screening": {}, "valuation": {}},
            "tasks": [{"agent_type": "report"}, {"kind": "gate"}],
        });
        let got: Vec<String> = plan_agent_types(&plan).into_iter().collect();
        assert_eq!(got, ["report", "screening", "valuation"]);
    }

    #[test]
    fn only_the_pipelines_live_capacities_reach_the_plan() {
        let live = json!({"screening": 5, "valuation": 1, "dev": 0, "reviewer": 1, "report": 0})
            .as_object()
            .cloned()
            .unwrap();
        let agents: BTreeSet<String> = ["screening", "valuation", "report"]
            .into_iter()
            .map(String::from)
            .collect();
        let caps = pipeline_capacities(&live, &agents);
        // `dev` (a dead extra worker's type) and `reviewer` (not in the
        // pipeline) are left out; `report` at 0 keeps the pipeline's figure.
        assert_eq!(Value::Object(caps), json!({"screening": 5, "valuation": 1}));
    }
}
