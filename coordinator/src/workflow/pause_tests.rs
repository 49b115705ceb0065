//! The pause state machine, checkpoints and resume plans.

use chrono::Utc;
use serde_json::{json, Value};

use caucus_shared::messages::ResumePlan;
use caucus_shared::task::{ErrorClass, TaskError, TaskEvent, TaskStatus};

use super::*;

fn stage(name: &str, deps: &[&str]) -> StageDef {
    StageDef {
        name: name.into(),
        agent_type: name.into(),
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        expected: 1.0,
        timeout: None,
        retry: StageRetry {
            max_attempts: 2,
            backoff_initial_ms: 10,
            backoff_max_ms: 10,
        },
        fan_out: 1,
        params: Value::Null,
        kind: Default::default(),
    }
}

/// screening → business → financial ┐
/// screening → strategy ────────────┴→ valuation → report
fn stock() -> WorkflowRecord {
    instantiate(
        "w".into(),
        "AAPL".into(),
        "p".into(),
        vec![
            stage("screening", &[]),
            stage("business", &["screening"]),
            stage("financial", &["business"]),
            stage("strategy", &["screening"]),
            stage("valuation", &["financial", "strategy"]),
            stage("report", &["valuation"]),
        ],
        10,
        Utc::now(),
    )
}

fn ev(rec: &WorkflowRecord, key: &str, status: TaskStatus) -> TaskEvent {
    TaskEvent {
        schema_version: 1,
        task_id: rec.task_id(key),
        workflow_id: rec.workflow_id.clone(),
        stage: key.into(),
        agent_type: key.into(),
        attempt: rec.tasks[key].attempt,
        status,
        worker_id: "w1".into(),
        output: (status == TaskStatus::Completed).then(|| json!({"k": key})),
        error: None,
        message: None,
        started_at: None,
        at: Utc::now(),
        partition: None,
    }
}

fn fail(rec: &mut WorkflowRecord, key: &str, class: ErrorClass, error_type: &str) -> EventOutcome {
    let mut e = ev(rec, key, TaskStatus::Failed);
    e.error = Some(TaskError {
        class,
        error_type: error_type.into(),
        message: format!("{error_type} from koyfin"),
        data_source: Some("koyfin".into()),
    });
    rec.apply_event(&e, Utc::now())
}

fn run(rec: &mut WorkflowRecord, key: &str) {
    rec.dispatch(key, Utc::now()).expect("dispatchable");
    let e = ev(rec, key, TaskStatus::Completed);
    rec.apply_event(&e, Utc::now());
}

fn human() -> PauseSpec {
    PauseSpec {
        reason: "maintenance".into(),
        trigger_source: "human".into(),
        ..PauseSpec::default()
    }
}

#[test]
fn pause_waits_for_in_flight_then_pauses_and_records_late_results() {
    let mut r = stock();
    run(&mut r, "screening");
    r.dispatch("business", Utc::now()).unwrap();
    r.dispatch("strategy", Utc::now()).unwrap();
    assert_eq!(
        r.request_pause(human(), Utc::now()),
        Ok(PauseOutcome::Pausing)
    );
    assert_eq!(r.state, WorkflowState::Pausing);
    // Business completes: financial becomes ready but is not dispatchable.
    let e = ev(&r, "business", TaskStatus::Completed);
    r.apply_event(&e, Utc::now());
    assert_eq!(r.tasks["financial"].state, TaskRunState::Ready);
    assert!(r.dispatchable(Utc::now()).is_empty());
    assert!(r.dispatch("financial", Utc::now()).is_none());
    assert_eq!(r.state, WorkflowState::Pausing, "strategy still in flight");
    let e = ev(&r, "strategy", TaskStatus::Completed);
    r.apply_event(&e, Utc::now());
    assert_eq!(r.state, WorkflowState::Paused);
    assert!(r.paused_at().is_some());
    // A second pause is merged, not an error.
    assert_eq!(
        r.request_pause(human(), Utc::now()),
        Ok(PauseOutcome::AlreadyPaused)
    );
    let cp = Checkpoint::of(&r, Utc::now());
    assert_eq!(cp.checkpoint_id, "w.1");
    assert_eq!(cp.completed.len(), 3);
    assert_eq!(cp.completed["business"].output, json!({"k": "business"}));
    assert!(cp.in_flight.is_empty());
    let plan = resolve(&cp, InFlightPolicy::Wait);
    assert_eq!(plan.skip, vec!["business", "screening", "strategy"]);
    assert_eq!(plan.restart, vec!["financial", "report", "valuation"]);
    assert!(plan.wait.is_empty());
    r.resume(&plan, Utc::now()).unwrap();
    assert_eq!(r.state, WorkflowState::Running);
    assert!(r.pause.is_none());
    assert_eq!(r.dispatchable(Utc::now()), vec!["financial".to_string()]);
    assert_eq!(r.tasks["screening"].attempt, 1, "completed tasks untouched");
}

