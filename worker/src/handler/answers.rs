//! How a handler answers the findings it received in `inputs.findings`
//! (see [`caucus_shared::inbound`]): a built-in agent lists the ones it
//! applied; an `exec:` or `http:` handler may return `responses`, which the
//! worker lifts out of its output. [`crate::confirmations`] turns either into
//! the `confirmation`s the senders asked for.

use serde_json::Value;

use caucus_shared::inbound::{AppliedFinding, FindingResponse, OUTPUT_RESPONSES};

/// The most `responses` taken from one output; the rest are dropped with a
/// warning (a task has at most `coordinator.findings_per_task` findings to
/// answer, far fewer than this).
pub const MAX_RESPONSES: usize = 100;

/// A handler's answers about the findings in its inputs.
#[derive(Debug, Clone, PartialEq)]
pub enum FindingAnswers {
    /// A built-in agent: the findings it applied (its output's
    /// `applied_findings`); any other finding was not used.
    Applied(Vec<AppliedFinding>),
    /// An `exec:`/`http:` handler (or one that never reads its inputs): the
    /// answers it returned; a finding it did not answer gets a receipt.
    Reported(Vec<FindingResponse>),
}

impl Default for FindingAnswers {
    /// Nothing reported: every finding that asks for an answer gets a receipt.
    fn default() -> Self {
        FindingAnswers::Reported(Vec::new())
    }
}

/// Removes the top-level `responses` array from a handler's JSON output and
/// reads its entries. An entry that is not a [`FindingResponse`], a
/// `responses` that is not an array, and entries past [`MAX_RESPONSES`] are
/// dropped with a warning: a handler's odd answer never fails its task.
/// The warnings name `task_id` themselves: the `task` span they are logged
/// in is a trace-only span, which log lines do not show.
pub(crate) fn lift_responses(output: &mut Value, task_id: &str) -> Vec<FindingResponse> {
    let Some(raw) = output
        .as_object_mut()
        .and_then(|m| m.remove(OUTPUT_RESPONSES))
    else {
        return Vec::new();
    };
    let Value::Array(entries) = raw else {
        tracing::warn!(
            task_id,
            "handler output's `responses` is not an array; ignored"
        );
        return Vec::new();
    };
    if entries.len() > MAX_RESPONSES {
        tracing::warn!(
            task_id,
            count = entries.len(),
            max = MAX_RESPONSES,
            "handler returned too many responses; the rest are ignored"
        );
    }
    entries
        .into_iter()
        .take(MAX_RESPONSES)
        .enumerate()
        .filter_map(|(i, e)| match serde_json::from_value::<FindingResponse>(e) {
            Ok(r) => Some(r),
            Err(err) => {
                tracing::warn!(task_id, index = i, error = %err, "malformed entry in handler output's `responses`; skipped");
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn responses_are_lifted_out_and_odd_entries_skipped() {
        let mut out = json!({
            "target_price": 1.0,
            "responses": [
                {"finding_id": "f1", "used": true, "note": "lowered FCF"},
                {"used": false},
                "nonsense",
                {"finding_id": "f2"}
            ]
        });
        let got = lift_responses(&mut out, "wf/x");
        assert_eq!(
            out,
            json!({"target_price": 1.0}),
            "lifted out of the output"
        );
        assert_eq!(
            got,
            vec![
                FindingResponse {
                    finding_id: "f1".into(),
                    used: Some(true),
                    note: Some("lowered FCF".into())
                },
                FindingResponse {
                    finding_id: "f2".into(),
                    used: None,
                    note: None
                },
            ]
        );
    }

    #[test]
    fn absent_or_not_a_list_reads_as_none() {
        let mut out = json!({"a": 1});
        assert!(lift_responses(&mut out, "wf/x").is_empty());
        let mut out = json!({"a": 1, "responses": {"finding_id": "f1"}});
        assert!(lift_responses(&mut out, "wf/x").is_empty());
        assert_eq!(out, json!({"a": 1}), "removed even when unreadable");
        let mut not_object = json!([1, 2]);
        assert!(lift_responses(&mut not_object, "wf/x").is_empty());
    }

    #[test]
    fn at_most_the_cap_is_kept() {
        let many: Vec<Value> = (0..MAX_RESPONSES + 5)
            .map(|i| json!({"finding_id": format!("f{i}")}))
            .collect();
        let mut out = json!({ "responses": many });
        let got = lift_responses(&mut out, "wf/x");
        assert_eq!(got.len(), MAX_RESPONSES);
        assert_eq!(
            got[MAX_RESPONSES - 1].finding_id,
            format!("f{}", MAX_RESPONSES - 1)
        );
    }
}
