//! The `confirmation`s a completed task owes: one per finding in its
//! `inputs.findings` that asks for an answer (`requires_response`) and is
//! addressed to the task's agent type (see
//! [`caucus_shared::messages::addressing`]). Each goes to
//! `caucus.msg.<finding's from_agent>`, correlated by the finding's id, with
//! the finding's priority:
//!
//! * a built-in agent ([`FindingAnswers::Applied`]): a finding it applied is
//!   `used: true` with how as the note; any other `used: false`, "not
//!   applicable to the <agent type> analysis";
//! * an `exec:`/`http:` handler ([`FindingAnswers::Reported`]): its answer
//!   (`used`/`note` as returned), or, when it gave none, a receipt (`used`
//!   absent, "received by <agent type>; use not reported").
//!
//! Answers about findings that do not ask for one, or that the task never
//! received, are not sent. The id (envelope id and `Nats-Msg-Id`) is
//! `confirm:<finding id>:<agent type>`, so a re-run or redelivered task
//! does not confirm twice within the stream's duplicate window. Failed tasks
//! owe none: the coordinator alerts when an answer is overdue.

use caucus_shared::envelope::Envelope;
use caucus_shared::inbound::{input_findings, InputFinding};
use caucus_shared::messages::addressing::addresses;
use caucus_shared::messages::Confirmation;
use caucus_shared::task::TaskDispatch;

use crate::handler::FindingAnswers;

/// The longest `finding` text or `note` a confirmation carries (in
/// characters); longer ones are cut with an ellipsis.
pub const MAX_TEXT_CHARS: usize = 1000;

/// One confirmation to publish.
#[derive(Debug, Clone, PartialEq)]
pub struct OutgoingConfirmation {
    /// Who it goes to (`caucus.msg.<to_agent>`): the finding's sender.
    pub to_agent: String,
    /// `Nats-Msg-Id` (also the envelope id): `confirm:<finding id>:<agent type>`.
    pub msg_id: String,
    /// The message.
    pub envelope: Envelope,
}

/// The de-duplication id of `agent_type`'s confirmation of `finding_id`.
pub fn confirmation_id(finding_id: &str, agent_type: &str) -> String {
    format!("confirm:{finding_id}:{agent_type}")
}

/// The confirmations `task` owes, given its handler's `answers`, in the
/// order of its `inputs.findings`.
pub fn confirmations(task: &TaskDispatch, answers: &FindingAnswers) -> Vec<OutgoingConfirmation> {
    let agent_type = task.agent_type.as_str();
    input_findings(&task.inputs)
        .into_iter()
        .filter(|f| f.requires_response && addresses(&f.to_agent, agent_type))
        .filter_map(|f| {
            let (used, note) = answer(&f, agent_type, answers);
            build(&f, agent_type, used, note)
        })
        .collect()
}

/// `used` and `note` for finding `f`.
fn answer(
    f: &InputFinding,
    agent_type: &str,
    answers: &FindingAnswers,
) -> (Option<bool>, Option<String>) {
    match answers {
        FindingAnswers::Applied(list) => match list.iter().find(|a| a.finding_id == f.id) {
            Some(a) => (Some(true), Some(a.how.clone())),
            None => (
                Some(false),
                Some(format!("not applicable to the {agent_type} analysis")),
            ),
        },
        FindingAnswers::Reported(list) => match list.iter().find(|r| r.finding_id == f.id) {
            Some(r) => (r.used, r.note.clone()),
            None => (
                None,
                Some(format!("received by {agent_type}; use not reported")),
            ),
        },
    }
}

fn build(
    f: &InputFinding,
    agent_type: &str,
    used: Option<bool>,
    note: Option<String>,
) -> Option<OutgoingConfirmation> {
    let text = match f.text() {
        "" => f.id.as_str(),
        t => t,
    };
    let content = Confirmation {
        finding: cut(text),
        agrees: None,
        confidence: None,
        evidence: Vec::new(),
        used,
        in_reply_to: Some(f.id.clone()),
        note: note.map(|n| cut(&n)),
    };
    let msg_id = confirmation_id(&f.id, agent_type);
    let envelope = match Envelope::with_content(agent_type, &content) {
        Ok(e) => e,
        Err(e) => {
            // Only an empty finding id can get here (the text falls back
            // to it): nothing to correlate an answer with.
            tracing::warn!(finding_id = %f.id, error = %e, "confirmation not sent: invalid");
            return None;
        }
    };
    Some(OutgoingConfirmation {
        to_agent: f.from_agent.clone(),
        envelope: envelope
            .to(f.from_agent.clone())
            .with_priority(f.priority)
            .with_correlation_id(f.id.clone())
            .with_id(msg_id.clone()),
        msg_id,
    })
}