#[test]
fn illegal_transitions_name_from_and_to() {
    let mut r = stock();
    let e = r.check_resume().unwrap_err();
    assert_eq!(
        (e.from, e.to),
        (WorkflowState::Pending, WorkflowState::Resuming)
    );
    assert!(e.to_string().contains("pending → resuming"), "{e}");
    let e = r.resume(&ResumePlan::default(), Utc::now()).unwrap_err();
    assert!(matches!(e, ResumeError::Illegal(_)));
    r.dispatch("screening", Utc::now()).unwrap();
    r.request_pause(human(), Utc::now()).unwrap();
    let e = r.check_resume().unwrap_err();
    assert_eq!(e.from, WorkflowState::Pausing);
    // Finish the workflow; pausing it then is illegal.
    let mut done = stock();
    for k in [
        "screening",
        "business",
        "financial",
        "strategy",
        "valuation",
        "report",
    ] {
        run(&mut done, k);
    }
    assert_eq!(done.state, WorkflowState::Completed);
    let e = done.request_pause(human(), Utc::now()).unwrap_err();
    assert_eq!(
        (e.from, e.to),
        (WorkflowState::Completed, WorkflowState::Pausing)
    );
    assert!(e.to_string().contains("completed → pausing"));
}

#[test]
fn cancel_in_flight_pauses_at_once_and_keeps_late_results() {
    let mut r = stock();
    run(&mut r, "screening");
    r.dispatch("business", Utc::now()).unwrap();
    let spec = PauseSpec {
        cancel_in_flight: true,
        ..human()
    };
    assert_eq!(r.request_pause(spec, Utc::now()), Ok(PauseOutcome::Paused));
    let cp = Checkpoint::of(&r, Utc::now());
    assert_eq!(cp.in_flight.keys().collect::<Vec<_>>(), vec!["business"]);
    // The late result is recorded; nothing new is dispatched.
    let e = ev(&r, "business", TaskStatus::Completed);
    assert!(matches!(
        r.apply_event(&e, Utc::now()),
        EventOutcome::Completed { .. }
    ));
    assert_eq!(r.tasks["business"].state, TaskRunState::Completed);
    assert!(r.dispatchable(Utc::now()).is_empty());
    assert_eq!(r.state, WorkflowState::Paused);
}

