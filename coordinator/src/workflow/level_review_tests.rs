//! The level review gate on pure records: levels, conflicts, the mode
//! table, normalisation, and the review reaching next-level inputs.

use std::collections::BTreeMap;

use chrono::Utc;
use serde_json::{json, Value};

use caucus_shared::task::{ErrorClass, TaskError, TaskEvent, TaskStatus};

use super::*;
use crate::pipeline::{LevelReviewSpec, RetryPolicy};

fn stage(name: &str, deps: &[&str]) -> StageDef {
    StageDef {
        name: name.into(),
        agent_type: "dev".into(),
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        expected: 1.0,
        timeout: None,
        retry: StageRetry {
            max_attempts: 1,
            backoff_initial_ms: 10,
            backoff_max_ms: 10,
        },
        fan_out: 1,
        params: Value::Null,
        kind: StageKind::Task,
    }
}

/// a, b (level 0) → c (needs a only, level 1) → d (level 2).
fn diamondish() -> Vec<StageDef> {
    vec![
        stage("a", &[]),
        stage("b", &[]),
        stage("c", &["a"]),
        stage("d", &["c"]),
    ]
}

fn policy(mode: LevelReviewMode) -> LevelReviewPolicy {
    LevelReviewPolicy {
        mode,
        agent: "reviewer".into(),
        expected: 1.0,
        timeout: None,
        retry: StageRetry {
            max_attempts: 1,
            backoff_initial_ms: 10,
            backoff_max_ms: 10,
        },
    }
}

fn record(mode: LevelReviewMode) -> WorkflowRecord {
    instantiate(
        "w".into(),
        "ITEM".into(),
        "p".into(),
        diamondish(),
        10,
        Utc::now(),
    )
    .with_level_review(policy(mode))
}

fn event(rec: &WorkflowRecord, key: &str, status: TaskStatus, output: Option<Value>) -> TaskEvent {
    TaskEvent {
        schema_version: 1,
        task_id: rec.task_id(key),
        workflow_id: rec.workflow_id.clone(),
        stage: key.into(),
        agent_type: rec.tasks[key].agent_type.clone(),
        attempt: rec.tasks[key].attempt,
        status,
        worker_id: "w1".into(),
        output,
        error: (status == TaskStatus::Failed).then(|| TaskError {
            class: ErrorClass::Permanent,
            error_type: "bad_review".into(),
            message: "reviewer broke".into(),
            ..TaskError::default()
        }),
        message: None,
        started_at: None,
        at: Utc::now(),
        partition: None,
    }
}

/// Dispatches `key` and completes it with `output`; returns the dispatch
/// inputs and the newly ready keys.
fn complete(
    rec: &mut WorkflowRecord,
    key: &str,
    output: Value,
) -> (BTreeMap<String, Value>, Vec<String>) {
    let d = rec.dispatch(key, Utc::now()).expect("dispatchable");
    let e = event(rec, key, TaskStatus::Completed, Some(output));
    match rec.apply_event(&e, Utc::now()) {
        EventOutcome::Completed { newly_ready, .. } => (d.inputs, newly_ready),
        o => panic!("{o:?}"),
    }
}

fn modified(resources: &[&str]) -> Value {
    json!({"summary": "did work", "modified_resources": resources})
}

#[test]
fn levels_are_dependency_depths() {
    let stock = vec![
        stage("screening", &[]),
        stage("business", &["screening"]),
        stage("financial", &["business"]),
        stage("strategy", &["screening"]),
        stage("valuation", &["financial", "strategy"]),
        stage("report", &["valuation"]),
    ];
    let l = stage_levels(&stock);
    let got: Vec<(&str, u32)> = l.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        got,
        vec![
            ("business", 1),
            ("financial", 2),
            ("report", 4),
            ("screening", 0),
            ("strategy", 1),
            ("valuation", 3)
        ]
    );
    let mut with_review = stock.clone();
    with_review.push(stage(&review_key(1), &["business", "strategy"]));
    assert_eq!(stage_levels(&with_review), l, "review stages have no level");
}

