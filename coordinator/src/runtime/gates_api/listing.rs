//! Pure decisions about the findings a decision package lists: which
//! findings belong (and from whom), the id each is known by, which arrived
//! after the analysis they address, what their answers say, and the
//! command that re-runs what a late finding arrived after.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

use caucus_shared::api::coordinator::gates::{FindingSource, LateFindingView, PackageFinding};
use caucus_shared::inbound::AppliedFinding;
use caucus_shared::messages::addressing::addresses;

use super::super::inbound::{LateFinding, ResponseRecord};

/// Late findings listed in one package, at most (the newest).
pub const MAX_LATE_FINDINGS: usize = 100;

/// Whether a finding on the item's subject belongs in the package of
/// workflow `workflow_id`, and from whom: one that names the workflow (its
/// `correlation_id` or `content.workflow_id`) was published by one of its
/// tasks; one addressed to an agent (`to_agent` set) came from outside
/// (a service, or another workflow's agent); any other is another
/// workflow's own finding and is left out.
pub fn source_of(
    workflow_id: &str,
    correlation_id: Option<&str>,
    content_workflow_id: Option<&str>,
    to_agent: Option<&str>,
) -> Option<FindingSource> {
    if correlation_id == Some(workflow_id) || content_workflow_id == Some(workflow_id) {
        return Some(FindingSource::Agent);
    }
    match to_agent {
        Some(t) if !t.trim().is_empty() => Some(FindingSource::Outside),
        _ => None,
    }
}

/// The id a stored message is known by: its envelope `id`; for a body
/// without one (outside services may leave it out, and decoding would make
/// up a new one on every read), its `Nats-Msg-Id`, else its place in the
/// stream, `<stream>:<sequence>` (stable across reads and coordinators).
pub fn message_id(
    body_id: Option<&str>,
    header_id: Option<&str>,
    stream: &str,
    sequence: u64,
) -> String {
    body_id
        .or(header_id)
        .filter(|id| !id.trim().is_empty())
        .map_or_else(|| format!("{stream}:{sequence}"), str::to_string)
}

/// A completed task of the workflow, as late-finding decisions need it.
#[derive(Debug, Clone, PartialEq)]
pub struct DoneTask {
    /// Its stage.
    pub stage: String,
    /// The agent type that ran it.
    pub agent_type: String,
    /// When it completed.
    pub finished_at: DateTime<Utc>,
}

