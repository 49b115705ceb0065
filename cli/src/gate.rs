//! `caucus gate …`: human gates from the terminal: list the open ones, show
//! a decision package, approve / reject / send back, and review a
//! provisional decision (confirm / override / re-debate).

use serde_json::{json, Value};

use super::render::{duration, num, text, when, Align::Left, Align::Right};
use super::Client;

/// `caucus gate` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum GateCommand {
    /// Open gates, oldest first.
    List {
        /// Only gates of this item.
        #[arg(long)]
        item: Option<String>,
        /// Gates per page (default 200, at most 1,000).
        #[arg(long)]
        limit: Option<usize>,
        /// Where the page starts: the cursor the previous page printed.
        #[arg(long)]
        cursor: Option<String>,
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
        GateCommand::List {
            item,
            limit,
            cursor,
        } => {
            let mut body = json!({});
            if let Some(i) = item {
                body["item"] = json!(i);
            }
            if let Some(l) = limit {
                body["limit"] = json!(l);
            }
            if let Some(c) = cursor {
                body["cursor"] = json!(c);
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
                print!("{}", render_review(&r));
                return Ok(0);
            }
            r
        }
    };
    if as_json {
        println!("{}", serde_json::to_string_pretty(&reply)?);
    } else {
        // Every other subcommand printed its text and returned above.
        print!("{}", render_decision(&reply));
    }
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
    // The facilitator states it by the one shared rule.
    let metric = d["metric"].as_str().map(str::to_string);
    metric.ok_or_else(|| anyhow::anyhow!("debate {debate_id} names no metric; pass --metric"))
}

fn print_list(r: &Value) {
    print!("{}", render_list(r));
}

/// A `coordinator.gates` reply as a table, oldest first, columns as wide as
/// their widest cell.
pub fn render_list(r: &Value) -> String {
    let gates = r["gates"].as_array().cloned().unwrap_or_default();
    if gates.is_empty() {
        return "no open gates\n".into();
    }
    let total = r["count"].as_u64().unwrap_or(gates.len() as u64);
    let mut out = format!("{total} open gate(s), oldest first:\n");
    let rows: Vec<Vec<String>> = gates
        .iter()
        .map(|g| {
            let mut reminders = text(&g["reminders_sent"]);
            if g["escalated"].as_bool() == Some(true) {
                reminders.push_str(", ESCALATED");
            }
            vec![
                text(&g["item"]),
                text(&g["gate"]),
                duration(g["waiting_ms"].as_i64().unwrap_or(0)),
                reminders,
                text(&g["workflow_id"]),
            ]
        })
        .collect();
    let t = super::render::table(
        &[
            ("item", Left),
            ("gate", Left),
            ("waiting", Right),
            ("reminders", Left),
            ("workflow", Left),
        ],
        &rows,
    );
    for l in t.lines() {
        out.push_str(&format!("  {l}\n"));
    }
    if let Some(c) = r["next_cursor"].as_str() {
        out.push_str(&format!("more gates: caucus gate list --cursor {c}\n"));
    }
    out
}

/// An override's estimates beside what the re-run gave: the estimate is a
/// linear sensitivity, not the analysis's own model, so its error is shown.
fn rerun_estimates(p: &Value) -> String {
    let mut out = String::new();
    for r in p["reruns"].as_array().into_iter().flatten() {
        let est = r["estimates"].as_array().cloned().unwrap_or_default();
        if est.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "\nRe-run {} ({}):\n",
            text(&r["rerun_id"]),
            text(&r["reason"])
        ));
        for e in est {
            let actual = match e["actual"].as_f64() {
                Some(a) => format!(
                    "re-run gave {}, error {}",
                    num(a),
                    e["error"].as_f64().map(num).unwrap_or_else(|| "-".into())
                ),
                None => "re-run pending".into(),
            };
            out.push_str(&format!(
                "  {} {}: {} → estimate {} ({}); {}\n",
                text(&e["task"]),
                text(&e["output_metric"]),
                e["before"].as_f64().map(num).unwrap_or_else(|| "-".into()),
                e["estimate"]
                    .as_f64()
                    .map(num)
                    .unwrap_or_else(|| "-".into()),
                text(&e["estimate_method"]),
                actual
            ));
        }
    }
    out
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
            when(&d["override_window_deadline"]),
            text(&d["downstream_dependencies"]),
        ));
        for (side, pos) in d["positions"].as_object().into_iter().flatten() {
            out.push_str(&format!(
                "    {side}: {} (credibility {})\n",
                text(&pos["statement"]),
                credibility(&d["credibility"][side]),
            ));
        }
    }
    let prec = p["precedents"].as_array().cloned().unwrap_or_default();
    if !prec.is_empty() {
        out.push_str(&format!("\nPrecedents ({}):\n", prec.len()));
        for x in prec {
            out.push_str(&format!(
                "  {}  {}  → {}{}\n",
                text(&x["debate_id"]),
                text(&x["topic"]),
                text(&x["outcome"]),
                match x["similarity"].as_f64() {
                    Some(sim) => format!("  (similarity {})", num(sim)),
                    None => String::new(),
                },
            ));
        }
    }
    out.push_str(&rerun_estimates(p));
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