#[test]
fn modified_resources_accept_both_names_and_shapes() {
    let out = json!({
        "modified_resources": ["src/app.py", " ./src/app.py ", {"resource": "db.users"}, 3, ""],
        "files_modified": [{"file_path": "src/models.py"}, {"path": "README.md"}]
    });
    assert_eq!(
        modified_resources(&out),
        vec!["README.md", "db.users", "src/app.py", "src/models.py"]
    );
    assert!(modified_resources(&json!("text")).is_empty());
    assert!(modified_resources(&json!({"modified_resources": "x"})).is_empty());
}

#[test]
fn conflicts_need_two_tasks_on_one_resource() {
    let t = |task: &str, r: &[&str]| TaskSummary {
        task: task.into(),
        stage: task.into(),
        agent_type: "dev".into(),
        modified_resources: r.iter().map(|s| s.to_string()).collect(),
        summary: None,
        finished_at: None,
    };
    assert!(detect_conflicts(&[t("a", &["x"]), t("b", &["y"])]).is_empty());
    let c = detect_conflicts(&[t("b", &["x", "z"]), t("a", &["x"]), t("c#1", &["x", "z"])]);
    assert_eq!(
        c,
        vec![
            Conflict {
                resource: "x".into(),
                tasks: vec!["a".into(), "b".into(), "c#1".into()]
            },
            Conflict {
                resource: "z".into(),
                tasks: vec!["b".into(), "c#1".into()]
            }
        ]
    );
}

#[test]
fn mode_table() {
    let one = [Conflict {
        resource: "x".into(),
        tasks: vec!["a".into(), "b".into()],
    }];
    use LevelReviewMode::*;
    for (mode, conflicts, want) in [
        (Off, &one[..], false),
        (Off, &[][..], false),
        (Always, &one[..], true),
        (Always, &[][..], true),
        (Conflicts, &one[..], true),
        (Conflicts, &[][..], false),
    ] {
        assert_eq!(
            needs_review(mode, conflicts),
            want,
            "{mode:?} {conflicts:?}"
        );
    }
}

#[test]
fn no_conflict_adds_no_task_but_the_level_is_a_barrier() {
    let mut r = record(LevelReviewMode::Conflicts);
    let (_, ready) = complete(&mut r, "a", modified(&["src/a.py"]));
    assert!(
        ready.is_empty(),
        "c waits for b, the rest of level 0: {ready:?}"
    );
    assert_eq!(r.tasks["c"].state, TaskRunState::Waiting);
    let (_, ready) = complete(&mut r, "b", modified(&["src/b.py"]));
    assert_eq!(ready, vec!["c"]);
    let (inputs, _) = complete(&mut r, "c", json!({}));
    assert!(!inputs.contains_key("level_review"));
    complete(&mut r, "d", json!({}));
    assert_eq!(r.state, WorkflowState::Completed);
    assert_eq!(r.tasks.len(), 4, "zero extra tasks");
    let levels = &r.level_review.as_ref().unwrap().levels;
    assert_eq!(levels.len(), 3);
    assert!(levels.iter().all(|o| o.review_task.is_none()));
}

#[test]
fn off_is_no_barrier_and_no_review() {
    let mut r = record(LevelReviewMode::Off);
    let (_, ready) = complete(&mut r, "a", modified(&["x"]));
    assert_eq!(ready, vec!["c"], "c needs a only");
    complete(&mut r, "b", modified(&["x"]));
    complete(&mut r, "c", json!({}));
    complete(&mut r, "d", json!({}));
    assert_eq!(r.state, WorkflowState::Completed);
    assert_eq!(r.tasks.len(), 4);
    assert!(r.level_review.as_ref().unwrap().levels.is_empty());
}

