//! `caucus gate` replies as people read them: the list of open gates, the
//! decision package and a decision.

use serde_json::{json, Value};

use caucus_shared::api::coordinator::gates::{
    DecisionPackage, GateAction, GateDecideReply, GatesReply, RerunRecord,
};
use caucus_shared::api::facilitator::{BriefScore, ProvisionalReply};

use super::super::render::{duration, num, table, when, Align::Left, Align::Right};
use super::findings::{render_findings, render_late};

/// A `coordinator.gates` reply as a table, oldest first, columns as wide as
/// their widest cell.
pub fn render_list(r: &GatesReply) -> String {
    if r.gates.is_empty() {
        return "no open gates\n".into();
    }
    let mut out = format!("{} open gate(s), oldest first:\n", r.count);
    let rows: Vec<Vec<String>> = r
        .gates
        .iter()
        .map(|g| {
            let mut reminders = g.reminders_sent.to_string();
            if g.escalated {
                reminders.push_str(", ESCALATED");
            }
            vec![
                g.item.clone(),
                g.gate.clone(),
                duration(g.waiting_ms.unwrap_or(0)),
                reminders,
                g.workflow_id.clone(),
            ]
        })
        .collect();
    let t = table(
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
    if let Some(c) = &r.next_cursor {
        out.push_str(&format!("more gates: caucus gate list --cursor {c}\n"));
    }
    out
}

/// An optional number for people; `-` when absent.
fn opt_num(x: Option<f64>) -> String {
    x.map(num).unwrap_or_else(|| "-".into())
}

/// An override's estimates beside what the re-run gave: the estimate is a
/// linear sensitivity, not the analysis's own model, so its error is shown.
fn rerun_estimates(reruns: &[RerunRecord]) -> String {
    let mut out = String::new();
    for r in reruns.iter().filter(|r| !r.estimates.is_empty()) {
        out.push_str(&format!("\nRe-run {} ({}):\n", r.rerun_id, r.reason));
        for e in &r.estimates {
            let actual = match e.actual {
                Some(a) => format!("re-run gave {}, error {}", num(a), opt_num(e.error)),
                None => "re-run pending".into(),
            };
            out.push_str(&format!(
                "  {} {}: {} → estimate {} ({}); {}\n",
                e.task,
                e.output_metric,
                opt_num(e.before),
                num(e.estimate),
                e.estimate_method,
                actual
            ));
        }
    }
    out
}

/// A `coordinator.gate` reply as it came (the demo's), rendered by
/// [`render_decision_package`]; an unreadable one says why.
pub fn render_package(p: &Value) -> String {
    match caucus_shared::api::client::decode_reply::<super::Gate>(p.clone()) {
        Ok(p) => render_decision_package(&p),
        Err(e) => format!("unreadable decision package: {}\n", e.message),
    }
}

/// The decision package as a person reads it.
pub fn render_decision_package(p: &DecisionPackage) -> String {
    let mut out = String::new();
    let g = &p.gate;
    out.push_str(&format!(
        "Gate `{}` of {} ({}), pipeline {}\n  open for {}, reminders sent {}, escalated {}\n",
        g.gate,
        p.item,
        p.workflow_id,
        p.pipeline,
        duration(g.waiting_ms.unwrap_or(0)),
        g.reminders_sent,
        if g.escalated { "yes" } else { "no" },
    ));
    out.push_str(&render_findings(&p.findings, &p.workflow_id));
    out.push_str(&render_late(&p.late_findings));
    out.push_str(&format!("\nOpen debates ({}):\n", p.open_debates.len()));
    for d in &p.open_debates {
        out.push_str(&format!(
            "  {}  {}  level {} {}  {} vs {}\n",
            d.debate_id,
            d.topic,
            d.level,
            d.state.as_str(),
            d.challenger,
            d.challenged,
        ));
    }
    out.push_str(&provisional(&p.provisional));
    if !p.precedents.is_empty() {
        out.push_str(&format!("\nPrecedents ({}):\n", p.precedents.len()));
        for x in &p.precedents {
            out.push_str(&format!(
                "  {}  {}  → {}  (similarity {})\n",
                x.debate_id,
                x.topic,
                x.outcome,
                num(x.similarity),
            ));
        }
    }
    out.push_str(&rerun_estimates(&p.reruns));
    if let Some(n) = &p.facilitator {
        out.push_str(&format!("\n(facilitator: {n})\n"));
    }
    if p.can_approve {
        out.push_str("\nReady to approve.\n");
    } else {
        out.push_str("\nCannot approve yet:\n");
        for b in &p.blocking {
            out.push_str(&format!("  - {b}\n"));
        }
    }
    let wf = &p.workflow_id;
    out.push_str(&format!(
        "\nActions: caucus gate approve {wf} | reject {wf} --rationale … | send-back {wf} --rationale … [--to STAGE]\n         caucus gate review {wf} <debate_id> confirm | override --value V --rationale … | redebate --context …\n"
    ));
    out
}

/// The provisional decisions awaiting review, each with the positions
/// and their credibility.
fn provisional(p: &ProvisionalReply) -> String {
    let dash = || "-".to_string();
    let mut out = format!("\n{}\n", p.message);
    for d in &p.decisions {
        out.push_str(&format!(
            "  {}  {}\n    applied (conservative): {}\n    rule: {}  rationale: {}\n    review by: {}  downstream: {}\n",
            d.debate_id,
            d.topic,
            d.conservative_position.as_ref().map_or_else(dash, |p| p.statement.clone()),
            d.rule.clone().unwrap_or_else(dash),
            d.rationale.clone().unwrap_or_else(dash),
            // `render::when` formats the deadline (or `-`) as every timestamp.
            when(&json!(d.override_window_deadline)),
            names(&d.downstream_dependencies).unwrap_or_else(dash),
        ));
        for (side, pos) in &d.positions {
            let score = d
                .credibility
                .as_ref()
                .and_then(|c| c.get(side))
                .copied()
                .flatten();
            out.push_str(&format!(
                "    {side}: {} (credibility {})\n",
                pos.as_ref().map_or_else(dash, |p| p.statement.clone()),
                credibility(score),
            ));
        }
    }
    out
}

/// A credibility entry as `0.91 ± 0.05 (12 data points)`; `-` when there
/// is none.
fn credibility(c: Option<BriefScore>) -> String {
    let Some(c) = c else {
        return "-".into();
    };
    let n = c.data_points;
    format!(
        "{} ± {} ({n} data point{})",
        num(c.score),
        num(c.ci),
        if n == 1 { "" } else { "s" }
    )
}

/// `"why"`, quoted, after a colon; nothing without a rationale.
fn because(rationale: &str) -> String {
    match rationale.trim() {
        "" => String::new(),
        r => format!(": {r:?}"),
    }
}

/// Names joined by `, `; `None` when there are none.
pub(super) fn names(v: &[String]) -> Option<String> {
    (!v.is_empty()).then(|| v.join(", "))
}

/// A `coordinator.gate_decide` reply as a person reads it, e.g.
/// `approved gate review of AAPL (wf-1) by alice: "figures tie out"`.
pub fn render_decision(r: &GateDecideReply) -> String {
    let w = &r.workflow;
    let verb = match r.action {
        GateAction::Approve => "approved",
        GateAction::Reject => "rejected",
        GateAction::SendBack => "sent back",
    };
    let d = r.decision.as_ref();
    let mut out = format!(
        "{verb} gate {} of {} ({}) by {}{}\n",
        r.gate,
        w.item,
        r.workflow_id,
        d.map_or("-", |d| d.decided_by.as_str()),
        d.map(|d| because(&d.rationale)).unwrap_or_default(),
    );
    if let Some(d) = d {
        out.push_str(&format!(
            "  decided {} after the gate opened",
            duration(d.response_ms)
        ));
        if d.reminders_sent > 0 {
            out.push_str(&format!(", after {} reminder(s)", d.reminders_sent));
        }
        if d.escalated {
            out.push_str(", escalated");
        }
        out.push('\n');
    }
    if let Some(again) = names(&r.renewed) {
        out.push_str(&format!(
            "  running again: {again}; the gate reopens after them\n"
        ));
    }
    if let Some(ready) = names(&r.newly_ready) {
        out.push_str(&format!("  now ready: {ready}\n"));
    }
    out.push_str(&format!(
        "  workflow {}: {}/{} tasks done",
        w.state.as_str(),
        w.progress.completed,
        w.progress.total,
    ));
    if let Some(f) = &w.failure {
        out.push_str(&format!(" ({f})"));
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use serde::de::DeserializeOwned;

    use super::*;

    fn decode<T: DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).expect("a reply of the right shape")
    }

    fn workflow(state: &str) -> Value {
        json!({"workflow_id": "wf-1", "item": "AAPL", "item_token": "AAPL",
               "pipeline": "stock-analysis", "state": state,
               "progress": {"completed": 3, "total": 5}, "overdue_tasks": [],
               "created_at": "2026-11-25T12:00:00Z", "updated_at": "2026-11-25T12:00:00Z"})
    }

    fn open_gate(
        item: &str,
        gate: &str,
        waiting_ms: i64,
        reminders: u32,
        escalated: bool,
        wf: &str,
    ) -> Value {
        json!({"item": item, "gate": gate, "waiting_ms": waiting_ms, "pipeline": "p",
               "opened_at": "2026-11-25T12:00:00Z", "reminders_sent": reminders,
               "escalated": escalated, "sent_back": 0, "pending_upstream": [],
               "workflow_id": wf})
    }

    #[test]
    fn the_gate_list_is_aligned() {
        let r = json!({"count": 3, "next_cursor": "x", "gates": [
            open_gate("BRK.B-LONG", "review", 187000, 2, true, "wf-1"),
            open_gate("A", "signoff", 900, 0, false, "wf-2"),
        ]});
        assert_eq!(
            render_list(&decode(r)),
            "3 open gate(s), oldest first:\n  \
             item        gate     waiting  reminders     workflow\n  \
             BRK.B-LONG  review     3m07s  2, ESCALATED  wf-1\n  \
             A           signoff    900ms  0             wf-2\n\
             more gates: caucus gate list --cursor x\n"
        );
        assert_eq!(
            render_list(&decode(json!({"count": 0, "gates": []}))),
            "no open gates\n"
        );
    }

    #[test]
    fn decisions_read_as_sentences() {
        let approve = json!({
            "workflow_id": "wf-1", "gate": "review", "action": "approve",
            "decision": {"action": "approve", "decided_by": "alice",
                         "rationale": "figures tie out", "response_ms": 187000,
                         "at": "2026-11-25T12:03:07Z",
                         "reminders_sent": 1, "escalated": false},
            "newly_ready": ["report"], "renewed": [],
            "workflow": workflow("running"),
        });
        let out = render_decision(&decode(approve.clone()));
        assert_eq!(
            out,
            "approved gate review of AAPL (wf-1) by alice: \"figures tie out\"\n  \
             decided 3m07s after the gate opened, after 1 reminder(s)\n  \
             now ready: report\n  \
             workflow running: 3/5 tasks done\n"
        );
        let back = json!({
            "workflow_id": "wf-1", "gate": "review", "action": "send_back",
            "decision": {"action": "send_back", "decided_by": "bob", "rationale": "redo",
                         "response_ms": 900, "at": "2026-11-25T12:00:01Z"},
            "newly_ready": ["valuation"], "renewed": ["valuation", "report"],
            "workflow": workflow("running"),
        });
        let out = render_decision(&decode(back));
        assert!(
            out.starts_with("sent back gate review of AAPL (wf-1) by bob: \"redo\"\n"),
            "{out}"
        );
        assert!(
            out.contains("running again: valuation, report; the gate reopens after them"),
            "{out}"
        );
        let mut reject = approve;
        reject["action"] = json!("reject");
        reject["decision"]["rationale"] = json!("");
        reject["newly_ready"] = json!([]);
        reject["workflow"] = workflow("failed");
        reject["workflow"]["failure"] = json!("rejected at gate review");
        let out = render_decision(&decode(reject));
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

    fn package(provisional: Value, reruns: Value) -> Value {
        json!({
            "workflow_id": "wf-1", "item": "AAPL", "pipeline": "stock-analysis",
            "gate": open_gate("AAPL", "review", 65000, 0, false, "wf-1"),
            "tasks": [],
            "findings": [{"from_agent": "financial", "finding": "margin 25%",
                          "confidence": 0.8333333333, "evidence": ["10-K"],
                          "impact": null, "metric": null, "value": null,
                          "timestamp": "2026-11-25T12:00:00Z"}],
            "open_debates": [],
            "provisional": provisional,
            "precedents": [{"debate_id": "D-0", "topic": "margin", "outcome": "22%",
                            "similarity": 0.66666, "matched": [], "level": 2,
                            "method": "credibility", "overridden": false,
                            "resolved_at": "2026-11-20T12:00:00Z"}],
            "resolved_assumptions": {},
            "reruns": reruns,
            "can_approve": false, "blocking": ["1 provisional decision requires review"],
            "actions": ["approve", "reject", "send_back"],
        })
    }

    #[test]
    fn the_package_rounds_credibility_and_confidence() {
        let provisional = json!({"count": 1, "message": "1 provisional decision requires review",
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
        }]});
        let out = render_package(&package(provisional, json!([])));
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
        let reruns: Vec<RerunRecord> = decode(json!([{"rerun_id": "r1",
            "reason": "override operating_margin", "requested_by": "alice",
            "requested_at": "2026-11-25T12:00:00Z", "groups": [["valuation"]], "next_group": 1,
            "estimates": [{"task": "valuation", "output_metric": "target_price",
                           "before": 45.41, "estimate": 160.283383, "estimate_method": "linear sensitivity",
                           "actual": 292.84, "error": 132.556617}]}]));
        let got = rerun_estimates(&reruns);
        assert!(
            got.contains("valuation target_price: 45.41 → estimate 160.28 (linear sensitivity); re-run gave 292.84, error 132.56"),
            "{got}"
        );
        assert!(rerun_estimates(&[]).is_empty());
    }
}