/// A credibility entry `{score, ci, data_points}` as `0.91 ± 0.05 (12
/// data points)`; `-` when there is none.
fn credibility(c: &Value) -> String {
    let Some(score) = c["score"].as_f64() else {
        return "-".into();
    };
    let mut out = num(score);
    if let Some(ci) = c["ci"].as_f64() {
        out.push_str(&format!(" ± {}", num(ci)));
    }
    if let Some(n) = c["data_points"].as_u64() {
        out.push_str(&format!(
            " ({n} data point{})",
            if n == 1 { "" } else { "s" }
        ));
    }
    out
}

/// `"why"`, quoted, after a colon; nothing without a rationale.
fn because(rationale: &Value) -> String {
    match rationale.as_str().map(str::trim) {
        Some(r) if !r.is_empty() => format!(": {r:?}"),
        _ => String::new(),
    }
}

fn names(v: &Value) -> Option<String> {
    v.as_array()
        .filter(|a| !a.is_empty())
        .map(|a| a.iter().map(text).collect::<Vec<_>>().join(", "))
}

/// A `coordinator.gate_decide` reply as a person reads it, e.g.
/// `approved gate review of AAPL (wf-1) by alice: "figures tie out"`.
pub fn render_decision(r: &Value) -> String {
    let w = &r["workflow"];
    let d = &r["decision"];
    let action = r["action"].as_str().unwrap_or("?");
    let verb = match action {
        "approve" => "approved",
        "reject" => "rejected",
        "send_back" => "sent back",
        other => other,
    };
    let mut out = format!(
        "{verb} gate {} of {} ({}) by {}{}\n",
        text(&r["gate"]),
        text(&w["item"]),
        text(&r["workflow_id"]),
        text(&d["decided_by"]),
        because(&d["rationale"]),
    );
    if let Some(ms) = d["response_ms"].as_i64() {
        out.push_str(&format!("  decided {} after the gate opened", duration(ms)));
        match d["reminders_sent"].as_u64() {
            Some(n) if n > 0 => out.push_str(&format!(", after {n} reminder(s)")),
            _ => {}
        }
        if d["escalated"].as_bool() == Some(true) {
            out.push_str(", escalated");
        }
        out.push('\n');
    }
    if let Some(again) = names(&r["renewed"]) {
        out.push_str(&format!(
            "  running again: {again}; the gate reopens after them\n"
        ));
    }
    if let Some(ready) = names(&r["newly_ready"]) {
        out.push_str(&format!("  now ready: {ready}\n"));
    }
    if !w.is_null() {
        out.push_str(&format!(
            "  workflow {}: {}/{} tasks done",
            text(&w["state"]),
            text(&w["progress"]["completed"]),
            text(&w["progress"]["total"]),
        ));
        if let Some(f) = w["failure"].as_str() {
            out.push_str(&format!(" ({f})"));
        }
        out.push('\n');
    }
    out
}

/// A position as `statement (metric = value)`.
fn position(p: &Value) -> String {
    if p.is_null() {
        return "-".into();
    }
    let mut out = text(&p["statement"]);
    if let (Some(m), false) = (p["metric"].as_str(), p["value"].is_null()) {
        out.push_str(&format!(" ({m} = {})", text(&p["value"])));
    }
    out
}

