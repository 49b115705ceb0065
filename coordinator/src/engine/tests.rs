use chrono::{Duration, Utc};
use serde_json::Value;

use caucus_shared::task::{TaskEvent, TaskStatus};

use super::*;
use crate::workflow::{instantiate, StageDef, StageRetry};

fn stage(name: &str, agent: &str, deps: &[&str], expected: f64) -> StageDef {
    StageDef {
        name: name.into(),
        agent_type: agent.into(),
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        expected,
        timeout: None,
        retry: StageRetry::default(),
        fan_out: 1,
        params: Value::Null,
        kind: Default::default(),
    }
}

fn done(d: &TaskDispatch) -> TaskEvent {
    TaskEvent {
        schema_version: 1,
        task_id: d.task_id.clone(),
        workflow_id: d.workflow_id.clone(),
        stage: d.stage.clone(),
        agent_type: d.agent_type.clone(),
        attempt: d.attempt,
        status: TaskStatus::Completed,
        worker_id: "w".into(),
        output: Some(Value::Null),
        error: None,
        message: None,
        started_at: None,
        at: Utc::now(),
        partition: None,
    }
}

#[test]
fn longest_remaining_path_starts_first_at_capacity_one() {
    // Two workflows whose first task shares agent type `a`; the first one
    // submitted has the SHORTER remaining path, so FIFO would pick it.
    let now = Utc::now();
    let short = instantiate(
        "w-short".into(),
        "S".into(),
        "p".into(),
        vec![stage("x", "a", &[], 1.0)],
        10,
        now,
    );
    let long = instantiate(
        "w-long".into(),
        "L".into(),
        "p".into(),
        vec![stage("x", "a", &[], 1.0), stage("y", "b", &["x"], 5.0)],
        10,
        now + Duration::milliseconds(1),
    );
    let mut e = Engine::new();
    e.insert(short);
    e.insert(long);
    let (first, _) = e.next_dispatches(now, |_| 1);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].workflow_id, "w-long");
    // Capacity is full until the first one finishes.
    assert!(e.next_dispatches(now, |_| 1).0.is_empty());
    e.apply_event(&done(&first[0]), now);
    let (next, _) = e.next_dispatches(now, |_| 1);
    let ids: Vec<_> = next.iter().map(|d| d.workflow_id.as_str()).collect();
    assert!(ids.contains(&"w-short"), "{ids:?}");
}

#[test]
fn never_exceeds_capacity_and_reports_load() {
    let now = Utc::now();
    let mut e = Engine::new();
    for i in 0..10 {
        e.insert(instantiate(
            format!("w{i}"),
            format!("I{i}"),
            "p".into(),
            vec![stage("x", "a", &[], 1.0)],
            10,
            now,
        ));
    }
    let (d, dirty) = e.next_dispatches(now, |_| 3);
    assert_eq!(d.len(), 3);
    assert_eq!(dirty.len(), 3);
    let load = e.load(now + Duration::milliseconds(40));
    assert_eq!(load["a"].in_flight, 3);
    assert_eq!(load["a"].ready, 7);
    assert!(load["a"].oldest_wait_ms >= 40);
    assert!(e.next_dispatches(now, |_| 3).0.is_empty());
    e.apply_event(&done(&d[0]), now);
    // Duplicate completion frees nothing more.
    assert!(e.apply_event(&done(&d[0]), now).is_none());
    assert_eq!(e.next_dispatches(now, |_| 3).0.len(), 1);
}

#[test]
fn reload_counts_in_flight_and_requeues_ready() {
    let now = Utc::now();
    let mut e = Engine::new();
    e.insert(instantiate(
        "w".into(),
        "I".into(),
        "p".into(),
        vec![stage("x", "a", &[], 1.0), stage("z", "a", &[], 1.0)],
        10,
        now,
    ));
    let (d, _) = e.next_dispatches(now, |_| 1);
    assert_eq!(d.len(), 1);
    // A restarted coordinator rebuilds from the stored record.
    let stored = e.get("w").unwrap().clone();
    let mut e2 = Engine::new();
    e2.insert(stored);
    assert_eq!(e2.load(now)["a"].in_flight, 1);
    assert!(e2.next_dispatches(now, |_| 1).0.is_empty());
    assert_eq!(e2.next_dispatches(now, |_| 2).0.len(), 1);
}

#[test]
fn a_requeued_dispatch_goes_again_as_the_same_attempt_once_due() {
    let now = Utc::now();
    let mut e = Engine::new();
    e.insert(instantiate(
        "w".into(),
        "I".into(),
        "p".into(),
        vec![stage("x", "a", &[], 1.0)],
        10,
        now,
    ));
    let (first, _) = e.next_dispatches(now, |_| 1);
    assert_eq!(first.len(), 1);
    let at = now + Duration::seconds(1);
    e.requeue_at(&first[0].workflow_id, &first[0].task_id, at);
    // Its slot is free, but it waits until `at`.
    assert_eq!(e.load(now)["a"].in_flight, 0);
    assert!(e.next_dispatches(now, |_| 1).0.is_empty());
    let (again, _) = e.next_dispatches(at, |_| 1);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].task_id, first[0].task_id);
    assert_eq!(again[0].attempt, first[0].attempt);
    assert_eq!(again[0].msg_id(), first[0].msg_id());
    // A task no longer dispatched is left alone.
    e.apply_event(&done(&again[0]), at);
    e.requeue_at(&again[0].workflow_id, &again[0].task_id, at);
    assert!(e.next_dispatches(at, |_| 1).0.is_empty());
}
