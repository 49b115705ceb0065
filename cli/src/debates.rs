//! `caucus debates`, `caucus debate <id>` and `caucus decide <id>`: the
//! facilitator's debates and expert queues from the terminal.

use serde_json::{json, Value};

use super::render::{num, percent, table, text, when, Align::Left};
use super::Client;

/// Filters of `caucus debates`.
#[derive(Debug, Clone, clap::Args)]
pub struct ListArgs {
    /// Only this state (awaiting_ack, awaiting_evidence, awaiting_verdict,
    /// mediating, awaiting_human, provisional, resolved, …).
    #[arg(long)]
    pub state: Option<String>,
    /// Only this level (1..=5).
    #[arg(long)]
    pub level: Option<u8>,
    /// Only this workflow.
    #[arg(long)]
    pub workflow: Option<String>,
    /// Only this item.
    #[arg(long)]
    pub item: Option<String>,
    /// Debates per page (default 200, at most 500).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Where the page starts: the cursor the previous page printed.
    #[arg(long)]
    pub cursor: Option<String>,
}

/// Flags of `caucus decide` (a level-3 expert decision).
#[derive(Debug, Clone, clap::Args)]
pub struct DecideArgs {
    /// The debate.
    pub debate_id: String,
    /// The expert deciding.
    #[arg(long)]
    pub expert: String,
    /// The side whose position stands: challenger or challenged.
    #[arg(long)]
    pub side: Option<String>,
    /// Why.
    #[arg(long, default_value = "")]
    pub rationale: String,
    /// The expert cannot take it: the conservative default applies (level 4).
    #[arg(long)]
    pub unavailable: bool,
}

/// `caucus debates`: open and recent debates plus each expert's load.
pub async fn list(client: &Client, a: ListArgs, as_json: bool) -> anyhow::Result<i32> {
    let mut body = json!({});
    if let Some(s) = a.state {
        body["state"] = json!(s);
    }
    if let Some(l) = a.level {
        body["level"] = json!(l);
    }
    if let Some(w) = a.workflow {
        body["workflow_id"] = json!(w);
    }
    if let Some(i) = a.item {
        body["item"] = json!(i);
    }
    if let Some(l) = a.limit {
        body["limit"] = json!(l);
    }
    if let Some(c) = a.cursor {
        body["cursor"] = json!(c);
    }
    let (debates, load) = tokio::try_join!(
        client.call_ok("facilitator", "debates", body),
        client.call_ok("facilitator", "expert_load", json!({})),
    )?;
    if as_json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"debates": debates["debates"], "total": debates["total"],
                        "next_cursor": debates["next_cursor"], "expert_load": load})
            )?
        );
        return Ok(0);
    }
    print!("{}", render_list(&debates, &load));
    if let Some(c) = debates["next_cursor"].as_str() {
        println!("more debates: caucus debates --cursor {c} (with the same filters)");
    }
    Ok(0)
}

/// A `facilitator.debates` reply and the expert load as a table in queue
/// order, columns as wide as their widest cell.
pub fn render_list(debates: &Value, load: &Value) -> String {
    let list = debates["debates"].as_array().cloned().unwrap_or_default();
    let mut out = match debates["total"]
        .as_u64()
        .filter(|t| *t as usize > list.len())
    {
        // The facilitator pages its list: this is one page.
        Some(total) => format!("{} of {total} debate(s), queue order:\n", list.len()),
        None => format!("{} debate(s), queue order:\n", list.len()),
    };
    if !list.is_empty() {
        let rows: Vec<Vec<String>> = list
            .iter()
            .map(|d| {
                vec![
                    text(&d["debate_id"]),
                    format!("L{}", text(&d["level"])),
                    text(&d["state"]),
                    text(&d["priority"]),
                    format!("{} vs {}", text(&d["challenger"]), text(&d["challenged"])),
                    d["expert"].as_str().unwrap_or("-").to_string(),
                    text(&d["topic"]),
                ]
            })
            .collect();
        let t = table(
            &[
                ("debate", Left),
                ("level", Left),
                ("state", Left),
                ("priority", Left),
                ("challenger vs challenged", Left),
                ("expert", Left),
                ("topic", Left),
            ],
            &rows,
        );
        for l in t.lines() {
            out.push_str(&format!("  {l}\n"));
        }
    }
    let experts: Vec<String> = load
        .as_object()
        .map(|m| m.iter().map(|(e, l)| format!("{e} {}", text(l))).collect())
        .unwrap_or_default();
    out.push_str(&format!(
        "experts: {}\n",
        if experts.is_empty() {
            "none configured".to_string()
        } else {
            experts.join(", ")
        }
    ));
    out
}

