//! `caucus debate <id>` as a person reads it: the challenge, both
//! positions, the evidence, the credibility assessment, the history and
//! the resolution.

use caucus_shared::api::facilitator::{
    CredibilityScore, DebateReply, L2Assessment, OverrideStatus, Side,
};
use caucus_shared::messages::Position;
use chrono::{DateTime, Utc};

use crate::render::{num, text};

/// A timestamp to the second, in UTC (`2026-11-25 14:58:57 UTC`).
fn at(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// A ratio 0..=1 as a whole percentage (`0.875` → `88%`).
fn percent(x: f64) -> String {
    crate::render::percent(&serde_json::Value::from(x))
}

/// The wire name of a serialisable enum (`credibility`, `gate_override`).
fn wire_name<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v).map_or_else(|_| "-".into(), |v| text(&v))
}

/// A position: `statement (metric = value, confidence 80%)`.
fn position(p: Option<&Position>) -> String {
    let Some(p) = p else {
        return "no position stated".into();
    };
    let mut out = p.statement.clone();
    let mut extra = Vec::new();
    if let (Some(m), Some(v)) = (&p.metric, p.value.as_ref().filter(|v| !v.is_null())) {
        extra.push(format!("{m} = {}", text(v)));
    }
    if let Some(c) = p.confidence {
        extra.push(format!("confidence {}", percent(c)));
    }
    if !extra.is_empty() {
        out.push_str(&format!(" ({})", extra.join(", ")));
    }
    out
}

/// A credibility score: `0.91 (0.84–0.95, 12 data points)`, and how often a
/// person overrode the agent when they did.
fn score(s: Option<&CredibilityScore>) -> String {
    let Some(s) = s else {
        return "-".into();
    };
    let n = s.sample_size;
    let mut out = format!(
        "{} ({}–{}, {n} data point{})",
        num(s.score),
        num(s.interval.lower),
        num(s.interval.upper),
        if n == 1 { "" } else { "s" }
    );
    if s.override_rate > 0.0 {
        out.push_str(&format!(", overridden {}", percent(s.override_rate)));
    }
    out
}

/// An L2 assessment in two lines (three with its reason).
fn assessment(a: &L2Assessment, challenger: &str, challenged: &str) -> Vec<String> {
    let mut out = vec![format!(
        "credibility: {challenger} {} vs {challenged} {}",
        score(a.challenger.as_ref()),
        score(a.challenged.as_ref()),
    )];
    let verdict = match (a.clear, a.favoured.map(Side::as_str)) {
        (true, Some(side)) => format!("clear, favours the {side}"),
        (false, Some(side)) => format!("not clear (leans to the {side})"),
        _ => "not clear".into(),
    };
    let mut l = format!(
        "  differential {} (required {}): {verdict}",
        num(a.differential),
        num(a.required),
    );
    if !a.sufficient_data {
        l.push_str("; too few data points");
    }
    out.push(l);
    if !a.reason.is_empty() {
        out.push(format!("  {}", a.reason));
    }
    out
}

