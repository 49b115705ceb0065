//! The answer to a request, built from its finished workflow (pure): a
//! `finding` addressed to the requester with the task's output as its
//! value (completed only), a `confirmation` closing the request either way,
//! and the flag that marks the workflow answered.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use caucus_shared::envelope::Envelope;
use caucus_shared::messages::{Confirmation, Finding};

use super::params::RequestParams;
use crate::runtime::submissions::derived_uuid;
use crate::workflow::{TaskRunState, WorkflowFlag, WorkflowRecord, WorkflowState};

/// Flag kind marking a request workflow answered.
pub const ANSWERED_FLAG: &str = "request_answered";
/// Characters of the query quoted in the finding's one-line summary.
const QUERY_CHARS: usize = 200;

/// `Nats-Msg-Id` (and flag id) of the answer finding.
pub fn finding_msg_id(request_id: &str) -> String {
    format!("answer:{request_id}")
}

/// `Nats-Msg-Id` of the answer confirmation.
pub fn confirmation_msg_id(request_id: &str) -> String {
    format!("answer-confirm:{request_id}")
}

/// The answer finding's envelope id (derived: a retried answer names the
/// same finding in its confirmation).
pub fn finding_id(request_id: &str) -> String {
    derived_uuid("caucus/request-answer/v1", &[request_id.as_bytes()])
}

/// Whether `env` is a request's answer finding (its id is the one derived
/// from its `correlation_id`). Its addressee is the requester, which may
/// be an outside service rather than an agent type: the findings consumer
/// must not dead-letter it as unaddressable.
pub fn is_answer_finding(env: &Envelope) -> bool {
    env.correlation_id
        .as_deref()
        .is_some_and(|c| env.id == finding_id(c))
}

fn confirmation_id(request_id: &str) -> String {
    derived_uuid("caucus/request-confirm/v1", &[request_id.as_bytes()])
}

/// The flag's `detail`: which request was answered, how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnsweredDetail {
    /// `answer:<request id>` (flags are de-duplicated by it).
    pub id: String,
    /// The request's envelope id.
    pub request_id: String,
    /// Who was answered.
    pub requester: String,
    /// `completed` or `failed`.
    pub outcome: String,
    /// The answer finding's id (completed only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding_id: Option<String>,
    /// The item's unfinished workflow the request was linked to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linked_workflow_id: Option<String>,
}

/// Stands in for a task output too large to carry in the finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OmittedOutput {
    /// Always true.
    pub truncated: bool,
    /// Size of the output as JSON.
    pub bytes: usize,
    /// The task: `coordinator.status` with `ids` and `tasks` returns it.
    pub task_id: String,
}

/// What to publish, and the flag to add once both are stored.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The item (the finding's subject is `caucus.findings.<item>`).
    pub item: String,
    /// The finding for `caucus.findings.<item>` (completed workflows).
    pub finding: Option<Envelope>,
    /// The confirmation for `caucus.msg.<requester>`.
    pub confirmation: Envelope,
    /// Marks the workflow answered.
    pub flag: WorkflowFlag,
}

