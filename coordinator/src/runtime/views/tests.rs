//! The typed views show exactly what the `json!` views before them did.

use std::collections::BTreeMap;

use chrono::{TimeZone, Utc};
use serde_json::{json, Value};

use caucus_shared::subjects::encode_token;

use super::workflow_view_with;
use crate::pipeline::builtin;
use crate::research::{attach, ResearchSettings};
use crate::runtime::pipelines::stages_of;
use crate::workflow::{instantiate, TaskRunState, WorkflowRecord, WorkflowState};

/// The view as it was written before the typed views (kept as the
/// reference).
fn old_view(r: &WorkflowRecord, with_tasks: bool, with_outputs: bool) -> Value {
    let (done, total) = r.progress();
    let overdue: Vec<&String> = r
        .tasks
        .iter()
        .filter(|(_, t)| t.overdue)
        .map(|(k, _)| k)
        .collect();
    let mut v = json!({
        "workflow_id": r.workflow_id,
        "item": r.item,
        "item_token": encode_token(&r.item),
        "pipeline": r.pipeline,
        "state": r.state.as_str(),
        "progress": {"completed": done, "total": total},
        "overdue_tasks": overdue,
        "created_at": r.created_at,
        "updated_at": r.updated_at,
    });
    let m = v.as_object_mut().unwrap();
    if let Some(f) = r.finished_at {
        m.insert("finished_at".into(), json!(f));
        m.insert(
            "elapsed_ms".into(),
            json!((f - r.created_at).num_milliseconds()),
        );
    }
    if let Some(f) = &r.failure {
        m.insert("failure".into(), json!(f));
    }
    if let Some(p) = &r.pause {
        m.insert("pause".into(), json!(p));
    }
    if !r.flags.is_empty() {
        m.insert("flags".into(), json!(r.flags));
        m.insert("reevaluate".into(), json!(true));
    }
    if let Some(research) = &r.research {
        m.insert("research".into(), research.status_json());
    }
    if let Some(lr) = &r.level_review {
        m.insert("level_review".into(), json!(lr));
    }
    let open = r.open_gate_keys();
    if !open.is_empty() {
        m.insert("open_gates".into(), json!(open));
    }
    if !r.resolved_assumptions.is_empty() {
        m.insert("resolved_assumptions".into(), json!(r.resolved_assumptions));
    }
    if !r.reruns.is_empty() {
        m.insert("reruns".into(), json!(r.reruns));
    }
    if r.auto_approve_gates {
        m.insert("auto_approve_gates".into(), json!(true));
    }
    if with_tasks {
        let tasks: BTreeMap<&String, Value> = r
            .tasks
            .iter()
            .map(|(k, t)| {
                let mut t = json!({
                        "stage": t.stage, "agent_type": t.agent_type, "state": t.state,
                        "attempt": t.attempt, "worker_id": t.worker_id,
                        "started_at": t.started_at, "finished_at": t.finished_at,
                        "overdue": t.overdue, "error": t.error, "output": t.output,
                        "gate": t.gate, "previous_output": t.previous_output,
                });
                if !with_outputs {
                    let o = t.as_object_mut().unwrap();
                    o.remove("output");
                    o.remove("previous_output");
                }
                (k, t)
            })
            .collect();
        m.insert("tasks".into(), json!(tasks));
        if !with_outputs {
            m.insert("outputs_omitted".into(), json!(true));
        }
    }
    v
}

fn record(pipeline: &str) -> WorkflowRecord {
    let spec = builtin(pipeline).unwrap();
    let stages = stages_of(&spec).unwrap();
    let at = Utc.with_ymd_and_hms(2026, 11, 25, 12, 0, 0).unwrap();
    let mut r = instantiate(
        "wf-1".into(),
        "BRK.B".into(),
        spec.name.clone(),
        stages,
        100,
        at,
    );
    let settings = ResearchSettings {
        stagger: std::time::Duration::from_millis(10),
        ..ResearchSettings::default()
    };
    attach(&mut r, spec.timeout, &settings, at).unwrap();
    r
}

fn assert_same(r: &WorkflowRecord) {
    for (tasks, outputs) in [(false, false), (true, false), (true, true)] {
        let new = serde_json::to_value(workflow_view_with(r, tasks, outputs)).unwrap();
        assert_eq!(
            new,
            old_view(r, tasks, outputs),
            "tasks {tasks} outputs {outputs}"
        );
        // And the view reads back as itself.
        let back: caucus_shared::api::coordinator::status::WorkflowView =
            serde_json::from_value(new).unwrap();
        assert_eq!(back, workflow_view_with(r, tasks, outputs));
    }
}

#[test]
fn a_fresh_workflow_shows_as_before() {
    assert_same(&record("stock-analysis"));
}