/// A `facilitator.debate` reply (a whole debate) as a person reads it.
pub fn render_debate(reply: &DebateReply) -> String {
    let d = &reply.debate;
    let c = &d.challenge;
    let mut out = format!("Debate {}: {}\n", d.debate_id, c.disputed_finding);
    let mut about = Vec::new();
    if let Some(i) = &c.item {
        about.push(format!("item {i}"));
    }
    if let Some(w) = &c.workflow_id {
        about.push(format!("workflow {w}"));
    }
    about.push(format!("priority {}", c.priority.as_str()));
    if let Some(r) = &d.redebate_of {
        about.push(format!("re-debate of {r}"));
    }
    out.push_str(&format!("  {}\n", about.join(", ")));
    let mut state = format!("  level {}, {}", d.level, d.state.as_str());
    if let Some(e) = &d.expert {
        state.push_str(&format!(", expert {e}"));
    }
    if let Some(t) = &d.deadline {
        state.push_str(&format!(", deadline {}", at(t)));
    }
    out.push_str(&state);
    out.push('\n');
    // The challenge's own position stands in for a missing current one.
    let challenger_pos = d
        .challenger_position
        .as_ref()
        .or(c.challenger_position.as_ref());
    let challenged_pos = d
        .challenged_position
        .as_ref()
        .or(c.challenged_position.as_ref());
    let w = c
        .challenger
        .chars()
        .count()
        .max(c.challenged.chars().count());
    out.push_str(&format!(
        "  challenger {:<w$}  {}\n",
        c.challenger,
        position(challenger_pos)
    ));
    out.push_str(&format!(
        "  challenged {:<w$}  {}\n",
        c.challenged,
        position(challenged_pos)
    ));
    if !c.challenge_basis.is_empty() {
        out.push_str(&format!("  basis: {}\n", c.challenge_basis));
    }
    if !d.evidence.is_empty() {
        out.push_str(&format!("\nEvidence ({}):\n", d.evidence.len()));
        for e in &d.evidence {
            let given = if e.evidence.is_empty() {
                "-".to_string()
            } else {
                e.evidence.join(", ")
            };
            out.push_str(&format!(
                "  {}  {} ({}): {given}\n",
                at(&e.at),
                e.from,
                e.side.as_str(),
            ));
            if e.revised {
                out.push_str(&format!(
                    "    revised position: {}\n",
                    position(e.position.as_ref())
                ));
            }
            if !e.limitations.is_empty() {
                out.push_str(&format!("    limitations: {}\n", e.limitations.join(", ")));
            }
        }
    }
    let a = d
        .assessment
        .as_ref()
        .or(d.resolution.as_ref().and_then(|r| r.credibility.as_ref()));
    if let Some(a) = a {
        out.push('\n');
        for l in assessment(a, &c.challenger, &c.challenged) {
            out.push_str(&l);
            out.push('\n');
        }
    }
    if !d.history.is_empty() {
        out.push_str("\nHistory:\n");
        let w = d
            .history
            .iter()
            .map(|h| h.state.as_str().chars().count())
            .max()
            .unwrap_or(0);
        for h in &d.history {
            out.push_str(&format!(
                "  {}  L{} {:<w$}  {}\n",
                at(&h.at),
                h.level,
                h.state.as_str(),
                h.event,
            ));
        }
    }
    match &d.resolution {
        None => out.push_str("\nNot resolved yet.\n"),
        Some(r) => {
            out.push_str(&format!(
                "\nResolution: {} (method {}, level {}, {})\n",
                r.label,
                wire_name(&r.method),
                r.level,
                if r.provisional {
                    "provisional"
                } else if r.binding {
                    "binding"
                } else {
                    "not binding"
                },
            ));
            out.push_str(&format!(
                "  value: {}\n",
                position(r.final_position.as_ref())
            ));
            if let Some(who) = &r.winner {
                out.push_str(&format!("  stood: {who}\n"));
            }
            if !r.rationale.is_empty() {
                out.push_str(&format!("  rationale: {}\n", r.rationale));
            }
            out.push_str(&format!("  confidence: {}\n", num(r.confidence)));
            if let Some(who) = &r.decided_by {
                out.push_str(&format!("  decided by: {who}\n"));
            }
            if r.override_window.status == OverrideStatus::Open {
                let until = r.override_window.closes_at.as_ref().map_or("-".into(), at);
                out.push_str(&format!("  override window open until {until}\n"));
            }
            out.push_str(&format!("  resolved at: {}\n", at(&r.resolved_at)));
        }
    }
    for s in &d.superseded {
        out.push_str(&format!(
            "  replaced: {} ({}, level {})\n",
            position(s.final_position.as_ref()),
            s.label,
            s.level,
        ));
    }
    if !d.precedents.is_empty() {
        out.push_str(&format!("\nPrecedents ({}):\n", d.precedents.len()));
        for p in &d.precedents {
            out.push_str(&format!(
                "  {}  {}  → {} (similarity {})\n",
                p.debate_id,
                p.topic,
                p.outcome,
                num(p.similarity),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// A stored credibility score with the fields the text shows.
    fn scored(agent: &str, score: f64, lo: f64, hi: f64, n: u64, overridden: f64) -> Value {
        json!({"agent": agent, "score": score,
               "interval": {"lower": lo, "upper": hi, "half_width": (hi - lo) / 2.0},
               "simple": score, "simple_interval": {"lower": lo, "upper": hi, "half_width": 0.1},
               "sample_size": n, "total_records": n, "overall_accuracy": score,
               "context_match": 1.0, "context_weight": 0.3, "base_accuracy": score,
               "temporal_weight": 1.0, "override_rate": overridden, "override_penalty": 1.0})
    }

    fn debate() -> Value {
        json!({
            "schema_version": 1,
            "debate_id": "D-1",
            "challenge": {
                "challenge_id": "D-1",
                "challenger": "skeptic", "challenged": "financial_analysis",
                "disputed_finding": "operating margin 25%",
                "challenge_basis": "peers run at 22%", "escalation_timer": 3600,
                "priority": "critical-path", "item": "AAPL", "workflow_id": "wf-1",
                "challenger_position": {"statement": "margin 22%"},
            },
            "opened_at": "2026-11-25T14:00:00Z",
            "snapshot": {"snapshot_id": "snap_1", "taken_at": "2026-11-25T14:00:00Z",
                         "flushed": [], "unresponsive": []},
            "evidence_due": "2026-11-25T15:00:00Z",
            "level": 2, "state": "resolved",
            "challenger_position": {"statement": "margin 22%", "metric": "operating_margin",
                                    "value": 0.22, "confidence": 0.7},
            "challenged_position": {"statement": "margin 25%", "metric": "operating_margin",
                                    "value": 0.25, "confidence": 0.8512},
            "evidence": [{"from": "financial_analysis", "side": "challenged",
                          "evidence": ["10-K p. 41", "guidance"], "revised": false,
                          "at": "2026-11-25T14:00:01.5Z"}],
            "assessment": {
                "challenger": scored("skeptic", 0.512345, 0.40111, 0.6222, 9, 0.0),
                "challenged": scored("financial_analysis", 0.999997851310515, 0.9012, 1.0, 30, 0.25),
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
                "evidence_considered": [], "impact": "none",
                "rationale": "credibility differential 0.49 above 0.25",
                "confidence": 0.91234, "override_window": {"status": "not_applicable"},
                "snapshot_id": "snap_1",
                "resolved_at": "2026-11-25T14:05:01Z",
            },
            "metric": "operating_margin",
        })
    }

    fn render(v: Value) -> String {
        render_debate(&serde_json::from_value(v).expect("a debate reply"))
    }

    #[test]
    fn a_debate_reads_as_text() {
        let out = render(debate());
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
    fn an_open_debate_with_an_expert() {
        let mut d = debate();
        d["state"] = json!("awaiting_human");
        d["level"] = json!(3);
        d["expert"] = json!("alice");
        d["deadline"] = json!("2026-11-25T15:00:00Z");
        d["resolution"] = Value::Null;
        d["assessment"] = Value::Null;
        d["challenger_position"] = Value::Null;
        let out = render(d);
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