#[test]
fn conflict_dispatches_a_review_whose_warnings_reach_the_next_level() {
    let mut r = record(LevelReviewMode::Conflicts);
    complete(&mut r, "a", modified(&["src/app.py", "src/a.py"]));
    let (_, ready) = complete(&mut r, "b", modified(&["./src/app.py"]));
    let key = review_key(0);
    assert_eq!(ready, vec![key.clone()]);
    assert_eq!(
        r.tasks["c"].state,
        TaskRunState::Waiting,
        "c waits for the review"
    );
    // The review task goes to the review agent with the context and conflicts.
    let d = r.dispatch(&key, Utc::now()).unwrap();
    assert_eq!(d.agent_type, "reviewer");
    assert_eq!(d.stage, "review@level-0");
    assert_eq!(d.params["kind"], "level_review");
    assert_eq!(d.params["level"], 0);
    assert_eq!(d.params["next_level"], 1);
    assert_eq!(
        d.params["conflicts"],
        json!([{"resource": "src/app.py", "tasks": ["a", "b"]}])
    );
    assert_eq!(d.params["context"]["tasks"][0]["summary"], "did work");
    assert_eq!(d.inputs.len(), 2, "the level's outputs");
    assert!(d.priority > r.tasks["c"].priority, "on the path of level 1");
    let review = json!({
        "conflicts": [{"resource": "src/app.py", "resolved": true, "resolution": "kept b"}],
        "summary": "merged",
        "fixes_applied": ["rebased a onto b"],
        "warnings_for_next_level": ["import the new routes in src/main.py"],
        "duration_ms": 42
    });
    let e = event(&r, &key, TaskStatus::Completed, Some(review));
    let EventOutcome::Completed {
        newly_ready,
        workflow_completed,
    } = r.apply_event(&e, Utc::now())
    else {
        panic!()
    };
    assert_eq!(newly_ready, vec!["c"]);
    assert!(!workflow_completed);
    let (inputs, _) = complete(&mut r, "c", json!({}));
    let lr = &inputs["level_review"];
    assert_eq!(lr["level"], 0);
    assert_eq!(
        lr["warnings_for_next_level"],
        json!(["import the new routes in src/main.py"])
    );
    assert_eq!(lr["conflicts"][0]["resolved"], true);
    assert_eq!(lr["conflicts"][0]["tasks"], json!(["a", "b"]));
    assert_eq!(lr["duration_ms"], 42);
    assert!(inputs.contains_key("a"), "dependency outputs stay");
    // Level 2 receives no review (level 1 had none).
    let (inputs, _) = complete(&mut r, "d", json!({}));
    assert!(!inputs.contains_key("level_review"));
    assert_eq!(r.state, WorkflowState::Completed);
    let stored = r.level_review.as_ref().unwrap().levels[0]
        .review
        .clone()
        .unwrap();
    assert_eq!(stored.summary, "merged");
}

#[test]
fn always_reviews_every_level_including_the_last() {
    let mut r = record(LevelReviewMode::Always);
    complete(&mut r, "a", json!({}));
    let (_, ready) = complete(&mut r, "b", json!({}));
    assert_eq!(ready, vec!["review@level-0"]);
    let (_, ready) = complete(&mut r, "review@level-0", json!("looks fine"));
    assert_eq!(ready, vec!["c"]);
    let (_, ready) = complete(&mut r, "c", json!({}));
    assert_eq!(ready, vec!["review@level-1"]);
    let (_, ready) = complete(&mut r, "review@level-1", json!({"summary": "ok"}));
    assert_eq!(ready, vec!["d"]);
    let (inputs, ready) = complete(&mut r, "d", json!({}));
    assert_eq!(inputs["level_review"]["summary"], "ok");
    assert_eq!(ready, vec!["review@level-2"]);
    assert_eq!(
        r.state,
        WorkflowState::Running,
        "the last level is reviewed too"
    );
    let d = r.dispatch("review@level-2", Utc::now()).unwrap();
    assert_eq!(d.params["next_level"], Value::Null);
    let e = event(&r, "review@level-2", TaskStatus::Completed, Some(json!({})));
    r.apply_event(&e, Utc::now());
    assert_eq!(r.state, WorkflowState::Completed);
    assert_eq!(r.tasks.len(), 7);
}

