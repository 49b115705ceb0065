//! Gates and re-runs over a pure workflow record.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{Duration as ChronoDuration, Utc};
use serde_json::{json, Value};

use caucus_shared::task::{TaskEvent, TaskStatus};

use super::*;

fn stage(name: &str, deps: &[&str], kind: StageKind) -> StageDef {
    StageDef {
        name: name.into(),
        agent_type: if kind == StageKind::Gate {
            GATE_AGENT.into()
        } else {
            name.into()
        },
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        expected: 1.0,
        timeout: None,
        retry: StageRetry::default(),
        fan_out: 1,
        params: Value::Null,
        kind,
    }
}

/// screening → financial, strategy → valuation → review (gate) → report
fn stock_with_gate() -> WorkflowRecord {
    let t = StageKind::Task;
    instantiate(
        "w".into(),
        "AAPL".into(),
        "p".into(),
        vec![
            stage("screening", &[], t),
            stage("financial", &["screening"], t),
            stage("strategy", &["screening"], t),
            stage("valuation", &["financial", "strategy"], t),
            stage("review", &["valuation"], StageKind::Gate),
            stage("report", &["review"], t),
        ],
        10,
        Utc::now(),
    )
}

fn event(rec: &WorkflowRecord, key: &str, status: TaskStatus, output: Value) -> TaskEvent {
    TaskEvent {
        schema_version: 1,
        task_id: rec.task_id(key),
        workflow_id: rec.workflow_id.clone(),
        stage: key.into(),
        agent_type: key.into(),
        attempt: rec.tasks[key].attempt,
        status,
        worker_id: "w1".into(),
        output: Some(output),
        error: None,
        message: None,
        started_at: None,
        at: Utc::now(),
        partition: None,
    }
}

/// Dispatches and completes `key` with `output`; returns the dispatch inputs.
fn complete(rec: &mut WorkflowRecord, key: &str, output: Value) -> BTreeMap<String, Value> {
    let d = rec.dispatch(key, Utc::now()).expect("dispatchable");
    let ev = event(rec, key, TaskStatus::Completed, output);
    rec.apply_event(&ev, Utc::now());
    d.inputs
}

fn run_to_gate(rec: &mut WorkflowRecord) {
    for k in ["screening", "financial", "strategy", "valuation"] {
        complete(rec, k, json!({ "k": k }));
    }
}

fn approve(by: &str) -> GateRequest {
    GateRequest {
        action: GateAction::Approve,
        decided_by: by.into(),
        rationale: String::new(),
        send_back_to: Vec::new(),
    }
}

#[test]
fn a_gate_opens_when_its_dependencies_complete_and_is_never_dispatched() {
    let mut rec = stock_with_gate();
    run_to_gate(&mut rec);
    assert_eq!(rec.tasks["review"].state, TaskRunState::AwaitingApproval);
    assert!(rec.tasks["review"]
        .gate
        .as_ref()
        .unwrap()
        .decision
        .is_none());
    assert!(
        rec.dispatchable(Utc::now()).is_empty(),
        "nothing to dispatch"
    );
    assert!(rec.dispatch("review", Utc::now()).is_none());
    assert_eq!(rec.tasks["report"].state, TaskRunState::Waiting);
    assert_eq!(rec.open_gate_keys(), vec!["review".to_string()]);
    assert_eq!(rec.state, WorkflowState::Running);
}

#[test]
fn approval_records_the_response_time_and_lets_dependents_run() {
    let mut rec = stock_with_gate();
    run_to_gate(&mut rec);
    let opened = rec.tasks["review"].gate.as_ref().unwrap().opened_at;
    let later = opened + ChronoDuration::milliseconds(4_500);
    let out = rec.decide_gate(None, approve("ana"), later).unwrap();
    assert_eq!(out.gate, "review");
    assert_eq!(out.newly_ready, vec!["report".to_string()]);
    let g = rec.tasks["review"].gate.clone().unwrap();
    let d = g.decision.unwrap();
    assert_eq!(d.action, GateAction::Approve);
    assert_eq!(d.decided_by, "ana");
    assert_eq!(d.response_ms, 4_500);
    assert_eq!(rec.tasks["review"].state, TaskRunState::Completed);
    complete(&mut rec, "report", json!({}));
    assert_eq!(rec.state, WorkflowState::Completed);
}

