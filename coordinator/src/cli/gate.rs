//! `caucus gate …`: human gates from the terminal: list the open ones, show
//! a decision package, approve / reject / send back, and review a
//! provisional decision (confirm / override / re-debate).

use serde_json::{json, Value};

use super::Client;

/// `caucus gate` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum GateCommand {
    /// Open gates, oldest first.
    List {
        /// Only gates of this item.
        #[arg(long)]
        item: Option<String>,
    },
    /// The decision package of a workflow's open gate.
    Show {
        /// Workflow id, or an item with exactly one open gate.
        target: String,
        /// The gate, when several are open.
        #[arg(long)]
        gate: Option<String>,
    },
    /// Approve: the work stands and dependents run.
    Approve(DecideArgs),
    /// Reject: the workflow fails with your rationale.
    Reject(DecideArgs),
    /// Send back: run upstream stages again; the gate reopens after them.
    SendBack {
        #[command(flatten)]
        args: DecideArgs,
        /// Stages to run again (default: the gate's dependencies).
        #[arg(long = "to", value_delimiter = ',')]
        to: Vec<String>,
    },
    /// Review a provisional decision of the workflow (level 5).
    Review {
        /// Workflow id, or an item with exactly one open gate.
        target: String,
        /// The debate.
        debate_id: String,
        /// confirm, override or redebate.
        action: String,
        /// Who reviews (default: $USER).
        #[arg(long)]
        reviewer: Option<String>,
        /// Override: the side whose position applies (challenger or challenged).
        #[arg(long)]
        side: Option<String>,
        /// Override: your own value (e.g. 0.28 or "28%").
        #[arg(long)]
        value: Option<String>,
        /// Override with --value: the metric (default: the debate's).
        #[arg(long)]
        metric: Option<String>,
        /// Why (required to override).
        #[arg(long, default_value = "")]
        rationale: String,
        /// Re-debate: the context the new debate should weigh.
        #[arg(long)]
        context: Option<String>,
    },
}

/// Flags shared by approve / reject / send-back.
#[derive(Debug, Clone, clap::Args)]
pub struct DecideArgs {
    /// Workflow id, or an item with exactly one open gate.
    pub target: String,
    /// Who decides (default: $USER).
    #[arg(long)]
    pub reviewer: Option<String>,
    /// Why (required to reject or send back).
    #[arg(long, default_value = "")]
    pub rationale: String,
    /// The gate, when several are open.
    #[arg(long)]
    pub gate: Option<String>,
}

fn reviewer(r: Option<String>) -> String {
    r.or_else(|| std::env::var("USER").ok())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "cli".into())
}