#[test]
fn a_failed_review_pauses_and_resume_runs_it_again() {
    let mut r = record(LevelReviewMode::Always);
    complete(&mut r, "a", json!({}));
    complete(&mut r, "b", json!({}));
    let key = review_key(0);
    r.dispatch(&key, Utc::now()).unwrap();
    let e = event(&r, &key, TaskStatus::Failed, None);
    assert!(matches!(
        r.apply_event(&e, Utc::now()),
        EventOutcome::Failed(RetryDecision::Halt { .. })
    ));
    assert_eq!(r.state, WorkflowState::Paused);
    assert_eq!(r.pause.as_ref().unwrap().failed_tasks, vec![key.clone()]);
    assert_eq!(r.tasks["c"].state, TaskRunState::Waiting);
    let plan = r.resume_plan(InFlightPolicy::Wait, Utc::now());
    assert!(plan.restart.contains(&key));
    assert!(plan.skip.contains(&"a".to_string()));
    r.resume(&plan, Utc::now()).unwrap();
    assert_eq!(r.tasks[&key].state, TaskRunState::Ready);
    assert_eq!(r.tasks["c"].state, TaskRunState::Waiting);
    let (_, ready) = complete(&mut r, &key, json!({"summary": "second try"}));
    assert_eq!(ready, vec!["c"]);
}

#[test]
fn the_record_with_reviews_survives_a_round_trip() {
    let mut r = record(LevelReviewMode::Conflicts);
    complete(&mut r, "a", modified(&["x"]));
    complete(&mut r, "b", modified(&["x"]));
    let text = serde_json::to_string(&r).unwrap();
    let back: WorkflowRecord = serde_json::from_str(&text).unwrap();
    assert_eq!(back, r);
    assert!(back.stages.iter().any(|s| s.name == "review@level-0"));
    // A record stored before reviews existed has no gate.
    let mut old: Value = serde_json::to_value(instantiate(
        "w".into(),
        "I".into(),
        "p".into(),
        diamondish(),
        10,
        Utc::now(),
    ))
    .unwrap();
    assert!(old.get("level_review").is_none());
    old.as_object_mut().unwrap().remove("level_review");
    let mut old: WorkflowRecord = serde_json::from_value(old).unwrap();
    let (_, ready) = complete(&mut old, "a", modified(&["x"]));
    assert_eq!(ready, vec!["c"]);
}

