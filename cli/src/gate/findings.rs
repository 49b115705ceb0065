//! The findings of a decision package as a person reads them: every agent
//! finding about the item (this workflow's agents' and those outside
//! services or other agents addressed to ours) with its confidence,
//! supporting evidence and implications, whether it arrived after the
//! analysis, was used and was answered; then the findings that arrived
//! after the analysis, each with the re-run that applies it.

use chrono::{DateTime, Utc};

use caucus_shared::api::coordinator::gates::{FindingSource, LateFindingView, PackageFinding};

use super::super::render::num;

/// Findings shown, at most (the newest); the rest are counted.
pub const SHOWN_FINDINGS: usize = 50;
/// Late findings shown, at most (the newest); the rest are counted.
pub const SHOWN_LATE: usize = 50;

/// A timestamp to the second, in UTC (as `render::when` shows one).
fn at(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// `from → to`, or just `from` for a finding addressed to no one.
fn route(from: &str, to: Option<&str>) -> String {
    match to {
        Some(to) => format!("{from} → {to}"),
        None => from.to_string(),
    }
}

/// What the addressee said about it: `used: how`, `not used: why` or `use
/// not reported`, then `answered` / `awaiting answer` when a response was
/// asked for. `None` when nothing is known or expected (a finding of the
/// workflow's own agents addressed to no one).
fn answer_line(f: &PackageFinding) -> Option<String> {
    let note = f
        .answer_note
        .as_deref()
        .map(|n| format!(": {n}"))
        .unwrap_or_default();
    let used = match f.used {
        Some(true) => format!("used{note}"),
        Some(false) => format!("not used{note}"),
        None if f.to_agent.is_none() && !f.requires_response => return None,
        None => "use not reported".into(),
    };
    Some(match f.answered {
        Some(true) => format!("{used}; answered"),
        Some(false) => format!("{used}; awaiting answer"),
        None => used,
    })
}

/// One finding: who to whom, priority, text and confidence, and the late
/// marker; then its supporting evidence, implications and answer.
fn finding(f: &PackageFinding) -> String {
    let priority = f
        .priority
        .map(|p| format!(", priority {}", p.as_str()))
        .unwrap_or_default();
    let late = if f.late {
        format!(
            "  LATE: arrived after the analysis of {}",
            f.rerun_stages.join(", ")
        )
    } else {
        String::new()
    };
    let mut out = format!(
        "  [{}] {}{priority}: {} (confidence {}){late}\n",
        f.source.as_str(),
        route(&f.from_agent, f.to_agent.as_deref()),
        f.finding,
        f.confidence.map_or_else(|| "?".to_string(), num),
    );
    if !f.evidence.is_empty() {
        out.push_str(&format!(
            "      supporting evidence: {}\n",
            f.evidence.join("; ")
        ));
    }
    if let Some(i) = f.impact.as_deref().filter(|i| !i.is_empty()) {
        out.push_str(&format!("      implications: {i}\n"));
    }
    if let Some(a) = answer_line(f) {
        out.push_str(&format!("      {a}\n"));
    }
    out
}

/// The package's findings, the newest [`SHOWN_FINDINGS`] (oldest first),
/// with how many come from outside and how many are not shown.
pub fn render_findings(findings: &[PackageFinding], workflow_id: &str) -> String {
    let outside = findings
        .iter()
        .filter(|f| f.source == FindingSource::Outside)
        .count();
    let late = findings.iter().filter(|f| f.late).count();
    let mut out = format!(
        "\nFindings ({}: {} from this workflow's agents, {outside} from outside{}):\n",
        findings.len(),
        findings.len() - outside,
        if late > 0 {
            format!(", {late} late")
        } else {
            String::new()
        },
    );
    let hidden = findings.len().saturating_sub(SHOWN_FINDINGS);
    if hidden > 0 {
        out.push_str(&format!(
            "  ({hidden} older not shown; caucus gate show {workflow_id} --json lists them all)\n"
        ));
    }
    for f in &findings[hidden..] {
        out.push_str(&finding(f));
    }
    out
}

/// The findings that arrived after the analysis (the newest
/// [`SHOWN_LATE`]), each with the re-run that applies it; nothing when
/// there are none.
pub fn render_late(late: &[LateFindingView]) -> String {
    if late.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\nArrived after the analysis ({}), flagged for potential re-evaluation (approval is not blocked):\n",
        late.len()
    );
    let hidden = late.len().saturating_sub(SHOWN_LATE);
    if hidden > 0 {
        out.push_str(&format!("  ({hidden} older not shown)\n"));
    }
    for l in &late[hidden..] {
        out.push_str(&format!(
            "  {}, priority {}, stored {}: {}\n",
            route(&l.from_agent, Some(&l.to_agent)),
            l.priority.as_str(),
            at(l.stored_at),
            l.finding,
        ));
        if let Some(i) = l.impact.as_deref().filter(|i| !i.is_empty()) {
            out.push_str(&format!("      implications: {i}\n"));
        }
        out.push_str(&format!(
            "      after the analysis of: {}\n      re-run: {}\n",
            l.stages.join(", "),
            l.rerun
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn outside(v: serde_json::Value) -> PackageFinding {
        let mut base = json!({
            "from_agent": "financial_analyst", "to_agent": "valuation_agent",
            "priority": "high", "source": "outside",
            "finding": "Abnormal capex increase", "confidence": 0.85,
            "evidence": ["10-K p.47", "CFO commentary"], "impact": "Adjust FCF projections",
            "timestamp": null, "finding_id": "m-1", "stored_at": "2026-11-25T12:30:00Z",
            "requires_response": true, "answered": false,
        });
        for (k, x) in v.as_object().unwrap() {
            base[k] = x.clone();
        }
        serde_json::from_value(base).expect("a package finding")
    }

    #[test]
    fn an_outside_finding_shows_route_priority_evidence_and_answer() {
        let f = outside(json!({}));
        assert_eq!(
            finding(&f),
            "  [outside] financial_analyst → valuation_agent, priority high: \
             Abnormal capex increase (confidence 0.85)\n      \
             supporting evidence: 10-K p.47; CFO commentary\n      \
             implications: Adjust FCF projections\n      \
             use not reported; awaiting answer\n"
        );
        let f = outside(json!({"late": true, "rerun_stages": ["dcf_valuation"],
                               "answered": true, "used": true, "answer_note": "capex +12%"}));
        let out = finding(&f);
        assert!(
            out.contains("LATE: arrived after the analysis of dcf_valuation"),
            "{out}"
        );
        assert!(out.contains("used: capex +12%; answered"), "{out}");
        let f = outside(json!({"used": false, "answer_note": "not relevant", "answered": true}));
        assert!(finding(&f).contains("not used: not relevant; answered"));
        let f = outside(json!({"requires_response": false, "answered": null}));
        assert!(
            finding(&f).ends_with("      use not reported\n"),
            "no response asked: no answer state"
        );
    }

    #[test]
    fn an_own_finding_addressed_to_no_one_has_no_answer_line() {
        // An older coordinator's reply: none of the new fields.
        let f: PackageFinding = serde_json::from_value(json!({
            "from_agent": "financial", "finding": "margin 25%", "confidence": 0.8333,
            "evidence": [], "timestamp": null}))
        .expect("an older reply still reads");
        assert_eq!(
            finding(&f),
            "  [agent] financial: margin 25% (confidence 0.83)\n"
        );
    }

    #[test]
    fn the_findings_list_is_bounded_to_the_newest() {
        let mut all: Vec<PackageFinding> = (0..SHOWN_FINDINGS + 3)
            .map(|i| outside(json!({"finding": format!("f{i}")})))
            .collect();
        all[0].source = FindingSource::Agent;
        let out = render_findings(&all, "wf-1");
        assert!(
            out.starts_with("\nFindings (53: 1 from this workflow's agents, 52 from outside):\n"),
            "{out}"
        );
        assert!(out.contains("(3 older not shown;"), "{out}");
        assert!(!out.contains(": f2 "), "{out}");
        assert!(out.contains(": f3 (") && out.contains(": f52 ("), "{out}");
    }

    #[test]
    fn late_findings_name_their_rerun() {
        let l: LateFindingView = serde_json::from_value(json!({
            "id": "m-1", "from_agent": "financial_analyst", "to_agent": "valuation_agent",
            "priority": "critical", "finding": "Abnormal capex increase",
            "impact": "Adjust FCF projections", "stages": ["dcf_valuation"],
            "stored_at": "2026-11-25T12:30:00Z",
            "rerun": "caucus gate send-back wf-1 --gate review --to dcf_valuation --rationale 'apply late finding m-1'",
        }))
        .unwrap();
        assert_eq!(render_late(&[]), "");
        assert_eq!(
            render_late(&[l]),
            "\nArrived after the analysis (1), flagged for potential re-evaluation (approval is not blocked):\n  \
             financial_analyst → valuation_agent, priority critical, stored 2026-11-25 12:30:00 UTC: Abnormal capex increase\n      \
             implications: Adjust FCF projections\n      \
             after the analysis of: dcf_valuation\n      \
             re-run: caucus gate send-back wf-1 --gate review --to dcf_valuation --rationale 'apply late finding m-1'\n"
        );
    }
}