#[test]
fn a_busy_workflow_shows_as_before() {
    let mut r = record("stock-analysis");
    let at = r.created_at + chrono::Duration::seconds(5);
    r.state = WorkflowState::Paused;
    r.finished_at = Some(at);
    r.failure = Some("valuation failed".into());
    r.auto_approve_gates = true;
    r.resolved_assumptions
        .insert("operating_margin".into(), json!(0.28));
    r.pause = Some(
        serde_json::from_value(
            json!({"seq": 1, "reason": "tier 2", "trigger_source": "tier2_failure",
            "requested_at": at, "tier": 2, "failed_tasks": ["valuation"], "reminders_sent": [0]}),
        )
        .unwrap(),
    );
    r.flags.push(
        serde_json::from_value(json!({"kind": "regime_change", "at": at,
            "detail": {"id": "b-1", "new_regime": "risk_off"}}))
        .unwrap(),
    );
    r.reruns.push(
        serde_json::from_value(json!({"rerun_id": "rerun-1", "reason": "send back",
            "requested_by": "ana", "requested_at": at, "groups": [["valuation"]], "next_group": 1,
            "assumptions": {"g": 0.02}, "completed_at": at,
            "estimates": [{"task": "valuation", "output_metric": "target_price", "before": 10.0,
                           "estimate": 12.5, "estimate_method": "linear", "actual": 12.0,
                           "error": -0.5}]}))
        .unwrap(),
    );
    r.level_review = Some(
        serde_json::from_value(json!({
            "policy": {"mode": "always", "agent": "reviewer", "expected": 1.0,
                       "retry": {"max_attempts": 3, "backoff_initial_ms": 200, "backoff_max_ms": 5000}},
            "levels": [{"level": 0, "conflicts": [{"resource": "x", "tasks": ["a", "b"]}],
                        "review_task": "review@level-0",
                        "review": {"level": 0, "conflicts": [{"resource": "x", "tasks": ["a", "b"],
                                   "resolved": true, "resolution": "merged"}],
                                   "summary": "ok", "fixes_applied": [], "warnings_for_next_level": ["w"],
                                   "duration_ms": 12, "issues": ["late"]}},
                       {"level": 1}]}))
        .unwrap(),
    );
    let keys: Vec<String> = r.tasks.keys().cloned().collect();
    for (i, k) in keys.iter().enumerate() {
        let t = r.tasks.get_mut(k).unwrap();
        match i % 3 {
            0 => {
                t.state = TaskRunState::Completed;
                t.attempt = 2;
                t.worker_id = Some("w-1".into());
                t.started_at = Some(at);
                t.finished_at = Some(at);
                t.output = Some(json!({"markdown": "# report"}));
                t.previous_output = Some(json!({"v": 1}));
            }
            1 => {
                t.state = TaskRunState::AwaitingApproval;
                t.overdue = true;
                t.error = Some(caucus_shared::task::TaskError {
                    error_type: "timeout".into(),
                    message: "slow".into(),
                    ..Default::default()
                });
                t.gate = Some(Box::new(
                    serde_json::from_value(json!({"opened_at": at, "reminders_sent": 1,
                        "history": [{"action": "send_back", "decided_by": "ana", "rationale": "redo",
                                     "at": at, "response_ms": 5, "send_back_to": ["valuation"]}],
                        "decision": {"action": "approve", "decided_by": "auto", "at": at,
                                     "response_ms": 9, "escalated": true}}))
                    .unwrap(),
                ));
            }
            _ => {}
        }
    }
    assert_same(&r);
}

#[test]
fn a_research_run_shows_as_before() {
    let mut r = record("deep-research");
    let research = r.research.as_mut().expect("a research pipeline");
    let at = r.created_at;
    research.refused_count = 1;
    research.audit(at, "coordinator", "start", "ok".into());
    let extra: crate::research::ResearchState = serde_json::from_value({
        let mut v = serde_json::to_value(&*research).unwrap();
        v["streams"] = json!({"1": {"task": "discover#0", "state": "timed_out", "sources": 3,
            "started_at": at, "progress": "3/5", "eta": at, "error": "slow", "can_continue": true,
            "needs_intervention": true, "keys": ["k"]}});
        v["gates"] = json!({"DISCOVERING": {"phase": "DISCOVERING", "verdict": "pass_with_fallback",
            "reasons": ["few"], "escalate": true, "metrics": {"sources": 3.0}}});
        v["refused_writes"] = json!([{"task": "discover#0", "key": "x", "reason": "outside"}]);
        v["pending_writes"] = json!([]);
        v["alert"] = json!({"event_type": "research_failed", "severity": "warning", "reason": "r"});
        v["last_checkpoint_at"] = json!(at);
        v
    })
    .unwrap();
    *research = extra;
    assert_same(&r);
}