/// `caucus debate <id>`: one debate in full.
pub async fn show(client: &Client, id: &str, as_json: bool) -> anyhow::Result<i32> {
    let d = client
        .call_ok("facilitator", "debate", json!({"debate_id": id}))
        .await?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&d)?);
    } else {
        print!("{}", render_debate(&d));
    }
    Ok(0)
}

/// A position: `statement (metric = value, confidence 80%)`.
fn position(p: &Value) -> String {
    if p.is_null() {
        return "no position stated".into();
    }
    let mut out = text(&p["statement"]);
    let mut extra = Vec::new();
    if let (Some(m), false) = (p["metric"].as_str(), p["value"].is_null()) {
        extra.push(format!("{m} = {}", text(&p["value"])));
    }
    if !p["confidence"].is_null() {
        extra.push(format!("confidence {}", percent(&p["confidence"])));
    }
    if !extra.is_empty() {
        out.push_str(&format!(" ({})", extra.join(", ")));
    }
    out
}

/// A credibility score: `0.91 (0.84–0.95, 12 data points)`, and how often a
/// person overrode the agent when they did.
fn score(s: &Value) -> String {
    let Some(x) = s["score"].as_f64() else {
        return "-".into();
    };
    let mut out = num(x);
    let i = &s["interval"];
    if let (Some(lo), Some(hi)) = (i["lower"].as_f64(), i["upper"].as_f64()) {
        out.push_str(&format!(" ({}–{}", num(lo), num(hi)));
        if let Some(n) = s["sample_size"].as_u64() {
            out.push_str(&format!(
                ", {n} data point{}",
                if n == 1 { "" } else { "s" }
            ));
        }
        out.push(')');
    }
    if let Some(r) = s["override_rate"].as_f64().filter(|r| *r > 0.0) {
        out.push_str(&format!(", overridden {}", percent(&json!(r))));
    }
    out
}

/// An L2 assessment in two lines.
fn assessment(a: &Value, d: &Value) -> Vec<String> {
    let c = &d["challenge"];
    let mut out = vec![format!(
        "credibility: {} {} vs {} {}",
        text(&c["challenger"]),
        score(&a["challenger"]),
        text(&c["challenged"]),
        score(&a["challenged"]),
    )];
    let verdict = match (a["clear"].as_bool(), a["favoured"].as_str()) {
        (Some(true), Some(side)) => format!("clear, favours the {side}"),
        (_, Some(side)) => format!("not clear (leans to the {side})"),
        _ => "not clear".into(),
    };
    let mut l = format!(
        "  differential {} (required {}): {verdict}",
        text(&a["differential"]),
        text(&a["required"]),
    );
    if a["sufficient_data"].as_bool() == Some(false) {
        l.push_str("; too few data points");
    }
    out.push(l);
    if let Some(r) = a["reason"].as_str().filter(|r| !r.is_empty()) {
        out.push(format!("  {r}"));
    }
    out
}

