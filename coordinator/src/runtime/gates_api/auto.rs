//! Automatic approval of an auto-approving workflow's open gate, checked
//! with the facilitator off the scheduler loop.

use std::time::Duration;

use async_nats::Client;
use caucus_shared::api::facilitator::{DebateState, DebateSummary, Debates, DebatesRequest};
use caucus_shared::nats::api::CODE_NO_RESPONDERS;
use caucus_shared::subjects::Subjects;

use super::super::commands::SchedulerHandle;
use super::super::gates::{AutoCandidate, GateOp};
use super::{call, GateApi};
use crate::workflow::{GateAction, GateRequest};

/// How long automatic approval waits for a debate a task named
/// (`debate_ids`) to appear at the facilitator: it opens one after its
/// pre-debate sync lock (seconds), so longer means the challenge was lost
/// or refused, and waiting on would hold the gate for nothing.
const UNOPENED_DEBATE_WAIT: Duration = Duration::from_secs(30);

/// Debate states still moving on their own (levels 1 and 2): they end
/// resolved, with an expert, or provisional within the facilitator's
/// time-outs.
fn in_motion(state: DebateState) -> bool {
    matches!(
        state,
        DebateState::AwaitingAck
            | DebateState::AwaitingEvidence
            | DebateState::AwaitingVerdict
            | DebateState::Mediating
    )
}

/// Debates of `named` (named by the workflow's tasks) or of `listed` (the
/// facilitator's debates of the workflow) that are still in motion: listed
/// at level 1 or 2, or named and not listed yet while the gate has been
/// open less than [`UNOPENED_DEBATE_WAIT`].
fn debates_in_motion(
    named: &[String],
    listed: &[DebateSummary],
    open_for: Duration,
) -> Vec<String> {
    let mut out: Vec<String> = listed
        .iter()
        .filter(|d| in_motion(d.state))
        .map(|d| d.debate_id.clone())
        .collect();
    if open_for < UNOPENED_DEBATE_WAIT {
        out.extend(
            named
                .iter()
                .filter(|id| !listed.iter().any(|d| &d.debate_id == *id))
                .cloned(),
        );
    }
    out
}

/// Approves an auto-approving workflow's open gate when nothing needs a
/// person: no debate of the workflow is still in motion (approving over a
/// debate that ends provisional a second later would skip its review) and
/// no provisional decision awaits review. With no facilitator running
/// nothing can await review, so it approves (the submitter opted in to
/// unattended runs).
pub async fn auto_decide(
    client: Client,
    subjects: Subjects,
    timeout: Duration,
    handle: SchedulerHandle,
    candidate: AutoCandidate,
) {
    let AutoCandidate {
        workflow_id,
        gate,
        debates: named,
        open_for,
    } = candidate;
    let api = GateApi {
        client,
        subjects,
        timeout,
        // No package is built here: only the facilitator is asked.
        findings_lookback: None,
    };
    let listing = DebatesRequest {
        workflow_id: Some(workflow_id.clone()),
        ..Default::default()
    };
    let facilitator_runs = match api.facilitator::<Debates>(&listing).await {
        Ok(r) => {
            let moving = debates_in_motion(&named, &r.debates, open_for);
            if !moving.is_empty() {
                tracing::debug!(workflow_id, gate, debates = ?moving, "automatic approval waits for debates in motion");
                return;
            }
            true
        }
        Err(e) if e.code == CODE_NO_RESPONDERS => false,
        Err(e) => {
            tracing::warn!(workflow_id, gate, error = %e, "automatic approval: facilitator check failed; will retry");
            return;
        }
    };
    // Nobody answered the listing, so nobody would answer the second
    // question either: asking it anyway cost a round trip per gate.
    let provisional = if facilitator_runs {
        api.provisional(&workflow_id).await
    } else {
        Ok(None)
    };
    let rationale = match provisional {
        Ok(None) => "auto_approve_gates: no facilitator running, nothing to review".to_string(),
        Ok(Some(p)) if p.count == 0 => {
            "auto_approve_gates: no provisional decision to review".to_string()
        }
        Ok(Some(p)) => {
            tracing::info!(workflow_id, gate, message = %p.message, "automatic approval waits for a person's review");
            return;
        }
        Err(e) => {
            tracing::warn!(workflow_id, gate, error = %e, "automatic approval: facilitator check failed; will retry");
            return;
        }
    };
    let op = GateOp::Decide {
        workflow_id: workflow_id.clone(),
        gate: Some(gate.clone()),
        req: GateRequest {
            action: GateAction::Approve,
            decided_by: "auto".into(),
            rationale,
            send_back_to: Vec::new(),
        },
    };
    if let Err(e) = call(&handle, op).await {
        tracing::debug!(workflow_id, gate, error = %e, "automatic approval not applied");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn listed(debates: &[(&str, &str)]) -> Vec<DebateSummary> {
        debates
            .iter()
            .map(|(id, state)| {
                serde_json::from_value(json!({
                    "debate_id": id, "challenge_id": "c", "topic": "t",
                    "challenger": "a", "challenged": "b", "priority": "supporting",
                    "level": 1, "state": state, "snapshot_id": "s",
                    "provisional": false, "opened_at": "2026-11-25T12:00:00Z",
                }))
                .expect("a debate summary")
            })
            .collect()
    }

    #[test]
    fn debates_at_levels_one_and_two_hold_automatic_approval() {
        let all = listed(&[
            ("a", "awaiting_evidence"),
            ("b", "mediating"),
            ("c", "awaiting_human"),
            ("d", "provisional"),
            ("e", "resolved"),
        ]);
        let got = debates_in_motion(&[], &all, Duration::ZERO);
        assert_eq!(got, ["a", "b"]);
    }

    #[test]
    fn a_named_debate_not_opened_yet_holds_approval_for_a_while_only() {
        let named = vec!["margin-wf".to_string()];
        assert_eq!(
            debates_in_motion(&named, &[], Duration::from_secs(1)),
            ["margin-wf"]
        );
        assert!(debates_in_motion(&named, &[], UNOPENED_DEBATE_WAIT).is_empty());
        let settled = listed(&[("margin-wf", "awaiting_human")]);
        assert!(debates_in_motion(&named, &settled, Duration::ZERO).is_empty());
    }
}
