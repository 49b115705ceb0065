//! A `coordinator.gate_review` reply as people read it.

use serde_json::Value;

use caucus_shared::api::coordinator::gates::GateReviewReply;

use super::super::render::{num, table, text, Align::Left};
use super::render::names;

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
pub fn render_review(r: &GateReviewReply) -> String {
    let f = &r.facilitator;
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
    if let Some(rr) = &r.rerun {
        match names(&rr.renewed) {
            Some(renewed) => {
                out.push_str(&format!("re-running ({}): {renewed}\n", rr.rerun_id));
            }
            None => out
                .push_str("nothing to re-run; tasks that have not run yet use the settled value\n"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn decode(v: Value) -> GateReviewReply {
        serde_json::from_value(v).expect("a gate_review reply")
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
            "rerun": {"workflow_id": "wf-1", "rerun_id": "rr-1", "renewed": ["valuation", "report"],
                      "not_yet_run": [], "newly_ready": [],
                      "workflow": {"workflow_id": "wf-1", "item": "AAPL", "item_token": "AAPL",
                                   "pipeline": "p", "state": "running",
                                   "progress": {"completed": 3, "total": 5}, "overdue_tasks": [],
                                   "created_at": "2026-11-25T12:00:00Z",
                                   "updated_at": "2026-11-25T12:00:00Z"}},
        });
        let out = render_review(&decode(r));
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
            render_review(&decode(confirm)),
            "confirmed the provisional decision of debate D-2 (t) by bob\n  stands: margin 25%\n"
        );
        let redebate = json!({"facilitator": {
            "debate": {"debate_id": "D-3", "topic": "t"},
            "resolution": {"method": "gate_redebate", "decided_by": "bob"},
            "impact": null, "redebate_id": "D-3-r1"}});
        assert_eq!(
            render_review(&decode(redebate)),
            "sent debate D-3 (t) back to debate by bob\nre-debate opened: D-3-r1 (caucus debate D-3-r1)\n"
        );
    }
}