#[test]
fn rejection_needs_a_reason_and_fails_the_workflow() {
    let mut rec = stock_with_gate();
    run_to_gate(&mut rec);
    let mut req = approve("ana");
    req.action = GateAction::Reject;
    assert_eq!(
        rec.decide_gate(None, req.clone(), Utc::now()),
        Err(GateError::RationaleRequired("reject"))
    );
    req.rationale = "numbers do not tie out".into();
    rec.decide_gate(Some("review"), req, Utc::now()).unwrap();
    assert_eq!(rec.state, WorkflowState::Failed);
    assert_eq!(
        rec.failure.as_deref(),
        Some("rejected at gate review by ana: numbers do not tie out")
    );
    assert!(matches!(
        rec.decide_gate(None, approve("bo"), Utc::now()),
        Err(GateError::Finished { .. })
    ));
}

#[test]
fn send_back_reruns_the_named_stage_and_what_follows_then_reopens_the_gate() {
    let mut rec = stock_with_gate();
    run_to_gate(&mut rec);
    let before = rec.tasks["strategy"].attempt;
    let req = GateRequest {
        action: GateAction::SendBack,
        decided_by: "ana".into(),
        rationale: "use the 2024 filing".into(),
        send_back_to: vec!["strategy".into()],
    };
    let out = rec.decide_gate(None, req, Utc::now()).unwrap();
    assert_eq!(
        out.renewed,
        vec!["strategy".to_string(), "valuation".to_string()]
    );
    assert_eq!(out.newly_ready, vec!["strategy".to_string()]);
    assert_eq!(rec.tasks["strategy"].attempt, before + 1);
    assert_eq!(
        rec.tasks["strategy"].previous_output,
        Some(json!({"k": "strategy"}))
    );
    assert_eq!(
        rec.tasks["financial"].state,
        TaskRunState::Completed,
        "not sent back"
    );
    assert_eq!(rec.tasks["review"].state, TaskRunState::Waiting);
    assert!(rec.open_gate_keys().is_empty());
    complete(&mut rec, "strategy", json!({"k": "strategy2"}));
    complete(&mut rec, "valuation", json!({"k": "valuation2"}));
    assert_eq!(rec.open_gate_keys(), vec!["review".to_string()]);
    let g = rec.tasks["review"].gate.clone().unwrap();
    assert_eq!(g.history.len(), 1, "the send-back is kept");
    assert_eq!(g.history[0].send_back_to, vec!["strategy".to_string()]);
    assert!(rec.reruns[0].completed_at.is_some());
}

#[test]
fn send_back_targets_must_be_upstream_and_exist() {
    let mut rec = stock_with_gate();
    run_to_gate(&mut rec);
    let mut req = approve("ana");
    req.action = GateAction::SendBack;
    req.rationale = "x".into();
    req.send_back_to = vec!["report".into()];
    assert!(matches!(
        rec.decide_gate(None, req.clone(), Utc::now()),
        Err(GateError::NotUpstream { .. })
    ));
    req.send_back_to = vec!["nope".into()];
    assert_eq!(
        rec.decide_gate(None, req, Utc::now()),
        Err(GateError::Unknown("nope".into()))
    );
}