/// A `facilitator.debate` reply (a whole debate) as a person reads it.
pub fn render_debate(d: &Value) -> String {
    let c = &d["challenge"];
    let mut out = format!(
        "Debate {}: {}\n",
        text(&d["debate_id"]),
        text(&c["disputed_finding"])
    );
    let mut about = Vec::new();
    if let Some(i) = c["item"].as_str() {
        about.push(format!("item {i}"));
    }
    if let Some(w) = c["workflow_id"].as_str() {
        about.push(format!("workflow {w}"));
    }
    if let Some(p) = c["priority"].as_str() {
        about.push(format!("priority {p}"));
    }
    if let Some(r) = d["redebate_of"].as_str() {
        about.push(format!("re-debate of {r}"));
    }
    if !about.is_empty() {
        out.push_str(&format!("  {}\n", about.join(", ")));
    }
    let mut state = format!("  level {}, {}", text(&d["level"]), text(&d["state"]));
    if let Some(e) = d["expert"].as_str() {
        state.push_str(&format!(", expert {e}"));
    }
    if !d["deadline"].is_null() {
        state.push_str(&format!(", deadline {}", when(&d["deadline"])));
    }
    out.push_str(&state);
    out.push('\n');
    let challenger = &c["challenger"];
    let challenged = &c["challenged"];
    let pos = |side: &str| {
        let p = &d[format!("{side}_position").as_str()];
        if p.is_null() {
            &c[format!("{side}_position").as_str()]
        } else {
            p
        }
    };
    let w = [challenger, challenged]
        .iter()
        .map(|a| text(a).chars().count())
        .max()
        .unwrap_or(0);
    out.push_str(&format!(
        "  challenger {:<w$}  {}\n",
        text(challenger),
        position(pos("challenger"))
    ));
    out.push_str(&format!(
        "  challenged {:<w$}  {}\n",
        text(challenged),
        position(pos("challenged"))
    ));
    if let Some(b) = c["challenge_basis"].as_str().filter(|b| !b.is_empty()) {
        out.push_str(&format!("  basis: {b}\n"));
    }
    let evidence = d["evidence"].as_array().cloned().unwrap_or_default();
    if !evidence.is_empty() {
        out.push_str(&format!("\nEvidence ({}):\n", evidence.len()));
        for e in &evidence {
            out.push_str(&format!(
                "  {}  {} ({}): {}\n",
                when(&e["at"]),
                text(&e["from"]),
                text(&e["side"]),
                text(&e["evidence"]),
            ));
            if e["revised"].as_bool() == Some(true) {
                out.push_str(&format!(
                    "    revised position: {}\n",
                    position(&e["position"])
                ));
            }
            if let Some(l) = e["limitations"].as_array().filter(|l| !l.is_empty()) {
                out.push_str(&format!("    limitations: {}\n", text(&json!(l))));
            }
        }
    }
    let a = if d["assessment"].is_null() {
        &d["resolution"]["credibility"]
    } else {
        &d["assessment"]
    };
    if !a.is_null() {
        out.push('\n');
        for l in assessment(a, d) {
            out.push_str(&l);
            out.push('\n');
        }
    }
    let history = d["history"].as_array().cloned().unwrap_or_default();
    if !history.is_empty() {
        out.push_str("\nHistory:\n");
        let w = history
            .iter()
            .map(|h| text(&h["state"]).chars().count())
            .max()
            .unwrap_or(0);
        for h in &history {
            out.push_str(&format!(
                "  {}  L{} {:<w$}  {}\n",
                when(&h["at"]),
                text(&h["level"]),
                text(&h["state"]),
                text(&h["event"]),
            ));
        }
    }
    let r = &d["resolution"];
    if r.is_null() {
        out.push_str("\nNot resolved yet.\n");
    } else {
        out.push_str(&format!(
            "\nResolution: {} (method {}, level {}, {})\n",
            text(&r["label"]),
            text(&r["method"]),
            text(&r["level"]),
            if r["provisional"].as_bool() == Some(true) {
                "provisional"
            } else if r["binding"].as_bool() == Some(true) {
                "binding"
            } else {
                "not binding"
            },
        ));
        out.push_str(&format!("  value: {}\n", position(&r["final_position"])));
        if let Some(who) = r["winner"].as_str() {
            out.push_str(&format!("  stood: {who}\n"));
        }
        if let Some(why) = r["rationale"].as_str().filter(|s| !s.is_empty()) {
            out.push_str(&format!("  rationale: {why}\n"));
        }
        if !r["confidence"].is_null() {
            out.push_str(&format!(
                "  confidence: {}\n",
                num(r["confidence"].as_f64().unwrap_or(0.0))
            ));
        }
        if let Some(who) = r["decided_by"].as_str() {
            out.push_str(&format!("  decided by: {who}\n"));
        }
        let ow = &r["override_window"];
        if ow["status"] == "open" {
            out.push_str(&format!(
                "  override window open until {}\n",
                when(&ow["closes_at"])
            ));
        }
        out.push_str(&format!("  resolved at: {}\n", when(&r["resolved_at"])));
    }
    let superseded = d["superseded"].as_array().cloned().unwrap_or_default();
    for s in &superseded {
        out.push_str(&format!(
            "  replaced: {} ({}, level {})\n",
            position(&s["final_position"]),
            text(&s["label"]),
            text(&s["level"]),
        ));
    }
    let prec = d["precedents"].as_array().cloned().unwrap_or_default();
    if !prec.is_empty() {
        out.push_str(&format!("\nPrecedents ({}):\n", prec.len()));
        for p in &prec {
            out.push_str(&format!(
                "  {}  {}  → {} (similarity {})\n",
                text(&p["debate_id"]),
                text(&p["topic"]),
                text(&p["outcome"]),
                text(&p["similarity"]),
            ));
        }
    }
    out
}