/// A workflow id, or the workflow of the only open gate of an item.
async fn resolve(client: &Client, target: &str) -> anyhow::Result<String> {
    let list = client
        .call_ok("coordinator", "gates", json!({"item": target}))
        .await?;
    let gates = list["gates"].as_array().cloned().unwrap_or_default();
    match gates.as_slice() {
        [one] => Ok(one["workflow_id"].as_str().unwrap_or(target).to_string()),
        [] => Ok(target.to_string()),
        many => anyhow::bail!(
            "item {target} has {} open gates; name the workflow: {}",
            many.len(),
            many.iter()
                .filter_map(|g| g["workflow_id"].as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// Runs a `caucus gate` subcommand.
pub async fn run(client: &Client, cmd: GateCommand, as_json: bool) -> anyhow::Result<i32> {
    let reply = match cmd {
        GateCommand::List { item } => {
            let mut body = json!({});
            if let Some(i) = item {
                body["item"] = json!(i);
            }
            let r = client.call_ok("coordinator", "gates", body).await?;
            if !as_json {
                print_list(&r);
                return Ok(0);
            }
            r
        }
        GateCommand::Show { target, gate } => {
            let wf = resolve(client, &target).await?;
            let r = client
                .call_ok(
                    "coordinator",
                    "gate",
                    json!({"workflow_id": wf, "gate": gate}),
                )
                .await?;
            if !as_json {
                print!("{}", render_package(&r));
                return Ok(0);
            }
            r
        }
        GateCommand::Approve(a) => decide(client, "approve", a, Vec::new()).await?,
        GateCommand::Reject(a) => decide(client, "reject", a, Vec::new()).await?,
        GateCommand::SendBack { args, to } => decide(client, "send_back", args, to).await?,
        GateCommand::Review {
            target,
            debate_id,
            action,
            reviewer: who,
            side,
            value,
            metric,
            rationale,
            context,
        } => {
            let wf = resolve(client, &target).await?;
            let mut body = json!({
                "workflow_id": wf,
                "debate_id": debate_id,
                "action": action,
                "reviewer": reviewer(who),
            });
            if !rationale.is_empty() {
                body["rationale"] = json!(rationale);
            }
            if let Some(s) = side {
                body["side"] = json!(s);
            }
            if let Some(c) = context {
                body["context"] = json!(c);
            }
            if let Some(v) = value {
                let parsed = caucus_shared::messages::assumption_value(&json!(v))
                    .ok_or_else(|| anyhow::anyhow!("--value {v}: not a number like 0.28 or 28%"))?;
                let metric = match metric {
                    Some(m) => m,
                    None => debate_metric(client, &debate_id).await?,
                };
                body["position"] = json!({
                    "statement": format!("{metric} {v} (set at gate review)"),
                    "metric": metric,
                    "value": parsed,
                });
            }
            let r = client.call_ok("coordinator", "gate_review", body).await?;
            if !as_json {
                print_review(&r);
                return Ok(0);
            }
            r
        }
    };
    println!("{}", serde_json::to_string_pretty(&reply)?);
    Ok(0)
}

async fn decide(
    client: &Client,
    action: &str,
    a: DecideArgs,
    to: Vec<String>,
) -> anyhow::Result<Value> {
    let wf = resolve(client, &a.target).await?;
    let mut body = json!({
        "workflow_id": wf,
        "action": action,
        "reviewer": reviewer(a.reviewer),
        "rationale": a.rationale,
    });
    if let Some(g) = a.gate {
        body["gate"] = json!(g);
    }
    if !to.is_empty() {
        body["send_back_to"] = json!(to);
    }
    client.call_ok("coordinator", "gate_decide", body).await
}

async fn debate_metric(client: &Client, debate_id: &str) -> anyhow::Result<String> {
    let d = client
        .call_ok("facilitator", "debate", json!({"debate_id": debate_id}))
        .await?;
    let metric = [
        &d["challenged_position"]["metric"],
        &d["challenger_position"]["metric"],
    ]
    .into_iter()
    .find_map(|m| m.as_str().map(str::to_string));
    metric.ok_or_else(|| anyhow::anyhow!("debate {debate_id} names no metric; pass --metric"))
}

fn print_list(r: &Value) {
    let gates = r["gates"].as_array().cloned().unwrap_or_default();
    if gates.is_empty() {
        println!("no open gates");
        return;
    }
    println!("{} open gate(s), oldest first:", gates.len());
    for g in gates {
        println!(
            "  {:<8} {:<10} waiting {:>8}  reminders {}{}  {}",
            g["item"].as_str().unwrap_or("?"),
            g["gate"].as_str().unwrap_or("?"),
            duration(g["waiting_ms"].as_i64().unwrap_or(0)),
            g["reminders_sent"],
            if g["escalated"].as_bool() == Some(true) {
                ", ESCALATED"
            } else {
                ""
            },
            g["workflow_id"].as_str().unwrap_or("?"),
        );
    }
}

fn duration(ms: i64) -> String {
    let s = ms / 1000;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}.{}s", s, (ms % 1000) / 100)
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// The decision package as a person reads it.
pub fn render_package(p: &Value) -> String {
    let mut out = String::new();
    let g = &p["gate"];
    out.push_str(&format!(
        "Gate `{}` of {} ({}), pipeline {}\n  open for {}, reminders sent {}, escalated {}\n",
        text(&g["gate"]),
        text(&p["item"]),
        text(&p["workflow_id"]),
        text(&p["pipeline"]),
        duration(g["waiting_ms"].as_i64().unwrap_or(0)),
        g["reminders_sent"],
        if g["escalated"].as_bool() == Some(true) {
            "yes"
        } else {
            "no"
        },
    ));
    let findings = p["findings"].as_array().cloned().unwrap_or_default();
    out.push_str(&format!("\nFindings ({}):\n", findings.len()));
    for f in &findings {
        let ev: Vec<String> = f["evidence"]
            .as_array()
            .map(|a| a.iter().map(text).collect())
            .unwrap_or_default();
        out.push_str(&format!(
            "  [{}] {} (confidence {}){}\n",
            text(&f["from_agent"]),
            text(&f["finding"]),
            text(&f["confidence"]),
            if ev.is_empty() {
                String::new()
            } else {
                format!("\n      evidence: {}", ev.join("; "))
            }
        ));
    }
    let open = p["open_debates"].as_array().cloned().unwrap_or_default();
    out.push_str(&format!("\nOpen debates ({}):\n", open.len()));
    for d in &open {
        out.push_str(&format!(
            "  {}  {}  level {} {}  {} vs {}\n",
            text(&d["debate_id"]),
            text(&d["topic"]),
            text(&d["level"]),
            text(&d["state"]),
            text(&d["challenger"]),
            text(&d["challenged"]),
        ));
    }
    let prov = &p["provisional"];
    out.push_str(&format!("\n{}\n", text(&prov["message"])));
    for d in prov["decisions"].as_array().cloned().unwrap_or_default() {
        out.push_str(&format!(
            "  {}  {}\n    applied (conservative): {}\n    rule: {}  rationale: {}\n    review by: {}  downstream: {}\n",
            text(&d["debate_id"]),
            text(&d["topic"]),
            text(&d["conservative_position"]["statement"]),
            text(&d["rule"]),
            text(&d["rationale"]),
            text(&d["override_window_deadline"]),
            text(&d["downstream_dependencies"]),
        ));
        for (side, pos) in d["positions"].as_object().into_iter().flatten() {
            out.push_str(&format!(
                "    {side}: {} (credibility {})\n",
                text(&pos["statement"]),
                text(&d["credibility"][side]["score"]),
            ));
        }
    }
    let prec = p["precedents"].as_array().cloned().unwrap_or_default();
    if !prec.is_empty() {
        out.push_str(&format!("\nPrecedents ({}):\n", prec.len()));
        for x in prec {
            out.push_str(&format!(
                "  {}  {}  → {}\n",
                text(&x["debate_id"]),
                text(&x["topic"]),
                text(&x["outcome"]),
            ));
        }
    }
    if let Some(n) = p["facilitator"].as_str() {
        out.push_str(&format!("\n(facilitator: {n})\n"));
    }
    if p["can_approve"].as_bool() == Some(true) {
        out.push_str("\nReady to approve.\n");
    } else {
        out.push_str("\nCannot approve yet:\n");
        for b in p["blocking"].as_array().cloned().unwrap_or_default() {
            out.push_str(&format!("  - {}\n", text(&b)));
        }
    }
    let wf = text(&p["workflow_id"]);
    out.push_str(&format!(
        "\nActions: caucus gate approve {wf} | reject {wf} --rationale … | send-back {wf} --rationale … [--to STAGE]\n         caucus gate review {wf} <debate_id> confirm | override --value V --rationale … | redebate --context …\n"
    ));
    out
}

fn print_review(r: &Value) {
    let f = &r["facilitator"];
    println!(
        "debate {}: {} (level {}, {})",
        text(&f["debate"]["debate_id"]),
        text(&f["resolution"]["method"]),
        text(&f["resolution"]["level"]),
        text(&f["resolution"]["final_position"]["statement"]),
    );
    if let Some(rep) = f["impact"]["report"].as_object() {
        println!(
            "impact: {} analyses affected, {} high impact",
            rep.get("affected_count").map(text).unwrap_or_default(),
            rep.get("high_impact_count").map(text).unwrap_or_default()
        );
        for i in rep
            .get("impacts")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
        {
            println!(
                "  {:<20} {} → {}  ({})",
                text(&i["analysis_id"]),
                text(&i["old_value"]),
                text(&i["estimated_new_value"]),
                text(&i["action"])
            );
        }
    }
    if let Some(id) = f["redebate_id"].as_str() {
        println!("re-debate opened: {id}");
    }
    let rr = &r["rerun"];
    if let Some(renewed) = rr["renewed"].as_array().filter(|a| !a.is_empty()) {
        println!(
            "re-running {} ({}): {}",
            text(&rr["rerun_id"]),
            renewed.len(),
            renewed.iter().map(text).collect::<Vec<_>>().join(", ")
        );
    }
}