#[test]
fn an_open_gate_is_not_approved_while_its_inputs_run_again() {
    let mut rec = stock_with_gate();
    run_to_gate(&mut rec);
    let rr = rec
        .request_rerun(
            RerunRequest {
                reason: "override".into(),
                requested_by: "facilitator".into(),
                groups: vec![vec!["valuation".into()]],
                assumptions: BTreeMap::from([("operating_margin".into(), json!(0.28))]),
                ..RerunRequest::default()
            },
            Utc::now(),
        )
        .unwrap();
    assert_eq!(rr.renewed, vec!["valuation".to_string()]);
    assert_eq!(rr.newly_ready, vec!["valuation".to_string()]);
    assert_eq!(rec.tasks["review"].state, TaskRunState::AwaitingApproval);
    assert!(matches!(
        rec.decide_gate(None, approve("ana"), Utc::now()),
        Err(GateError::RerunsPending { pending, .. }) if pending == vec!["valuation".to_string()]
    ));
    let inputs = complete(&mut rec, "valuation", json!({"target_price": 95.2}));
    assert_eq!(
        inputs["resolved_assumptions"],
        json!({"operating_margin": 0.28}),
        "the re-run sees the settled assumption"
    );
    assert_eq!(
        rec.tasks["valuation"].previous_output,
        Some(json!({"k": "valuation"}))
    );
    rec.decide_gate(None, approve("ana"), Utc::now()).unwrap();
}

#[test]
fn a_rerun_records_the_actual_result_next_to_the_estimate() {
    let mut rec = stock_with_gate();
    std::sync::Arc::make_mut(&mut rec.stages)
        .iter_mut()
        .find(|s| s.name == "valuation")
        .unwrap()
        .params = json!({"impact": {"kind": "valuation", "result": "/target_price"}});
    run_to_gate(&mut rec);
    let estimate = RerunEstimate {
        task: "valuation".into(),
        output_metric: "target_price".into(),
        before: Some(45.41),
        estimate: 160.28,
        estimate_method: "linear sensitivity".into(),
        actual: None,
        error: None,
    };
    rec.request_rerun(
        RerunRequest {
            reason: "override".into(),
            requested_by: "ana".into(),
            groups: vec![vec!["valuation".into()]],
            estimates: vec![estimate.clone()],
            ..RerunRequest::default()
        },
        Utc::now(),
    )
    .unwrap();
    assert_eq!(
        rec.reruns[0].estimates,
        vec![estimate.clone()],
        "no actual before the re-run"
    );
    complete(
        &mut rec,
        "valuation",
        json!({"target_price": 292.8412, "k": "valuation"}),
    );
    let got = &rec.reruns[0].estimates[0];
    assert_eq!(got.actual, Some(292.84));
    assert_eq!(got.error, Some(132.56));
    let v = serde_json::to_value(&rec.reruns[0]).unwrap();
    assert_eq!(v["estimates"][0]["estimate"], 160.28);
    assert_eq!(v["estimates"][0]["actual"], 292.84);
    assert_eq!(v["estimates"][0]["estimate_method"], "linear sensitivity");
}

#[test]
fn a_serial_rerun_plan_runs_exactly_its_tasks_one_after_another() {
    let mut rec = stock_with_gate();
    run_to_gate(&mut rec);
    rec.decide_gate(None, approve("ana"), Utc::now()).unwrap();
    complete(&mut rec, "report", json!({"v": 1}));
    assert_eq!(rec.state, WorkflowState::Completed);
    let screening_attempt = rec.tasks["screening"].attempt;
    let out = rec
        .request_rerun(
            RerunRequest {
                reason: "override".into(),
                requested_by: "ana".into(),
                groups: vec![vec!["strategy".into()], vec!["report".into()]],
                assumptions: BTreeMap::new(),
                ..RerunRequest::default()
            },
            Utc::now(),
        )
        .unwrap();
    assert_eq!(out.rerun_id, "rerun-1");
    assert_eq!(
        rec.state,
        WorkflowState::Running,
        "a completed workflow reopens"
    );
    assert_eq!(out.newly_ready, vec!["strategy".to_string()]);
    assert!(rec.tasks["report"].held, "second step waits for the first");
    assert_eq!(rec.tasks["report"].state, TaskRunState::Waiting);
    complete(&mut rec, "strategy", json!({}));
    assert!(!rec.tasks["report"].held);
    assert_eq!(rec.tasks["report"].state, TaskRunState::Ready);
    assert_eq!(
        rec.tasks["valuation"].state,
        TaskRunState::Completed,
        "only listed tasks run again"
    );
    complete(&mut rec, "report", json!({"v": 2}));
    assert_eq!(rec.state, WorkflowState::Completed);
    assert!(rec.reruns[0].completed_at.is_some());
    assert_eq!(rec.tasks["screening"].attempt, screening_attempt);
}