#[test]
fn normalisation_accepts_seed_names_and_flags_problems() {
    let detected = vec![
        Conflict {
            resource: "src/app.py".into(),
            tasks: vec!["a".into(), "b".into()],
        },
        Conflict {
            resource: "db".into(),
            tasks: vec!["a".into(), "c".into()],
        },
    ];
    let seed = json!({
        "level_number": 1,
        "conflicts_detected": [
            {"file_path": "src/app.py", "ac_indices": [0, 1], "resolved": true,
             "resolution_description": "merged imports"},
            {"file_path": "docs/x.md", "resolved": true},
            {"nothing": 1}
        ],
        "review_summary": "two edits merged",
        "fixes_applied": "one fix",
        "warnings": ["re-run the linter"],
        "duration_seconds": 1.5,
        "level": 2
    });
    let r = normalise_review(1, &detected, &seed, 10);
    assert_eq!(r.summary, "two edits merged");
    assert_eq!(r.fixes_applied, vec!["one fix"]);
    assert_eq!(r.duration_ms, 1500);
    assert_eq!(r.conflicts.len(), 3);
    assert!(r.conflicts[0].resolved);
    assert_eq!(r.conflicts[0].resolution, "merged imports");
    assert_eq!(r.conflicts[1].resource, "db");
    assert!(!r.conflicts[1].resolved, "not mentioned = not resolved");
    assert_eq!(r.conflicts[2].resource, "docs/x.md");
    assert_eq!(
        r.warnings_for_next_level,
        vec![
            "re-run the linter".to_string(),
            "unresolved conflict on `db` (modified by a, c): the review did not resolve it"
                .to_string()
        ]
    );
    assert_eq!(r.issues.len(), 2, "{:?}", r.issues);
    assert!(r.issues.iter().any(|i| i.contains("names no resource")));
    assert!(r.issues.iter().any(|i| i.contains("level 2")));

    let text = normalise_review(0, &[], &json!("all good"), 7);
    assert_eq!(text.summary, "all good");
    assert_eq!(text.duration_ms, 7);
    assert!(text.issues.is_empty());
    let bad = normalise_review(0, &detected[..1], &json!([1, 2]), 0);
    assert_eq!(
        bad.issues,
        vec!["the review output is an array, not an object or a text"]
    );
    assert_eq!(bad.warnings_for_next_level.len(), 1);
    let typed = normalise_review(0, &[], &json!({"summary": 3, "conflicts": "x"}), 0);
    assert_eq!(typed.issues.len(), 2, "{:?}", typed.issues);
}

#[test]
fn policy_resolution_prefers_the_pipeline() {
    let caps: BTreeMap<String, u32> = [("x".to_string(), 1)].into();
    let p =
        LevelReviewPolicy::resolve(None, &caps, LevelReviewMode::Conflicts, "reviewer").unwrap();
    assert_eq!(p.mode, LevelReviewMode::Conflicts);
    assert_eq!(p.agent, "reviewer");
    assert_eq!(p.expected, 1.0);
    let spec = LevelReviewSpec {
        mode: Some(LevelReviewMode::Always),
        agent: Some("qa".into()),
        expected_duration: Some(2.0),
        timeout: Some(4.0),
        retry: Some(RetryPolicy {
            max_attempts: 5,
            ..RetryPolicy::default()
        }),
    };
    let p =
        LevelReviewPolicy::resolve(Some(&spec), &caps, LevelReviewMode::Off, "reviewer").unwrap();
    assert_eq!(
        (
            p.mode,
            p.agent.as_str(),
            p.expected,
            p.timeout,
            p.retry.max_attempts
        ),
        (LevelReviewMode::Always, "qa", 2.0, Some(4.0), 5)
    );
    let no_agent = LevelReviewSpec {
        agent: None,
        ..spec
    };
    let e = LevelReviewPolicy::resolve(Some(&no_agent), &caps, LevelReviewMode::Off, "reviewer")
        .unwrap_err();
    assert!(
        e.to_string().contains("`reviewer`") && e.to_string().contains("[capacities]"),
        "{e}"
    );
}