#[test]
fn in_flight_tasks_are_waited_for_or_restarted() {
    let mut r = stock();
    run(&mut r, "screening");
    run(&mut r, "business");
    r.dispatch("financial", Utc::now()).unwrap();
    r.dispatch("strategy", Utc::now()).unwrap();
    // Strategy fails with a quota error (tier 2) while financial runs.
    let o = fail(&mut r, "strategy", ErrorClass::Transient, "quota_exceeded");
    assert!(matches!(
        o,
        EventOutcome::Failed(RetryDecision::Halt {
            tier: Tier::Pause,
            ..
        })
    ));
    assert_eq!(r.state, WorkflowState::Pausing);
    // Pretend the coordinator paused without waiting (cancel_in_flight).
    r.pause.as_mut().unwrap().cancel_in_flight = true;
    r.settle_pause(Utc::now());
    assert_eq!(r.state, WorkflowState::Paused);
    let cp = Checkpoint::of(&r, Utc::now());
    assert_eq!(
        cp.failed["strategy"].error.as_ref().unwrap().error_type,
        "quota_exceeded"
    );
    let wait = resolve(&cp, InFlightPolicy::Wait);
    assert_eq!(wait.restart, vec!["report", "strategy", "valuation"]);
    assert_eq!(wait.wait, vec!["financial"]);
    assert_eq!(wait.skip, vec!["business", "screening"]);
    let restart = resolve(&cp, InFlightPolicy::Restart);
    assert_eq!(
        restart.restart,
        vec!["financial", "report", "strategy", "valuation"]
    );
    assert!(restart.wait.is_empty());

    let mut waited = r.clone();
    let renewed = waited.resume(&wait, Utc::now()).unwrap();
    assert_eq!(renewed, vec!["strategy"]);
    assert_eq!(waited.tasks["strategy"].attempt, 2);
    assert_eq!(waited.tasks["strategy"].state, TaskRunState::Ready);
    assert_eq!(waited.tasks["financial"].state, TaskRunState::Dispatched);
    assert_eq!(waited.tasks["financial"].attempt, 1);

    let renewed = r.resume(&restart, Utc::now()).unwrap();
    assert_eq!(renewed, vec!["financial", "strategy"]);
    assert_eq!(r.tasks["financial"].attempt, 2);
    // The old attempt's late result is now stale.
    let mut late = ev(&r, "financial", TaskStatus::Completed);
    late.attempt = 1;
    assert_eq!(
        r.apply_event(&late, Utc::now()),
        EventOutcome::Ignored("stale attempt")
    );
}

#[test]
fn a_plan_that_reruns_a_completed_task_is_refused() {
    let mut r = stock();
    run(&mut r, "screening");
    r.request_pause(human(), Utc::now()).unwrap();
    let bad = ResumePlan {
        restart: vec!["screening".into()],
        ..ResumePlan::default()
    };
    let e = r.resume(&bad, Utc::now()).unwrap_err();
    assert!(e.to_string().contains("never re-runs"), "{e}");
    let unknown = ResumePlan {
        restart: vec!["nope".into()],
        ..ResumePlan::default()
    };
    assert!(matches!(
        r.resume(&unknown, Utc::now()),
        Err(ResumeError::InvalidPlan(_))
    ));
    assert_eq!(
        r.state,
        WorkflowState::Paused,
        "a refused plan changes nothing"
    );
}

#[test]
fn resumed_task_gets_a_fresh_retry_budget_and_a_repeat_escalates() {
    let mut r = stock();
    r.dispatch("screening", Utc::now()).unwrap();
    // Permanent error: tier 2 pause.
    let o = fail(&mut r, "screening", ErrorClass::Permanent, "exit_status");
    assert!(matches!(
        o,
        EventOutcome::Failed(RetryDecision::Halt {
            tier: Tier::Pause,
            ..
        })
    ));
    assert_eq!(r.state, WorkflowState::Paused);
    let plan = r.resume_plan(InFlightPolicy::Wait, Utc::now());
    r.resume(&plan, Utc::now()).unwrap();
    let d = r.dispatch("screening", Utc::now()).unwrap();
    assert_eq!(d.attempt, 2);
    // A transient failure retries: the budget counts from the resume.
    let o = fail(&mut r, "screening", ErrorClass::Transient, "timeout");
    assert!(matches!(
        o,
        EventOutcome::Failed(RetryDecision::Retry { attempt: 3, .. })
    ));
    r.tasks.get_mut("screening").unwrap().not_before = None;
    r.dispatch("screening", Utc::now()).unwrap();
    // The same permanent error again: tier 3, escalated, still paused.
    let o = fail(&mut r, "screening", ErrorClass::Permanent, "exit_status");
    assert_eq!(
        o,
        EventOutcome::Failed(RetryDecision::Halt {
            tier: Tier::Escalate,
            rule: "permanent_error_repeated".into()
        })
    );
    assert_eq!(r.state, WorkflowState::Paused);
    let p = r.pause.as_ref().unwrap();
    assert!(p.escalated);
    assert_eq!(p.tier, Some(3));
    assert_eq!(p.seq, 2);
    assert_eq!(p.trigger_source, "tier3_failure");
}