#[test]
fn rerun_requests_are_checked() {
    let mut rec = stock_with_gate();
    let bad = |groups: Vec<Vec<String>>| RerunRequest {
        groups,
        ..RerunRequest::default()
    };
    assert_eq!(
        rec.request_rerun(bad(vec![vec!["nope".into()]]), Utc::now()),
        Err(GateError::Unknown("nope".into()))
    );
    assert!(matches!(
        rec.request_rerun(bad(vec![vec!["review".into()]]), Utc::now()),
        Err(GateError::Unknown(_))
    ));
    assert_eq!(
        rec.request_rerun(bad(vec![]), Utc::now()),
        Err(GateError::EmptyPlan)
    );
    // Not run yet: listed, reported, nothing renewed.
    let out = rec
        .request_rerun(bad(vec![vec!["report".into()]]), Utc::now())
        .unwrap();
    assert_eq!(out.not_yet_run, vec!["report".to_string()]);
    assert!(out.renewed.is_empty());
}

#[test]
fn reminders_and_one_escalation_fall_due_once_each() {
    let mut rec = stock_with_gate();
    run_to_gate(&mut rec);
    let opened = rec.tasks["review"].gate.as_ref().unwrap().opened_at;
    let timers = GateTimers {
        reminders: vec![Duration::from_millis(100), Duration::from_millis(200)],
        escalate_after: Some(Duration::from_millis(300)),
    };
    let at = |ms| opened + ChronoDuration::milliseconds(ms);
    assert!(rec.gate_notices(at(50), &timers).is_empty());
    let n = rec.gate_notices(at(120), &timers);
    assert_eq!(n.len(), 1);
    assert_eq!((n[0].reminder, n[0].escalation), (1, false));
    assert!(rec.gate_notices(at(150), &timers).is_empty(), "sent once");
    let n = rec.gate_notices(at(310), &timers);
    assert_eq!(n.len(), 2, "{n:?}");
    assert_eq!((n[0].reminder, n[0].escalation), (2, false));
    assert!(n[1].escalation);
    assert!(rec.gate_notices(at(10_000), &timers).is_empty());
    let mut req = approve("ana");
    req.rationale = "ok".into();
    rec.decide_gate(None, req, at(400)).unwrap();
    let d = rec.tasks["review"].gate.clone().unwrap().decision.unwrap();
    assert_eq!(
        (d.reminders_sent, d.escalated, d.response_ms),
        (2, true, 400)
    );
}

#[test]
fn a_root_gate_opens_at_once_and_a_stored_gate_round_trips() {
    let rec = instantiate(
        "w".into(),
        "X".into(),
        "p".into(),
        vec![
            stage("approve_start", &[], StageKind::Gate),
            stage("work", &["approve_start"], StageKind::Task),
        ],
        10,
        Utc::now(),
    );
    assert_eq!(rec.open_gate_keys(), vec!["approve_start".to_string()]);
    let text = serde_json::to_string(&rec).unwrap();
    assert!(text.contains("\"awaiting_approval\""), "{text}");
    assert!(text.contains("\"kind\":\"gate\""), "{text}");
    let back: WorkflowRecord = serde_json::from_str(&text).unwrap();
    assert_eq!(back, rec);
}

#[test]
fn two_open_gates_must_be_named() {
    let t = StageKind::Task;
    let mut rec = instantiate(
        "w".into(),
        "X".into(),
        "p".into(),
        vec![
            stage("a", &[], t),
            stage("g1", &["a"], StageKind::Gate),
            stage("g2", &["a"], StageKind::Gate),
        ],
        10,
        Utc::now(),
    );
    complete(&mut rec, "a", json!({}));
    assert!(matches!(
        rec.decide_gate(None, approve("x"), Utc::now()),
        Err(GateError::Ambiguous(_))
    ));
    rec.decide_gate(Some("g1"), approve("x"), Utc::now())
        .unwrap();
    assert_eq!(rec.state, WorkflowState::Running);
    rec.decide_gate(None, approve("x"), Utc::now()).unwrap();
    assert_eq!(rec.state, WorkflowState::Completed);
}

