//! A `coordinator.gate_review` reply as people read it.

use caucus_shared::api::coordinator::gates::GateReviewReply;
use caucus_shared::api::facilitator::{ImpactReport, ResolutionRecord};
use caucus_shared::messages::{Position, ResolutionMethod};

use super::super::render::{num, table, text, Align::Left};
use super::render::names;

/// A position as `statement (metric = value)`; `-` when there is none.
fn position(p: Option<&Position>) -> String {
    let Some(p) = p else {
        return "-".into();
    };
    let mut out = p.statement.clone();
    if let (Some(m), Some(v)) = (&p.metric, p.value.as_ref().filter(|v| !v.is_null())) {
        out.push_str(&format!(" ({m} = {})", text(v)));
    }
    out
}

/// A resolution method as the API spells it (`gate_confirm`, …).
fn method_name(m: ResolutionMethod) -> String {
    serde_json::to_value(m)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// An optional estimate for people; `-` when absent.
fn opt_num(x: Option<f64>) -> String {
    x.map(num).unwrap_or_else(|| "-".into())
}

/// A `coordinator.gate_review` reply as a person reads it: the action, the
/// debate, the value that now applies and, for an override, the impact:
/// which analyses change, old → new estimates, and what re-runs.
pub fn render_review(r: &GateReviewReply) -> String {
    let f = &r.facilitator;
    let res: Option<&ResolutionRecord> = f.resolution.as_ref();
    let who = match res.and_then(|r| r.decided_by.as_deref()) {
        Some(w) => format!(" by {w}"),
        None => String::new(),
    };
    let id = &f.debate.debate_id;
    let topic = &f.debate.topic;
    let now = position(res.and_then(|r| r.final_position.as_ref()));
    let mut out = match res.map(|r| r.method) {
        Some(ResolutionMethod::GateConfirm) => format!(
            "confirmed the provisional decision of debate {id} ({topic}){who}\n  stands: {now}\n"
        ),
        Some(ResolutionMethod::GateOverride) => format!(
            "overrode the provisional decision of debate {id} ({topic}){who}\n  now: {now}\n"
        ),
        Some(ResolutionMethod::GateRedebate) => {
            format!("sent debate {id} ({topic}) back to debate{who}\n")
        }
        other => format!(
            "debate {id} ({topic}): {}{who}\n  now: {now}\n",
            other.map_or_else(|| "reviewed".into(), method_name)
        ),
    };
    if let Some(why) = res.map(|r| r.rationale.as_str()).filter(|s| !s.is_empty()) {
        out.push_str(&format!("  rationale: {why}\n"));
    }
    if let Some(rep) = f.impact.as_ref().map(|i| &i.report) {
        out.push_str(&impact(rep));
    }
    if let Some(id) = &f.redebate_id {
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

/// An override's impact report: the changed assumption, how many analyses
/// it affects and each one's old → new estimate.
fn impact(rep: &ImpactReport) -> String {
    let ch = &rep.changed_assumption;
    let mut out = format!(
        "  {}: {} → {}\n",
        ch.metric,
        num(ch.old_value),
        num(ch.new_value)
    );
    out.push_str(&format!(
        "impact: {} analys{} affected, {} must re-run{}\n",
        rep.affected_count,
        if rep.affected_count == 1 { "is" } else { "es" },
        rep.high_impact_count,
        if rep.total_rerun_minutes > 0.0 {
            format!(" (about {} min)", num(rep.total_rerun_minutes))
        } else {
            String::new()
        }
    ));
    let rows: Vec<Vec<String>> = rep
        .impacts
        .iter()
        .map(|i| {
            vec![
                i.analysis_id.clone(),
                i.output_metric.clone(),
                format!(
                    "{} → {}",
                    opt_num(i.old_value),
                    opt_num(i.estimated_new_value)
                ),
                if i.requires_rerun { "re-run" } else { "update" }.into(),
                i.action.clone(),
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
    out
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn decode(v: Value) -> GateReviewReply {
        serde_json::from_value(v).expect("a gate_review reply")
    }

    /// The summary of debate `id` on `topic`.
    fn debate(id: &str, topic: &str) -> Value {
        json!({"debate_id": id, "challenge_id": "c", "topic": topic, "challenger": "a",
               "challenged": "b", "priority": "supporting", "level": 5, "state": "resolved",
               "snapshot_id": "s", "provisional": false, "opened_at": "2026-11-25T12:00:00Z"})
    }

    /// A level-5 resolution by `method`, its fields merged with `more`.
    fn resolution(method: &str, more: Value) -> Value {
        let mut r = json!({"debate_id": "D", "level": 5, "method": method, "label": "l",
            "binding": true, "provisional": false, "evidence_considered": [],
            "rationale": "", "confidence": 1.0, "impact": "", "override_window": {"status": "closed"},
            "snapshot_id": "s", "resolved_at": "2026-11-25T12:00:00Z"});
        for (k, v) in more.as_object().expect("an object") {
            r[k] = v.clone();
        }
        r
    }

    #[test]
    fn an_override_shows_its_impact_rounded() {
        let r = json!({
            "facilitator": {
                "debate": debate("D-1", "operating margin 25%"),
                "resolution": resolution("gate_override", json!({"decided_by": "alice",
                    "rationale": "guidance raised",
                    "final_position": {"statement": "operating_margin 28% (set at gate review)",
                                       "metric": "operating_margin", "value": 0.28}})),
                "impact": {
                    "report": {
                        "changed_assumption": {"metric": "operating_margin",
                                               "old_value": 0.25, "new_value": 0.28},
                        "affected_count": 2, "high_impact_count": 1,
                        "total_rerun_minutes": 12.333333,
                        "impacts": [
                            {"analysis_id": "AAPL/valuation", "kind": "valuation",
                             "output_metric": "target_price",
                             "old_value": 185.0, "estimated_new_value": 199.8000001, "delta": 0.08,
                             "requires_rerun": true, "rerun_minutes": 10.0, "action": "re-run"},
                            {"analysis_id": "AAPL/report", "kind": "other",
                             "output_metric": "confidence_score",
                             "old_value": 0.7, "estimated_new_value": 0.71666666, "delta": 0.02,
                             "requires_rerun": false, "rerun_minutes": 2.33, "action": "update figures"},
                        ],
                    },
                    "plan": {"required_reruns": [], "optional_updates": [],
                             "execution_strategy": "serial", "estimated_minutes": 12.3,
                             "blocking": true},
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
            "debate": debate("D-2", "t"),
            "resolution": resolution("gate_confirm", json!({"decided_by": "bob",
                           "final_position": {"statement": "margin 25%"}})),
            "impact": null, "redebate_id": null}});
        assert_eq!(
            render_review(&decode(confirm)),
            "confirmed the provisional decision of debate D-2 (t) by bob\n  stands: margin 25%\n"
        );
        let redebate = json!({"facilitator": {
            "debate": debate("D-3", "t"),
            "resolution": resolution("gate_redebate", json!({"decided_by": "bob"})),
            "impact": null, "redebate_id": "D-3-r1"}});
        assert_eq!(
            render_review(&decode(redebate)),
            "sent debate D-3 (t) back to debate by bob\nre-debate opened: D-3-r1 (caucus debate D-3-r1)\n"
        );
    }
}