fn bounded(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// The output as the finding's value, or an [`OmittedOutput`] when its
/// JSON is over `max_bytes`.
fn bounded_output(output: &Value, task_id: String, max_bytes: usize) -> Value {
    let bytes = serde_json::to_vec(output).map(|b| b.len()).unwrap_or(0);
    if bytes <= max_bytes {
        return output.clone();
    }
    serde_json::to_value(OmittedOutput {
        truncated: true,
        bytes,
        task_id,
    })
    .expect("a plain struct serialises")
}

/// The agent's output's own `confidence` when it is a number in 0..=1,
/// else 1.0 (the task completed). A lenient read of a field of the
/// agent's output (not a shape the coordinator owns).
fn confidence_of(output: &Value) -> f64 {
    output
        .get("confidence")
        .and_then(Value::as_f64)
        .filter(|c| (0.0..=1.0).contains(c))
        .unwrap_or(1.0)
}

/// The confirmation that closes `req`: `agrees`/`used` true on success,
/// false with `note` on failure.
pub fn confirmation(
    req: &RequestParams,
    agent_type: &str,
    ok: bool,
    note: String,
    now: DateTime<Utc>,
) -> Envelope {
    let content = Confirmation {
        finding: req.query.clone(),
        agrees: Some(ok),
        confidence: None,
        evidence: Vec::new(),
        used: Some(ok),
        in_reply_to: Some(req.request_id.clone()),
        note: Some(note),
    };
    Envelope::with_content(agent_type, &content)
        .expect("a request's query is not empty")
        .with_id(confirmation_id(&req.request_id))
        .to(req.from_agent.clone())
        .with_priority(req.priority)
        .with_correlation_id(req.request_id.clone())
        .with_timestamp(now)
}

/// The answer to `req` from its finished workflow `rec` (None while it
/// runs). `link` is the item's unfinished workflow it was linked to;
/// outputs over `max_value_bytes` are replaced by an [`OmittedOutput`].
pub fn answer(
    rec: &WorkflowRecord,
    req: &RequestParams,
    link: Option<&str>,
    max_value_bytes: usize,
    now: DateTime<Utc>,
) -> Option<Answer> {
    let (key, task) = rec.tasks.iter().next()?;
    let agent_type = task.agent_type.as_str();
    let linked = link
        .map(|l| format!(" (linked to workflow {l})"))
        .unwrap_or_default();
    let completed = match rec.state {
        WorkflowState::Completed if task.state == TaskRunState::Completed => true,
        WorkflowState::Completed | WorkflowState::Failed => false,
        _ => return None,
    };
    let mut detail = AnsweredDetail {
        id: finding_msg_id(&req.request_id),
        request_id: req.request_id.clone(),
        requester: req.from_agent.clone(),
        outcome: if completed { "completed" } else { "failed" }.into(),
        finding_id: None,
        linked_workflow_id: link.map(str::to_string),
    };
    let (finding, note) = if completed {
        let output = task.output.clone().unwrap_or(Value::Null);
        let mut content = Finding::new(
            format!(
                "{agent_type} answer to: {}",
                bounded(&req.query, QUERY_CHARS)
            ),
            confidence_of(&output),
        );
        content.item = Some(rec.item.clone());
        content.workflow_id = Some(rec.workflow_id.clone());
        content.value = Some(bounded_output(&output, rec.task_id(key), max_value_bytes));
        let id = finding_id(&req.request_id);
        let env = Envelope::with_content(agent_type, &content)
            .expect("the summary is not empty and the confidence is in 0..=1")
            .with_id(id.clone())
            .to(req.from_agent.clone())
            .with_priority(req.priority)
            .with_correlation_id(req.request_id.clone())
            .with_timestamp(now);
        let note = format!(
            "answered by workflow {}; finding {id}{linked}",
            rec.workflow_id
        );
        detail.finding_id = Some(id);
        (Some(env), note)
    } else {
        let why = rec
            .failure
            .clone()
            .unwrap_or_else(|| format!("workflow {} failed", rec.workflow_id));
        (None, format!("{why}{linked}"))
    };
    Some(Answer {
        item: rec.item.clone(),
        finding,
        confirmation: confirmation(req, agent_type, completed, note, now),
        flag: WorkflowFlag {
            kind: ANSWERED_FLAG.into(),
            at: now,
            detail: serde_json::to_value(&detail).expect("a plain struct serialises"),
        },
    })
}

/// Whether `rec` carries an answered flag (a request workflow carries only
/// its own: the cheap test before its params are read).
pub fn has_answered_flag(rec: &WorkflowRecord) -> bool {
    rec.flags.iter().any(|f| f.kind == ANSWERED_FLAG)
}

/// Whether `rec` carries the answered flag of `request_id`.
pub fn is_answered(rec: &WorkflowRecord, request_id: &str) -> bool {
    let id = finding_msg_id(request_id);
    rec.flags.iter().any(|f| {
        f.kind == ANSWERED_FLAG
            && serde_json::from_value::<AnsweredDetail>(f.detail.clone()).is_ok_and(|d| d.id == id)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::pipelines::stages_of;
    use crate::runtime::requests::params::pipeline_for;
    use crate::workflow::instantiate;
    use caucus_shared::envelope::{MessageType, Priority};
    use caucus_shared::messages::Request;
    use serde_json::json;

    fn req(priority: Priority) -> RequestParams {
        let content: Request = serde_json::from_value(json!({
            "query": "What is AAPL's fair value?",
            "item": "AAPL"
        }))
        .unwrap();
        RequestParams::new("r-1", "financial_analyst", priority, &content, None)
    }

    fn record(r: &RequestParams) -> WorkflowRecord {
        let now = Utc::now();
        let spec = pipeline_for("valuation", r, now, 1_000);
        instantiate(
            "wf-1".into(),
            "AAPL".into(),
            spec.name.clone(),
            stages_of(&spec).unwrap(),
            1_000,
            now,
        )
    }

    fn complete(rec: &mut WorkflowRecord, output: Value) {
        let t = rec.tasks.get_mut("valuation").unwrap();
        t.state = TaskRunState::Completed;
        t.output = Some(output);
        rec.state = WorkflowState::Completed;
    }

    #[test]
    fn a_completed_request_answers_with_a_finding_and_a_confirmation() {
        let r = req(Priority::High);
        let mut rec = record(&r);
        assert!(
            answer(&rec, &r, None, 1 << 20, Utc::now()).is_none(),
            "running"
        );
        complete(&mut rec, json!({"fair_value": 212.5, "confidence": 0.7}));
        let a = answer(&rec, &r, Some("wf-parent"), 1 << 20, Utc::now()).unwrap();
        let f = a.finding.expect("a finding");
        assert_eq!(f.message_type, MessageType::Finding);
        assert_eq!(f.from_agent, "valuation");
        assert_eq!(f.to_agent.as_deref(), Some("financial_analyst"));
        assert_eq!(f.correlation_id.as_deref(), Some("r-1"));
        assert_eq!(f.priority, Priority::High);
        assert_eq!(f.id, finding_id("r-1"));
        assert!(is_answer_finding(&f));
        let mut other = f.clone();
        other.correlation_id = Some("r-2".into());
        assert!(!is_answer_finding(&other), "id not derived from r-2");
        other.correlation_id = None;
        assert!(!is_answer_finding(&other));
        let fc: Finding = f.content_as().unwrap();
        assert_eq!(
            fc.finding,
            "valuation answer to: What is AAPL's fair value?"
        );
        assert_eq!(fc.confidence, 0.7);
        assert_eq!(fc.item.as_deref(), Some("AAPL"));
        assert_eq!(fc.workflow_id.as_deref(), Some("wf-1"));
        assert_eq!(fc.value.unwrap()["fair_value"], 212.5);
        let c = a.confirmation;
        assert_eq!(c.message_type, MessageType::Confirmation);
        assert_eq!(c.to_agent.as_deref(), Some("financial_analyst"));
        assert_eq!(c.correlation_id.as_deref(), Some("r-1"));
        let cc: Confirmation = c.content_as().unwrap();
        assert_eq!(cc.agrees, Some(true));
        assert_eq!(cc.used, Some(true));
        assert_eq!(cc.in_reply_to.as_deref(), Some("r-1"));
        assert_eq!(cc.finding, "What is AAPL's fair value?");
        let note = cc.note.unwrap();
        assert!(note.contains("answered by workflow wf-1"), "{note}");
        assert!(note.contains(&finding_id("r-1")), "{note}");
        assert!(note.contains("wf-parent"), "{note}");
        assert_eq!(a.flag.kind, ANSWERED_FLAG);
        assert_eq!(a.flag.detail["id"], "answer:r-1");
        assert!(!is_answered(&rec, "r-1"));
        rec.add_flag(a.flag.clone());
        assert!(is_answered(&rec, "r-1"));
        assert!(!rec.add_flag(a.flag), "de-duplicated by detail.id");
        // The same answer built again names the same finding.
        let again = answer(&rec, &r, None, 1 << 20, Utc::now()).unwrap();
        assert_eq!(again.finding.unwrap().id, finding_id("r-1"));
    }

    #[test]
    fn confidence_defaults_to_one_and_large_outputs_are_omitted() {
        let r = req(Priority::Normal);
        let mut rec = record(&r);
        complete(
            &mut rec,
            json!({"confidence": 7, "blob": "x".repeat(5_000)}),
        );
        let a = answer(&rec, &r, None, 1_000, Utc::now()).unwrap();
        let fc: Finding = a.finding.unwrap().content_as().unwrap();
        assert_eq!(fc.confidence, 1.0, "7 is not a confidence");
        let omitted: OmittedOutput = serde_json::from_value(fc.value.unwrap()).unwrap();
        assert!(omitted.truncated);
        assert!(omitted.bytes > 5_000);
        assert_eq!(omitted.task_id, "wf-1/valuation");
    }

    #[test]
    fn a_failed_request_answers_with_a_failure_confirmation_only() {
        let r = req(Priority::Critical);
        let mut rec = record(&r);
        assert!(rec.end_failed(
            "deadline_missed",
            "deadline 2026-11-25T21:00:00Z missed",
            Utc::now()
        ));
        let a = answer(&rec, &r, None, 1 << 20, Utc::now()).unwrap();
        assert!(a.finding.is_none());
        assert_eq!(a.confirmation.priority, Priority::Critical);
        let cc: Confirmation = a.confirmation.content_as().unwrap();
        assert_eq!(cc.agrees, Some(false));
        assert_eq!(cc.used, Some(false));
        assert_eq!(
            cc.note.as_deref(),
            Some("deadline 2026-11-25T21:00:00Z missed")
        );
        assert_eq!(a.flag.detail["outcome"], "failed");
    }

    #[test]
    fn long_queries_are_cut_in_the_summary() {
        let mut r = req(Priority::Normal);
        r.query = "é".repeat(1_000);
        let mut rec = record(&r);
        complete(&mut rec, json!(1));
        let fc: Finding = answer(&rec, &r, None, 1 << 20, Utc::now())
            .unwrap()
            .finding
            .unwrap()
            .content_as()
            .unwrap();
        assert!(fc.finding.chars().count() < 250);
    }
}