#[test]
fn the_engine_queues_a_review_under_the_review_agent_within_its_capacity() {
    use crate::engine::Engine;
    let mut e = Engine::new();
    let rec = record(LevelReviewMode::Conflicts);
    let id = rec.workflow_id.clone();
    e.insert(rec);
    let cap = |dev: usize, reviewer: usize| {
        move |a: &str| match a {
            "dev" => dev,
            "reviewer" => reviewer,
            _ => 0,
        }
    };
    let (d, _) = e.next_dispatches(Utc::now(), cap(2, 0));
    assert_eq!(d.len(), 2, "a and b");
    for key in ["a", "b"] {
        let rec = e.get(&id).unwrap();
        let ev = event(rec, key, TaskStatus::Completed, Some(modified(&["x"])));
        e.apply_event(&ev, Utc::now()).unwrap();
    }
    let load = e.load(Utc::now());
    assert_eq!(load["reviewer"].ready, 1, "{load:?}");
    let (d, _) = e.next_dispatches(Utc::now(), cap(2, 0));
    assert!(d.is_empty(), "no reviewer capacity, nothing dispatched");
    let (d, _) = e.next_dispatches(Utc::now(), cap(2, 1));
    assert_eq!(d.len(), 1);
    assert_eq!(
        (d[0].stage.as_str(), d[0].agent_type.as_str()),
        ("review@level-0", "reviewer")
    );
    assert_eq!(e.load(Utc::now())["reviewer"].in_flight, 1);
    let rec = e.get(&id).unwrap();
    let ev = event(
        rec,
        "review@level-0",
        TaskStatus::Completed,
        Some(json!({})),
    );
    e.apply_event(&ev, Utc::now()).unwrap();
    assert_eq!(e.load(Utc::now())["reviewer"].in_flight, 0);
    let (d, _) = e.next_dispatches(Utc::now(), cap(2, 1));
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].stage, "c");
    assert_eq!(
        d[0].inputs["level_review"]["warnings_for_next_level"][0],
        "unresolved conflict on `x` (modified by a, b): the review did not resolve it"
    );
}

#[test]
fn gates_wait_for_the_level_review_and_a_gate_level_is_not_reviewed() {
    let mut gate = stage("approve", &["c"]);
    gate.kind = StageKind::Gate;
    gate.agent_type = GATE_AGENT.into();
    let mut stages = diamondish();
    stages.pop();
    stages.push(gate);
    stages.push(stage("d", &["approve"]));
    let mut r = instantiate("w".into(), "I".into(), "p".into(), stages, 10, Utc::now())
        .with_level_review(policy(LevelReviewMode::Always));
    complete(&mut r, "a", json!({}));
    complete(&mut r, "b", json!({}));
    complete(&mut r, "review@level-0", json!({}));
    let (_, ready) = complete(&mut r, "c", json!({}));
    assert_eq!(ready, vec!["review@level-1"]);
    assert_eq!(
        r.tasks["approve"].state,
        TaskRunState::Waiting,
        "the gate waits too"
    );
    complete(&mut r, "review@level-1", json!({"warnings": ["mind c"]}));
    assert_eq!(r.tasks["approve"].state, TaskRunState::AwaitingApproval);
    let req = GateRequest {
        action: GateAction::Approve,
        decided_by: "ana".into(),
        rationale: String::new(),
        send_back_to: Vec::new(),
    };
    r.decide_gate(None, req, Utc::now()).unwrap();
    assert_eq!(
        r.tasks["d"].state,
        TaskRunState::Ready,
        "no review of a level of gates only"
    );
    assert!(!r.tasks.contains_key("review@level-2"));
    let (inputs, _) = complete(&mut r, "d", json!({}));
    assert!(!inputs.contains_key("level_review"));
    complete(&mut r, "review@level-3", json!({}));
    assert_eq!(r.state, WorkflowState::Completed);
}

#[test]
fn a_rerun_review_replaces_the_stored_review() {
    let mut r = record(LevelReviewMode::Conflicts);
    complete(&mut r, "a", modified(&["x"]));
    complete(&mut r, "b", modified(&["x"]));
    complete(&mut r, "review@level-0", json!({"summary": "first"}));
    let out = r
        .request_rerun(
            RerunRequest {
                reason: "reviewer was wrong".into(),
                requested_by: "ana".into(),
                groups: vec![vec!["review@level-0".into()]],
                assumptions: BTreeMap::new(),
                ..RerunRequest::default()
            },
            Utc::now(),
        )
        .unwrap();
    assert_eq!(out.renewed, vec!["review@level-0"]);
    assert_eq!(out.newly_ready, vec!["review@level-0"]);
    complete(&mut r, "review@level-0", json!({"summary": "second"}));
    let (inputs, _) = complete(&mut r, "c", json!({}));
    assert_eq!(inputs["level_review"]["summary"], "second");
}
