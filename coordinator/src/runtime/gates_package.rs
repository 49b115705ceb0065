//! Pure parts of the gate operations ([`super::gates_api`]): the id of a
//! finding across its task's runs, what a gate override's re-run
//! records of the impact report's estimates, and the API's view of the
//! workflow's gate decisions and re-runs.

use caucus_shared::api::coordinator::gates as api;
use caucus_shared::api::facilitator::OverrideImpact;

use crate::workflow::{GateAction, GateDecision, RerunEstimate, RerunRecord};

/// A gate action as the API spells it.
pub fn action_view(a: GateAction) -> api::GateAction {
    match a {
        GateAction::Approve => api::GateAction::Approve,
        GateAction::Reject => api::GateAction::Reject,
        GateAction::SendBack => api::GateAction::SendBack,
    }
}

/// A gate action the API asked for.
pub fn action_of(a: api::GateAction) -> GateAction {
    match a {
        api::GateAction::Approve => GateAction::Approve,
        api::GateAction::Reject => GateAction::Reject,
        api::GateAction::SendBack => GateAction::SendBack,
    }
}

/// A recorded decision as the API shows it.
pub fn decision_view(d: &GateDecision) -> api::GateDecision {
    api::GateDecision {
        action: action_view(d.action),
        decided_by: d.decided_by.clone(),
        rationale: d.rationale.clone(),
        at: d.at,
        response_ms: d.response_ms,
        send_back_to: d.send_back_to.clone(),
        reminders_sent: d.reminders_sent,
        escalated: d.escalated,
    }
}

/// A re-run record as the API shows it.
pub fn rerun_view(r: &RerunRecord) -> api::RerunRecord {
    api::RerunRecord {
        rerun_id: r.rerun_id.clone(),
        reason: r.reason.clone(),
        requested_by: r.requested_by.clone(),
        requested_at: r.requested_at,
        groups: r.groups.clone(),
        next_group: r.next_group,
        not_yet_run: r.not_yet_run.clone(),
        assumptions: r.assumptions.clone(),
        completed_at: r.completed_at,
        estimates: r.estimates.iter().map(estimate_view).collect(),
    }
}

fn estimate_view(e: &RerunEstimate) -> api::RerunEstimate {
    api::RerunEstimate {
        task: e.task.clone(),
        output_metric: e.output_metric.clone(),
        before: e.before,
        estimate: e.estimate,
        estimate_method: e.estimate_method.clone(),
        actual: e.actual,
        error: e.error,
    }
}

/// The id of a finding across its task's runs: the worker's `Nats-Msg-Id`
/// `<task_id>@<attempt>:finding:<index>` without the attempt. A re-run (or
/// a retry) publishes the task's findings again under a new attempt: they
/// are the same findings, restated.
pub fn finding_id(msg_id: &str) -> Option<String> {
    let (run, index) = msg_id.rsplit_once(":finding:")?;
    let (task_id, attempt) = run.rsplit_once('@')?;
    if attempt.is_empty() || !attempt.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(format!("{task_id}:finding:{index}"))
}

/// The impact report's estimates of the tasks a gate override re-runs
/// (`groups`), for the re-run record, which adds the actual results.
pub fn rerun_estimates(impact: &OverrideImpact, groups: &[Vec<String>]) -> Vec<RerunEstimate> {
    impact
        .report
        .impacts
        .iter()
        .filter(|i| groups.iter().flatten().any(|k| *k == i.analysis_id))
        .filter_map(|i| {
            Some(RerunEstimate {
                task: i.analysis_id.clone(),
                output_metric: i.output_metric.clone(),
                before: i.old_value,
                estimate: i.estimated_new_value?,
                // The facilitator's only method before it named it.
                estimate_method: i
                    .estimate_method
                    .clone()
                    .unwrap_or_else(|| "linear sensitivity".into()),
                actual: None,
                error: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_finding_id_is_its_message_id_without_the_attempt() {
        assert_eq!(
            finding_id("wf-1/valuation@2:finding:0").as_deref(),
            Some("wf-1/valuation:finding:0")
        );
        assert_eq!(
            finding_id("wf-1/review@level-0@1:finding:3").as_deref(),
            Some("wf-1/review@level-0:finding:3"),
            "task keys may hold '@'"
        );
        assert_eq!(finding_id("0190a8e2-uuid"), None);
        assert_eq!(finding_id("wf-1/review@level-0:finding:1"), None);
    }

    #[test]
    fn an_override_records_the_estimates_of_the_tasks_it_reruns() {
        let row = |id: &str, metric: &str, old: Option<f64>, new: Option<f64>| {
            json!({"analysis_id": id, "kind": "other", "output_metric": metric,
                   "old_value": old, "estimated_new_value": new,
                   "estimate_method": new.map(|_| "linear sensitivity"),
                   "delta": 0.1, "requires_rerun": true, "rerun_minutes": 1.0, "action": "re-run"})
        };
        let impact: OverrideImpact = serde_json::from_value(json!({
            "report": {
                "changed_assumption": {"metric": "m", "old_value": 0.25, "new_value": 0.28},
                "affected_count": 3, "high_impact_count": 1, "total_rerun_minutes": 3.0,
                "impacts": [
                    row("valuation", "target_price", Some(45.41), Some(160.28)),
                    row("risk", "risk_score", Some(0.4), Some(0.38)),
                    row("peers", "context", None, None),
                ],
            },
            "plan": {"required_reruns": [], "optional_updates": [],
                     "execution_strategy": "serial", "estimated_minutes": 0.0, "blocking": false},
        }))
        .expect("an override impact");
        let got = rerun_estimates(&impact, &[vec!["valuation".into()], vec!["peers".into()]]);
        assert_eq!(got.len(), 1, "risk is not re-run; peers has no estimate");
        assert_eq!(got[0].task, "valuation");
        assert_eq!(got[0].before, Some(45.41));
        assert_eq!(got[0].estimate, 160.28);
        assert_eq!(got[0].estimate_method, "linear sensitivity");
    }
}