#[test]
fn a_binding_resolution_reruns_what_used_another_value_and_what_followed() {
    let mut rec = stock_with_gate();
    for s in std::sync::Arc::make_mut(&mut rec.stages)
        .iter_mut()
        .filter(|s| s.name == "valuation")
    {
        s.params = json!({"impact": {"kind": "valuation", "inputs": ["operating_margin"],
                                      "used": "/operating_margin_used"}});
    }
    for k in ["screening", "financial", "strategy"] {
        complete(&mut rec, k, json!({}));
    }
    complete(
        &mut rec,
        "valuation",
        json!({"operating_margin_used": 0.25}),
    );
    rec.decide_gate(None, approve("ana"), Utc::now()).unwrap();
    complete(&mut rec, "report", json!({}));
    assert_eq!(rec.state, WorkflowState::Completed);

    // Same value as used: settled, nothing runs again.
    let out = rec
        .settle_assumption(
            "operating_margin",
            0.25,
            "L1".into(),
            "debate".into(),
            Utc::now(),
        )
        .unwrap();
    assert!(out.renewed.is_empty());
    assert_eq!(rec.resolved_assumptions["operating_margin"], json!(0.25));
    assert_eq!(rec.state, WorkflowState::Completed);
    assert!(rec
        .settle_assumption(
            "operating_margin",
            0.25,
            "again".into(),
            "debate".into(),
            Utc::now()
        )
        .is_none());
    // Another metric: nothing used it.
    let out = rec
        .settle_assumption("beta", 1.2, "L2".into(), "debate".into(), Utc::now())
        .unwrap();
    assert!(out.renewed.is_empty());

    // A different value: valuation, then the report after it; not the gate.
    let out = rec
        .settle_assumption(
            "operating_margin",
            0.30,
            "L2".into(),
            "debate".into(),
            Utc::now(),
        )
        .unwrap();
    assert_eq!(
        out.renewed,
        vec!["valuation".to_string(), "report".to_string()]
    );
    assert_eq!(out.newly_ready, vec!["valuation".to_string()]);
    assert_eq!(rec.state, WorkflowState::Running);
    assert_eq!(rec.tasks["review"].state, TaskRunState::Completed);
    let inputs = complete(
        &mut rec,
        "valuation",
        json!({"operating_margin_used": 0.30}),
    );
    assert_eq!(
        inputs["resolved_assumptions"]["operating_margin"],
        json!(0.30)
    );
    complete(&mut rec, "report", json!({}));
    assert_eq!(rec.state, WorkflowState::Completed);
    assert_eq!(rec.reruns.last().unwrap().groups.len(), 2);
}

#[test]
fn equal_stage_lists_of_reloaded_workflows_are_shared_again() {
    let a = stock_with_gate();
    let b = stock_with_gate();
    let text = serde_json::to_string(&a).unwrap();
    let a2: WorkflowRecord = serde_json::from_str(&text).unwrap();
    let b2: WorkflowRecord = serde_json::from_str(&serde_json::to_string(&b).unwrap()).unwrap();
    assert!(
        !std::sync::Arc::ptr_eq(&a2.stages, &b2.stages),
        "read back apart"
    );
    let mut lists = StageLists::default();
    let sa = lists.intern("p", a2.stages.clone());
    let sb = lists.intern("p", b2.stages.clone());
    assert!(std::sync::Arc::ptr_eq(&sa, &sb), "one shared list again");
    let mut other = (*b2.stages).clone();
    other.pop();
    let so = lists.intern("p", std::sync::Arc::new(other));
    assert!(
        !std::sync::Arc::ptr_eq(&sa, &so),
        "a different list stays apart"
    );
}