/// The stages of `done` a finding addressed to `to_agent` and stored at
/// `stored_at` arrived after: completed tasks of an agent type it
/// addresses that finished before it was stored (their analysis did not
/// see it; re-running them would apply it). Sorted, each once; empty when
/// the finding is not late (or has no addressee or storage time).
pub fn late_stages(
    done: &[DoneTask],
    to_agent: Option<&str>,
    stored_at: Option<DateTime<Utc>>,
) -> Vec<String> {
    let (Some(to), Some(at)) = (to_agent, stored_at) else {
        return Vec::new();
    };
    done.iter()
        .filter(|t| !t.agent_type.is_empty())
        .filter(|t| t.finished_at < at && addresses(to, &t.agent_type))
        .map(|t| t.stage.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Marks `f` late with the stages it arrived after (see [`late_stages`]).
pub fn mark_late(f: &mut PackageFinding, done: &[DoneTask]) {
    f.rerun_stages = late_stages(done, f.to_agent.as_deref(), f.stored_at);
    f.late = !f.rerun_stages.is_empty();
}

/// Sets what `f`'s answer says: `answered` only when a response was asked
/// for (null otherwise), `used` and `answer_note` from the confirmation.
/// `rec` is the `responses` entry of the finding's envelope id; none (or no
/// bucket) reads as "awaiting answer".
pub fn apply_answer(f: &mut PackageFinding, rec: Option<&ResponseRecord>) {
    let answer = rec.and_then(|r| r.answer.as_ref());
    f.answered = f.requires_response.then_some(answer.is_some());
    if let Some(a) = answer {
        f.used = a.used;
        f.answer_note = a.note.clone();
    }
}

/// Marks `f` used when a completed task of the workflow listed its
/// envelope id in `applied_findings` (`applied`: id → how); the task's
/// own words stand in for a note the confirmation did not give.
pub fn apply_applied(f: &mut PackageFinding, envelope_id: &str, applied: &HashMap<String, String>) {
    if let Some(how) = applied.get(envelope_id) {
        f.used = Some(true);
        if f.answer_note.is_none() {
            f.answer_note = Some(how.clone());
        }
    }
}

/// The part of a task's output that lists the findings it applied.
#[derive(Debug, Default, Deserialize)]
struct AppliedPart {
    #[serde(default)]
    applied_findings: Vec<AppliedFinding>,
}

/// The findings a task output lists in `applied_findings` (id → how);
/// none when the output has no such list or it does not read.
pub fn applied_in(output: &Value) -> Vec<AppliedFinding> {
    AppliedPart::deserialize(output)
        .map(|p| p.applied_findings)
        .unwrap_or_default()
}

/// The single-quoted shell spelling of `s`, unless it needs no quotes.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.,/:@=+".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The CLI command that sends workflow `workflow_id`'s work back from gate
/// `gate` to `stages`, naming the finding it applies.
pub fn rerun_command(workflow_id: &str, gate: &str, stages: &[String], finding_id: &str) -> String {
    format!(
        "caucus gate send-back {} --gate {} --to {} --rationale {}",
        shell_word(workflow_id),
        shell_word(gate),
        shell_word(&stages.join(",")),
        shell_word(&format!("apply late finding {finding_id}")),
    )
}

/// A late-finding flag as the package shows it. Only stages upstream of
/// the gate can be sent back from it (`upstream`); when none of the flag's
/// stages is, the command names them all and the coordinator says why it
/// refuses.
pub fn late_view(
    lf: LateFinding,
    workflow_id: &str,
    gate: &str,
    upstream: &BTreeSet<String>,
) -> LateFindingView {
    let mut targets: Vec<String> = lf
        .stages
        .iter()
        .filter(|s| upstream.contains(*s))
        .cloned()
        .collect();
    if targets.is_empty() {
        targets = lf.stages.clone();
    }
    LateFindingView {
        rerun: rerun_command(workflow_id, gate, &targets, &lf.id),
        id: lf.id,
        from_agent: lf.from_agent,
        to_agent: lf.to_agent,
        priority: lf.priority,
        finding: lf.finding,
        impact: lf.impact,
        stages: lf.stages,
        stored_at: lf.stored_at,
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;
    use serde_json::json;

    use caucus_shared::envelope::Priority;

    use super::super::super::inbound::Answer;
    use super::*;

    fn at(min: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 25, 12, min, 0).unwrap()
    }

    fn finding(id: Option<&str>, to: Option<&str>, text: &str) -> PackageFinding {
        PackageFinding {
            from_agent: "financial_analyst".into(),
            finding: text.into(),
            confidence: Some(0.85),
            evidence: vec!["10-K p.47".into()],
            impact: None,
            metric: None,
            value: None,
            timestamp: None,
            finding_id: id.map(str::to_string),
            to_agent: to.map(str::to_string),
            priority: Some(Priority::High),
            source: FindingSource::Outside,
            stored_at: Some(at(30)),
            late: false,
            rerun_stages: Vec::new(),
            requires_response: false,
            answered: None,
            used: None,
            answer_note: None,
        }
    }

    #[test]
    fn the_workflows_own_findings_are_agents_and_addressed_ones_are_outside() {
        let src = |c, w, t| source_of("wf-1", c, w, t);
        assert_eq!(src(Some("wf-1"), None, None), Some(FindingSource::Agent));
        assert_eq!(src(None, Some("wf-1"), None), Some(FindingSource::Agent));
        assert_eq!(
            src(Some("wf-1"), None, Some("valuation_agent")),
            Some(FindingSource::Agent),
            "naming the workflow wins over an addressee"
        );
        assert_eq!(
            src(None, None, Some("valuation_agent")),
            Some(FindingSource::Outside)
        );
        assert_eq!(
            src(Some("wf-2"), Some("wf-2"), Some("all")),
            Some(FindingSource::Outside),
            "another workflow's agent addressing one of ours"
        );
        assert_eq!(
            src(Some("wf-2"), None, None),
            None,
            "another workflow's own finding"
        );
        assert_eq!(src(None, None, Some("  ")), None, "a blank addressee");
    }

    #[test]
    fn a_message_without_an_id_is_named_by_its_place_in_the_stream() {
        assert_eq!(message_id(Some("m-1"), Some("h-1"), "FINDINGS", 7), "m-1");
        assert_eq!(message_id(None, Some("h-1"), "FINDINGS", 7), "h-1");
        assert_eq!(message_id(None, None, "FINDINGS", 7), "FINDINGS:7");
        assert_eq!(message_id(Some(" "), None, "FINDINGS", 7), "FINDINGS:7");
    }

    #[test]
    fn a_finding_stored_after_its_addressees_task_completed_is_late() {
        let done = [
            DoneTask {
                stage: "dcf_valuation".into(),
                agent_type: "valuation".into(),
                finished_at: at(10),
            },
            DoneTask {
                stage: "financials".into(),
                agent_type: "financial".into(),
                finished_at: at(20),
            },
            DoneTask {
                stage: "comps".into(),
                agent_type: "valuation".into(),
                finished_at: at(40),
            },
            DoneTask {
                stage: "first_gate".into(),
                agent_type: String::new(),
                finished_at: at(15),
            },
        ];
        assert_eq!(
            late_stages(&done, Some("valuation_agent"), Some(at(30))),
            ["dcf_valuation"],
            "comps completed after the finding was stored: it saw it"
        );
        assert_eq!(
            late_stages(&done, Some("all"), Some(at(30))),
            ["dcf_valuation", "financials"],
            "`all` is every agent type, not a stage without an agent"
        );
        assert!(late_stages(&done, Some("strategy"), Some(at(30))).is_empty());
        assert!(late_stages(&done, None, Some(at(30))).is_empty());
        assert!(late_stages(&done, Some("valuation"), None).is_empty());
        assert!(
            late_stages(&done, Some("valuation"), Some(at(5))).is_empty(),
            "stored before any analysis"
        );
        let mut f = finding(Some("m-1"), Some("valuation_agent"), "capex");
        mark_late(&mut f, &done);
        assert!(f.late);
        assert_eq!(f.rerun_stages, ["dcf_valuation"]);
    }

    fn record(answer: Option<Answer>) -> ResponseRecord {
        ResponseRecord {
            schema_version: 1,
            message_id: "m-1".into(),
            message_type: "finding".into(),
            from_agent: "financial_analyst".into(),
            to_agent: "valuation_agent".into(),
            item: "AAPL".into(),
            priority: Priority::High,
            text: "capex".into(),
            stored_at: at(30),
            due_at: at(59),
            answer,
            alerted_at: None,
        }
    }

    #[test]
    fn answered_is_asked_only_when_a_response_was_required() {
        let mut f = finding(Some("m-1"), Some("valuation"), "capex");
        apply_answer(&mut f, None);
        assert_eq!(f.answered, None, "no response asked");

        f.requires_response = true;
        apply_answer(&mut f, None);
        assert_eq!(f.answered, Some(false), "no record: awaiting answer");
        apply_answer(&mut f, Some(&record(None)));
        assert_eq!(f.answered, Some(false));
        assert_eq!(f.used, None);

        let answer = Answer {
            by: "valuation".into(),
            used: Some(true),
            note: Some("FCF capex +12%".into()),
            confirmation_id: "c-1".into(),
            at: at(31),
        };
        apply_answer(&mut f, Some(&record(Some(answer.clone()))));
        assert_eq!(f.answered, Some(true));
        assert_eq!(f.used, Some(true));
        assert_eq!(f.answer_note.as_deref(), Some("FCF capex +12%"));

        let mut g = finding(Some("m-1"), Some("valuation"), "capex");
        g.requires_response = true;
        let receipt = Answer {
            used: None,
            note: Some("received by valuation; use not reported".into()),
            ..answer
        };
        apply_answer(&mut g, Some(&record(Some(receipt))));
        assert_eq!(
            (g.answered, g.used),
            (Some(true), None),
            "a receipt answers without saying whether it was used"
        );
    }

    #[test]
    fn a_finding_a_task_applied_is_used() {
        let applied = applied_in(&json!({
            "target_price": 85.0,
            "applied_findings": [{"finding_id": "m-1", "how": "capex +12% in FCF"}],
        }));
        assert_eq!(applied.len(), 1);
        assert!(applied_in(&json!({"applied_findings": "odd"})).is_empty());
        assert!(applied_in(&json!(42)).is_empty());
        let by_id: HashMap<String, String> =
            applied.into_iter().map(|a| (a.finding_id, a.how)).collect();

        let mut f = finding(Some("m-1"), Some("valuation"), "capex");
        apply_applied(&mut f, "m-1", &by_id);
        assert_eq!(f.used, Some(true));
        assert_eq!(f.answer_note.as_deref(), Some("capex +12% in FCF"));

        let mut g = finding(Some("m-2"), Some("valuation"), "other");
        apply_applied(&mut g, "m-2", &by_id);
        assert_eq!(g.used, None, "not listed: use not reported");
    }

    #[test]
    fn a_late_finding_names_the_send_back_that_applies_it() {
        let lf = LateFinding {
            id: "m-1".into(),
            from_agent: "financial_analyst".into(),
            to_agent: "all".into(),
            priority: Priority::Critical,
            finding: "Abnormal capex increase".into(),
            impact: Some("Adjust FCF projections".into()),
            stages: vec!["dcf_valuation".into(), "side_branch".into()],
            stored_at: at(30),
        };
        let upstream: BTreeSet<String> = ["dcf_valuation".to_string(), "financials".to_string()]
            .into_iter()
            .collect();
        let v = late_view(lf.clone(), "wf-1", "review", &upstream);
        assert_eq!(
            v.rerun,
            "caucus gate send-back wf-1 --gate review --to dcf_valuation \
             --rationale 'apply late finding m-1'"
        );
        assert_eq!(v.stages, ["dcf_valuation", "side_branch"]);
        let none = late_view(lf, "wf 1", "review", &BTreeSet::new());
        assert!(
            none.rerun.starts_with(
                "caucus gate send-back 'wf 1' --gate review --to dcf_valuation,side_branch "
            ),
            "{}",
            none.rerun
        );
        assert_eq!(
            shell_word("it's"),
            r"'it'\''s'",
            "a quote inside is closed, escaped, reopened"
        );
    }
}