/// A `coordinator.gate_review` reply as a person reads it: the action, the
/// debate, the value that now applies and, for an override, the impact:
/// which analyses change, old → new estimates, and what re-runs.
pub fn render_review(r: &Value) -> String {
    let f = &r["facilitator"];
    let d = &f["debate"];
    let res = &f["resolution"];
    let who = match res["decided_by"].as_str() {
        Some(w) => format!(" by {w}"),
        None => String::new(),
    };
    let id = text(&d["debate_id"]);
    let topic = text(&d["topic"]);
    let mut out = match res["method"].as_str().unwrap_or("") {
        "gate_confirm" => format!(
            "confirmed the provisional decision of debate {id} ({topic}){who}\n  stands: {}\n",
            position(&res["final_position"])
        ),
        "gate_override" => format!(
            "overrode the provisional decision of debate {id} ({topic}){who}\n  now: {}\n",
            position(&res["final_position"])
        ),
        "gate_redebate" => format!("sent debate {id} ({topic}) back to debate{who}\n"),
        other => format!(
            "debate {id} ({topic}): {}{who}\n  now: {}\n",
            if other.is_empty() { "reviewed" } else { other },
            position(&res["final_position"])
        ),
    };
    if let Some(why) = res["rationale"].as_str().filter(|s| !s.is_empty()) {
        out.push_str(&format!("  rationale: {why}\n"));
    }
    if let Some(rep) = f["impact"]["report"].as_object() {
        let ch = &rep["changed_assumption"];
        if !ch.is_null() {
            out.push_str(&format!(
                "  {}: {} → {}\n",
                text(&ch["metric"]),
                text(&ch["old_value"]),
                text(&ch["new_value"]),
            ));
        }
        let impacts = rep["impacts"].as_array().cloned().unwrap_or_default();
        out.push_str(&format!(
            "impact: {} analys{} affected, {} must re-run{}\n",
            text(&rep["affected_count"]),
            if rep["affected_count"] == 1 {
                "is"
            } else {
                "es"
            },
            text(&rep["high_impact_count"]),
            match rep["total_rerun_minutes"].as_f64() {
                Some(m) if m > 0.0 => format!(" (about {} min)", num(m)),
                _ => String::new(),
            }
        ));
        let rows: Vec<Vec<String>> = impacts
            .iter()
            .map(|i| {
                vec![
                    text(&i["analysis_id"]),
                    text(&i["output_metric"]),
                    format!(
                        "{} → {}",
                        text(&i["old_value"]),
                        text(&i["estimated_new_value"])
                    ),
                    if i["requires_rerun"].as_bool() == Some(true) {
                        "re-run".into()
                    } else {
                        "update".into()
                    },
                    text(&i["action"]),
                ]
            })
            .collect();
        if !rows.is_empty() {
            use super::render::{table, Align::Left};
            let t = table(
                &[
                    ("analysis", Left),
                    ("metric", Left),
                    ("old → new (est.)", Left),
                    ("", Left),
                    ("action", Left),
                ],
                &rows,
            );
            for l in t.lines() {
                out.push_str(&format!("  {l}\n"));
            }
        }
    }
    if let Some(id) = f["redebate_id"].as_str() {
        out.push_str(&format!("re-debate opened: {id} (caucus debate {id})\n"));
    }
    let rr = &r["rerun"];
    if let Some(renewed) = names(&rr["renewed"]) {
        out.push_str(&format!(
            "re-running ({}): {renewed}\n",
            text(&rr["rerun_id"])
        ));
    } else if !rr.is_null() {
        out.push_str("nothing to re-run; tasks that have not run yet use the settled value\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workflow(state: &str) -> Value {
        json!({"workflow_id": "wf-1", "item": "AAPL", "state": state,
               "progress": {"completed": 3, "total": 5}})
    }

    #[test]
    fn the_gate_list_is_aligned() {
        let r = json!({"count": 3, "next_cursor": "x", "gates": [
            {"item": "BRK.B-LONG", "gate": "review", "waiting_ms": 187000,
             "reminders_sent": 2, "escalated": true, "workflow_id": "wf-1"},
            {"item": "A", "gate": "signoff", "waiting_ms": 900,
             "reminders_sent": 0, "escalated": false, "workflow_id": "wf-2"},
        ]});
        assert_eq!(
            render_list(&r),
            "3 open gate(s), oldest first:\n  \
             item        gate     waiting  reminders     workflow\n  \
             BRK.B-LONG  review     3m07s  2, ESCALATED  wf-1\n  \
             A           signoff    900ms  0             wf-2\n\
             more gates: caucus gate list --cursor x\n"
        );
        assert_eq!(render_list(&json!({"gates": []})), "no open gates\n");
    }

    #[test]
    fn decisions_read_as_sentences() {
        let approve = json!({
            "workflow_id": "wf-1", "gate": "review", "action": "approve",
            "decision": {"action": "approve", "decided_by": "alice",
                         "rationale": "figures tie out", "response_ms": 187000,
                         "reminders_sent": 1, "escalated": false},
            "newly_ready": ["report"], "renewed": [],
            "workflow": workflow("running"),
        });
        let out = render_decision(&approve);
        assert_eq!(
            out,
            "approved gate review of AAPL (wf-1) by alice: \"figures tie out\"\n  \
             decided 3m07s after the gate opened, after 1 reminder(s)\n  \
             now ready: report\n  \
             workflow running: 3/5 tasks done\n"
        );
        let back = json!({
            "workflow_id": "wf-1", "gate": "review", "action": "send_back",
            "decision": {"decided_by": "bob", "rationale": "redo", "response_ms": 900},
            "newly_ready": ["valuation"], "renewed": ["valuation", "report"],
            "workflow": workflow("running"),
        });
        let out = render_decision(&back);
        assert!(
            out.starts_with("sent back gate review of AAPL (wf-1) by bob: \"redo\"\n"),
            "{out}"
        );
        assert!(
            out.contains("running again: valuation, report; the gate reopens after them"),
            "{out}"
        );
        let mut reject = approve.clone();
        reject["action"] = json!("reject");
        reject["decision"]["rationale"] = json!("");
        reject["newly_ready"] = json!([]);
        reject["workflow"] = workflow("failed");
        reject["workflow"]["failure"] = json!("rejected at gate review");
        let out = render_decision(&reject);
        assert!(
            out.starts_with("rejected gate review of AAPL (wf-1) by alice\n"),
            "{out}"
        );
        assert!(
            out.contains("workflow failed: 3/5 tasks done (rejected at gate review)"),
            "{out}"
        );
        assert!(!out.contains('{'), "no JSON in the text: {out}");
    }

    #[test]
    fn an_override_shows_its_impact_rounded() {
        let r = json!({
            "facilitator": {
                "debate": {"debate_id": "D-1", "topic": "operating margin 25%"},
                "resolution": {
                    "method": "gate_override", "level": 5, "decided_by": "alice",
                    "rationale": "guidance raised",
                    "final_position": {"statement": "operating_margin 28% (set at gate review)",
                                       "metric": "operating_margin", "value": 0.28},
                },
                "impact": {
                    "report": {
                        "changed_assumption": {"metric": "operating_margin",
                                               "old_value": 0.25, "new_value": 0.28},
                        "affected_count": 2, "high_impact_count": 1,
                        "total_rerun_minutes": 12.333333,
                        "impacts": [
                            {"analysis_id": "AAPL/valuation", "output_metric": "target_price",
                             "old_value": 185.0, "estimated_new_value": 199.8000001,
                             "requires_rerun": true, "action": "re-run"},
                            {"analysis_id": "AAPL/report", "output_metric": "confidence_score",
                             "old_value": 0.7, "estimated_new_value": 0.71666666,
                             "requires_rerun": false, "action": "update figures"},
                        ],
                    },
                    "plan": {},
                },
                "redebate_id": null,
            },
            "rerun": {"rerun_id": "rr-1", "renewed": ["valuation", "report"]},
        });
        let out = render_review(&r);
        assert!(
            out.starts_with(
                "overrode the provisional decision of debate D-1 (operating margin 25%) by alice\n  \
                 now: operating_margin 28% (set at gate review) (operating_margin = 0.28)\n"
            ),
            "{out}"
        );
        assert!(out.contains("  rationale: guidance raised\n"), "{out}");
        assert!(out.contains("  operating_margin: 0.25 → 0.28\n"), "{out}");
        assert!(
            out.contains("impact: 2 analyses affected, 1 must re-run (about 12.33 min)"),
            "{out}"
        );
        assert!(out.contains("185.00 → 199.80"), "{out}");
        assert!(out.contains("0.70 → 0.72"), "{out}");
        assert!(
            !out.contains("199.8000001") && !out.contains("0.71666"),
            "{out}"
        );
        // The impact rows are aligned: the estimates start in one column.
        let row = |id: &str| out.lines().find(|l| l.contains(id)).unwrap().to_string();
        let (a, b) = (row("AAPL/valuation"), row("AAPL/report"));
        assert_eq!(a.find("185.00"), b.find("0.70"), "{out}");
        assert_eq!(a.find("target_price"), b.find("confidence_score"), "{out}");
        assert!(
            out.contains("re-running (rr-1): valuation, report"),
            "{out}"
        );
    }

    #[test]
    fn confirm_and_redebate() {
        let confirm = json!({"facilitator": {
            "debate": {"debate_id": "D-2", "topic": "t"},
            "resolution": {"method": "gate_confirm", "decided_by": "bob",
                           "final_position": {"statement": "margin 25%"}},
            "impact": null, "redebate_id": null}});
        assert_eq!(
            render_review(&confirm),
            "confirmed the provisional decision of debate D-2 (t) by bob\n  stands: margin 25%\n"
        );
        let redebate = json!({"facilitator": {
            "debate": {"debate_id": "D-3", "topic": "t"},
            "resolution": {"method": "gate_redebate", "decided_by": "bob"},
            "impact": null, "redebate_id": "D-3-r1"}});
        assert_eq!(
            render_review(&redebate),
            "sent debate D-3 (t) back to debate by bob\nre-debate opened: D-3-r1 (caucus debate D-3-r1)\n"
        );
    }

    #[test]
    fn the_package_rounds_credibility_and_confidence() {
        let p = json!({
            "workflow_id": "wf-1", "item": "AAPL", "pipeline": "stock-analysis",
            "gate": {"gate": "review", "waiting_ms": 65000, "reminders_sent": 0, "escalated": false},
            "findings": [{"from_agent": "financial", "finding": "margin 25%",
                          "confidence": 0.8333333333, "evidence": ["10-K"]}],
            "open_debates": [],
            "provisional": {"count": 1, "message": "1 provisional decision requires review",
                "decisions": [{
                    "debate_id": "D-1", "topic": "margin",
                    "conservative_position": {"statement": "margin 22%"},
                    "rule": "lowest:operating_margin", "rationale": "conservative",
                    "override_window_deadline": "2026-11-25T15:00:00Z",
                    "downstream_dependencies": ["valuation", "report"],
                    "positions": {"financial": {"statement": "margin 25%"},
                                  "skeptic": {"statement": "margin 22%"}},
                    "credibility": {
                        "financial": {"score": 0.999997851310515, "ci": 0.0512345, "data_points": 12},
                        "skeptic": null,
                    },
                }]},
            "precedents": [{"debate_id": "D-0", "topic": "margin", "outcome": "22%",
                            "similarity": 0.66666}],
            "can_approve": false, "blocking": ["1 provisional decision requires review"],
        });
        let out = render_package(&p);
        assert!(out.contains("(confidence 0.83)"), "{out}");
        assert!(
            out.contains("financial: margin 25% (credibility 1.00 ± 0.05 (12 data points))"),
            "{out}"
        );
        assert!(out.contains("skeptic: margin 22% (credibility -)"), "{out}");
        assert!(out.contains("review by: 2026-11-25 15:00:00 UTC"), "{out}");
        assert!(out.contains("downstream: valuation, report"), "{out}");
        assert!(out.contains("(similarity 0.67)"), "{out}");
        assert!(out.contains("open for 1m05s"), "{out}");
        assert!(!out.contains("0.9999"), "{out}");
    }

    #[test]
    fn an_overrides_estimate_is_shown_beside_what_the_rerun_gave() {
        let p = json!({"reruns": [{"rerun_id": "r1", "reason": "override operating_margin",
            "estimates": [{"task": "valuation", "output_metric": "target_price",
                           "before": 45.41, "estimate": 160.283383, "estimate_method": "linear sensitivity",
                           "actual": 292.84, "error": 132.556617}]}]});
        let got = rerun_estimates(&p);
        assert!(
            got.contains("valuation target_price: 45.41 → estimate 160.28 (linear sensitivity); re-run gave 292.84, error 132.56"),
            "{got}"
        );
        assert!(rerun_estimates(&json!({})).is_empty());
    }
}