/// `s` cut to [`MAX_TEXT_CHARS`] characters.
fn cut(s: &str) -> String {
    match s.char_indices().nth(MAX_TEXT_CHARS) {
        None => s.to_string(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caucus_shared::envelope::{MessageType, Priority};
    use caucus_shared::inbound::{AppliedFinding, FindingResponse};
    use serde_json::{json, Value};

    fn finding(id: &str, to: &str, requires_response: bool, text: &str) -> Value {
        json!({
            "id": id, "from_agent": "financial_analyst", "to_agent": to,
            "priority": "high", "requires_response": requires_response,
            "content": {"finding": text, "confidence": 0.85, "impact": "Adjust FCF projections"},
            "stored_at": "2026-11-25T10:00:00Z"
        })
    }

    fn task(agent_type: &str, findings: Value) -> TaskDispatch {
        serde_json::from_value(json!({
            "task_id": "wf/valuation", "workflow_id": "wf", "item": "AAPL",
            "pipeline": "p", "stage": "valuation", "agent_type": agent_type,
            "attempt": 1, "inputs": {"findings": findings},
            "dispatched_at": "2025-11-16T10:30:00Z"
        }))
        .unwrap()
    }

    fn content(c: &OutgoingConfirmation) -> Confirmation {
        c.envelope.content_as().unwrap()
    }

    #[test]
    fn builtin_used_and_not_used() {
        let t = task(
            "valuation",
            json!([
                finding("f1", "valuation_agent", true, "Abnormal capex increase"),
                finding("f2", "valuation", true, "New CEO"),
            ]),
        );
        let answers = FindingAnswers::Applied(vec![AppliedFinding {
            finding_id: "f1".into(),
            how: "raised capex to 1.13× depreciation".into(),
        }]);
        let out = confirmations(&t, &answers);
        assert_eq!(out.len(), 2);
        let c1 = &out[0];
        assert_eq!(c1.to_agent, "financial_analyst");
        assert_eq!(c1.msg_id, "confirm:f1:valuation");
        assert_eq!(c1.envelope.id, c1.msg_id);
        assert_eq!(c1.envelope.message_type, MessageType::Confirmation);
        assert_eq!(c1.envelope.from_agent, "valuation");
        assert_eq!(c1.envelope.to_agent.as_deref(), Some("financial_analyst"));
        assert_eq!(c1.envelope.correlation_id.as_deref(), Some("f1"));
        assert_eq!(c1.envelope.priority, Priority::High);
        let k1 = content(c1);
        assert_eq!(k1.finding, "Abnormal capex increase");
        assert_eq!(k1.used, Some(true));
        assert_eq!(
            k1.note.as_deref(),
            Some("raised capex to 1.13× depreciation")
        );
        assert_eq!(k1.in_reply_to.as_deref(), Some("f1"));
        assert_eq!(k1.agrees, None);
        let k2 = content(&out[1]);
        assert_eq!(k2.used, Some(false));
        assert_eq!(
            k2.note.as_deref(),
            Some("not applicable to the valuation analysis")
        );
        assert_eq!(out[1].msg_id, "confirm:f2:valuation");
    }

    #[test]
    fn reported_answers_and_receipts() {
        let t = task(
            "valuation",
            json!([
                finding("f1", "valuation_agent", true, "Abnormal capex increase"),
                finding("f2", "all", true, ""),
            ]),
        );
        let answers = FindingAnswers::Reported(vec![
            FindingResponse {
                finding_id: "f1".into(),
                used: Some(false),
                note: Some("already priced in".into()),
            },
            // About a finding the task never received: not sent.
            FindingResponse {
                finding_id: "zzz".into(),
                used: Some(true),
                note: None,
            },
        ]);
        let out = confirmations(&t, &answers);
        assert_eq!(out.len(), 2);
        let k1 = content(&out[0]);
        assert_eq!(k1.used, Some(false));
        assert_eq!(k1.note.as_deref(), Some("already priced in"));
        let k2 = content(&out[1]);
        assert_eq!(k2.used, None);
        assert_eq!(
            k2.note.as_deref(),
            Some("received by valuation; use not reported")
        );
        assert_eq!(k2.finding, "f2", "no text: the id names the finding");
    }

    #[test]
    fn only_findings_asking_for_an_answer_and_addressed_here() {
        let t = task(
            "valuation",
            json!([
                finding("f1", "valuation_agent", false, "FYI"),
                finding("f2", "financial_agent", true, "not ours"),
                finding("f3", "Valuation_Analyst", true, "ours"),
            ]),
        );
        let out = confirmations(&t, &FindingAnswers::default());
        let ids: Vec<_> = out.iter().map(|c| c.msg_id.as_str()).collect();
        assert_eq!(ids, ["confirm:f3:valuation"]);
        let none = task("valuation", Value::Null);
        assert!(confirmations(&none, &FindingAnswers::default()).is_empty());
    }

    #[test]
    fn long_texts_are_cut() {
        let long = "é".repeat(MAX_TEXT_CHARS + 10);
        let t = task("valuation", json!([finding("f1", "all", true, &long)]));
        let answers = FindingAnswers::Reported(vec![FindingResponse {
            finding_id: "f1".into(),
            used: Some(true),
            note: Some(long.clone()),
        }]);
        let k = content(&confirmations(&t, &answers)[0]);
        assert_eq!(k.finding.chars().count(), MAX_TEXT_CHARS + 1);
        assert!(k.finding.ends_with('…'));
        assert_eq!(k.note.unwrap().chars().count(), MAX_TEXT_CHARS + 1);
    }
}