/// `caucus decide <id>`: an expert's level-3 decision.
pub async fn decide(client: &Client, a: DecideArgs, as_json: bool) -> anyhow::Result<i32> {
    let mut body = json!({
        "debate_id": a.debate_id,
        "expert": a.expert,
        "rationale": a.rationale,
        "unavailable": a.unavailable,
    });
    if let Some(s) = a.side {
        body["side"] = json!(s);
    }
    let r = client.call_ok("facilitator", "decide", body).await?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "{}: {} at level {} ({})",
            text(&r["debate"]["debate_id"]),
            text(&r["resolution"]["label"]),
            text(&r["resolution"]["level"]),
            text(&r["resolution"]["final_position"]["statement"]),
        );
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn debate() -> Value {
        json!({
            "debate_id": "D-1",
            "challenge": {
                "challenger": "skeptic", "challenged": "financial_analysis",
                "disputed_finding": "operating margin 25%",
                "challenge_basis": "peers run at 22%",
                "priority": "critical-path", "item": "AAPL", "workflow_id": "wf-1",
                "challenger_position": {"statement": "margin 22%"},
            },
            "level": 2, "state": "resolved",
            "challenger_position": {"statement": "margin 22%", "metric": "operating_margin",
                                    "value": 0.22, "confidence": 0.7},
            "challenged_position": {"statement": "margin 25%", "metric": "operating_margin",
                                    "value": 0.25, "confidence": 0.8512},
            "evidence": [{"from": "financial_analysis", "side": "challenged",
                          "evidence": ["10-K p. 41", "guidance"], "revised": false,
                          "at": "2026-11-25T14:00:01.5Z"}],
            "assessment": {
                "challenger": {"agent": "skeptic", "score": 0.512345,
                               "interval": {"lower": 0.40111, "upper": 0.6222, "half_width": 0.11},
                               "sample_size": 9, "override_rate": 0.0},
                "challenged": {"agent": "financial_analysis", "score": 0.999997851310515,
                               "interval": {"lower": 0.9012, "upper": 1.0, "half_width": 0.05},
                               "sample_size": 30, "override_rate": 0.25},
                "differential": 0.487652851310515, "required": 0.25,
                "sufficient_data": true, "clear": true, "favoured": "challenged",
                "reason": "financial_analysis is clearly more credible",
            },
            "history": [
                {"at": "2026-11-25T14:00:00Z", "level": 1, "state": "awaiting_ack", "event": "opened"},
                {"at": "2026-11-25T14:05:00Z", "level": 2, "state": "mediating", "event": "verdict_timeout"},
                {"at": "2026-11-25T14:05:01Z", "level": 2, "state": "resolved", "event": "credibility"},
            ],
            "resolution": {
                "debate_id": "D-1", "level": 2, "method": "credibility",
                "label": "facilitator-resolved", "binding": true, "provisional": false,
                "final_position": {"statement": "margin 25%", "metric": "operating_margin", "value": 0.25},
                "winner": "financial_analysis",
                "rationale": "credibility differential 0.49 above 0.25",
                "confidence": 0.91234, "override_window": {"status": "not_applicable"},
                "resolved_at": "2026-11-25T14:05:01Z",
            },
        })
    }

    #[test]
    fn a_debate_reads_as_text() {
        let out = render_debate(&debate());
        let expect = [
            "Debate D-1: operating margin 25%\n",
            "  item AAPL, workflow wf-1, priority critical-path\n",
            "  level 2, resolved\n",
            "  challenger skeptic             margin 22% (operating_margin = 0.22, confidence 70%)\n",
            "  challenged financial_analysis  margin 25% (operating_margin = 0.25, confidence 85%)\n",
            "  basis: peers run at 22%\n",
            "  2026-11-25 14:00:01 UTC  financial_analysis (challenged): 10-K p. 41, guidance\n",
            "credibility: skeptic 0.51 (0.40–0.62, 9 data points) vs financial_analysis \
             1.00 (0.90–1.00, 30 data points), overridden 25%\n",
            "  differential 0.49 (required 0.25): clear, favours the challenged\n",
            "  2026-11-25 14:00:00 UTC  L1 awaiting_ack  opened\n",
            "  2026-11-25 14:05:00 UTC  L2 mediating     verdict_timeout\n",
            "Resolution: facilitator-resolved (method credibility, level 2, binding)\n",
            "  value: margin 25% (operating_margin = 0.25)\n",
            "  stood: financial_analysis\n",
            "  rationale: credibility differential 0.49 above 0.25\n",
            "  confidence: 0.91\n",
            "  resolved at: 2026-11-25 14:05:01 UTC\n",
        ];
        for e in expect {
            assert!(out.contains(e), "missing {e:?} in:\n{out}");
        }
        assert!(!out.contains("0.99999") && !out.contains("0.4876"), "{out}");
        assert!(!out.contains('{'), "no JSON in the text: {out}");
    }

    #[test]
    fn the_list_is_a_table_in_queue_order() {
        let debates = json!({"total": 3, "next_cursor": "2", "debates": [
            {"debate_id": "wf-1234-margin", "level": 3, "state": "awaiting_human",
             "priority": "critical-path", "challenger": "strategy", "challenged": "financial",
             "expert": "alice", "topic": "operating margin 25%"},
            {"debate_id": "CH-2", "level": 1, "state": "awaiting_ack", "priority": "supporting",
             "challenger": "a", "challenged": "b", "topic": "t"},
        ]});
        let out = render_list(&debates, &json!({"alice": "1/3", "bob": "0/3"}));
        assert_eq!(
            out,
            "2 of 3 debate(s), queue order:\n  \
             debate          level  state           priority       challenger vs challenged  expert  topic\n  \
             wf-1234-margin  L3     awaiting_human  critical-path  strategy vs financial     alice   operating margin 25%\n  \
             CH-2            L1     awaiting_ack    supporting     a vs b                    -       t\n\
             experts: alice 1/3, bob 0/3\n"
        );
        assert_eq!(
            render_list(&json!({"debates": [], "total": 0}), &json!({})),
            "0 debate(s), queue order:\nexperts: none configured\n"
        );
    }

    #[test]
    fn an_open_debate_with_an_expert() {
        let mut d = debate();
        d["state"] = json!("awaiting_human");
        d["level"] = json!(3);
        d["expert"] = json!("alice");
        d["deadline"] = json!("2026-11-25T15:00:00Z");
        d["resolution"] = Value::Null;
        d["assessment"] = Value::Null;
        d["challenger_position"] = Value::Null;
        let out = render_debate(&d);
        assert!(
            out.contains(
                "  level 3, awaiting_human, expert alice, deadline 2026-11-25 15:00:00 UTC\n"
            ),
            "{out}"
        );
        // The challenge's own position stands in for a missing current one.
        assert!(
            out.contains("challenger skeptic             margin 22%\n"),
            "{out}"
        );
        assert!(out.contains("Not resolved yet."), "{out}");
        assert!(!out.contains("credibility:"), "{out}");
    }
}
