//! Research runs on a workflow record, event by event, with a given clock.

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use serde_json::{json, Value};

use caucus_shared::task::{ErrorClass, TaskError, TaskEvent, TaskStatus};

use super::state::{ResearchSettings, StreamState};
use super::{attach, Phase, ResearchSpecError, Verdict};
use crate::pipeline::builtin;
use crate::runtime::pipelines::stages_of;
use crate::workflow::{
    instantiate, EventOutcome, RetryDecision, StageDef, TaskRunState, WorkflowRecord, WorkflowState,
};

const UNIT_MS: u64 = 100;

fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-01-01T10:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

fn ms(n: i64) -> DateTime<Utc> {
    t0() + ChronoDuration::milliseconds(n)
}

fn stages() -> Vec<StageDef> {
    stages_of(&builtin("deep-research").unwrap()).unwrap()
}

fn settings() -> ResearchSettings {
    ResearchSettings {
        stagger: std::time::Duration::from_millis(20),
        ..ResearchSettings::default()
    }
}

fn record_with(stages: Vec<StageDef>) -> WorkflowRecord {
    let mut r = instantiate(
        "w".into(),
        "topic".into(),
        "deep-research".into(),
        stages,
        UNIT_MS,
        t0(),
    );
    assert!(attach(&mut r, Some(90.0), &settings(), t0()).unwrap());
    r
}

fn record() -> WorkflowRecord {
    record_with(stages())
}

fn ev(
    rec: &WorkflowRecord,
    key: &str,
    status: TaskStatus,
    output: Option<Value>,
    at: DateTime<Utc>,
) -> TaskEvent {
    TaskEvent {
        schema_version: 1,
        task_id: rec.task_id(key),
        workflow_id: rec.workflow_id.clone(),
        stage: key.into(),
        agent_type: rec.tasks[key].agent_type.clone(),
        attempt: 1,
        status,
        worker_id: "w1".into(),
        output,
        error: (status == TaskStatus::Failed).then(|| TaskError {
            class: ErrorClass::Permanent,
            error_type: "discovery_failed".into(),
            message: "no results".into(),
            data_source: None,
        }),
        message: None,
        started_at: None,
        at,
        partition: None,
    }
}

fn sources(stream: u32, n: usize) -> Value {
    let list: Vec<Value> = (0..n)
        .map(|i| json!({"id": format!("s{stream}-{i}"), "domain": format!("d{}", (stream as usize * 3 + i) % 10)}))
        .collect();
    json!({"sources": list, "writes": [
        {"key": format!("streams/stream-{stream}/sources.md"), "value": "list"}
    ]})
}

fn finish(rec: &mut WorkflowRecord, key: &str, out: Value, at: DateTime<Utc>) -> EventOutcome {
    rec.dispatch(key, at);
    let s = ev(rec, key, TaskStatus::Started, None, at);
    rec.apply_event(&s, at);
    let done = ev(rec, key, TaskStatus::Completed, Some(out), at);
    rec.apply_event(&done, at)
}

fn fail_stream(rec: &mut WorkflowRecord, key: &str, at: DateTime<Utc>) -> EventOutcome {
    rec.dispatch(key, at);
    let f = ev(rec, key, TaskStatus::Failed, None, at);
    rec.apply_event(&f, at)
}

fn good_validation() -> Value {
    let s: Vec<Value> = (0..10)
        .map(|_| json!({"validated": true, "credibility": 80, "cross_referenced": true, "contradicted": false}))
        .collect();
    json!({"sources": s, "writes": [{"key": "validation/validated.md", "value": "ok"}]})
}

fn good_analysis() -> Value {
    json!({"patterns": [1, 2, 3], "insights": (0..5).map(|_| json!({"confidence": 0.8, "evidence": ["s"]})).collect::<Vec<_>>()})
}

fn report() -> Value {
    json!({"sections": {"executive_summary": "s", "findings": "f", "recommendations": ["r"], "citations": ["c"]}})
}

fn phase(r: &WorkflowRecord) -> Phase {
    r.research.as_ref().unwrap().phase
}

fn actions(r: &WorkflowRecord) -> Vec<String> {
    r.research
        .as_ref()
        .unwrap()
        .audit
        .iter()
        .map(|e| format!("{} {}", e.agent, e.action))
        .collect()
}

#[test]
fn attach_staggers_streams_and_checks_the_phases() {
    let r = record();
    assert_eq!(phase(&r), Phase::Discovering);
    assert_eq!(r.tasks["discover#0"].not_before, None);
    assert_eq!(r.tasks["discover#3"].not_before, Some(ms(60)));
    assert_eq!(r.dispatchable(t0()), vec!["discover#0".to_string()]);
    assert_eq!(r.dispatchable(ms(20)).len(), 2);
    let res = r.research.as_ref().unwrap();
    assert_eq!(res.streams.len(), 5);
    assert_eq!(res.total_limit_ms, Some(9000));
    assert!(res.audit[0]
        .result
        .starts_with("INITIALIZING → DISCOVERING"));

    let mut st = stages();
    st[0].fan_out = 6;
    let mut r = instantiate("w".into(), "t".into(), "p".into(), st, 1, t0());
    assert_eq!(
        attach(&mut r, None, &settings(), t0()).unwrap_err(),
        ResearchSpecError::TooManyStreams {
            stage: "discover".into(),
            fan_out: 6,
            max: 5
        }
    );
    let mut st = stages();
    st[3].depends_on = vec!["consolidate".into()];
    let mut r = instantiate("w".into(), "t".into(), "p".into(), st, 1, t0());
    let e = attach(&mut r, None, &settings(), t0())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "stage `analyze` (ANALYZING) must depend on `validate`, the stage of the phase before it"
    );
    let mut st = stages();
    st[0].fan_out = 1;
    let mut r = instantiate("w".into(), "t".into(), "p".into(), st, 1, t0());
    let e = attach(&mut r, None, &settings(), t0())
        .unwrap_err()
        .to_string();
    assert_eq!(e, "stage `discover`: 1 streams can never give the 2 successful streams `min_successful_streams` asks for");
    let mut st = stages();
    st[4].kind = crate::pipeline::StageKind::Gate;
    let mut r = instantiate("w".into(), "t".into(), "p".into(), st, 1, t0());
    assert_eq!(
        attach(&mut r, None, &settings(), t0()).unwrap_err(),
        ResearchSpecError::GateInResearch("synthesize".into())
    );
    let mut st = stages();
    st.remove(4);
    let mut r = instantiate("w".into(), "t".into(), "p".into(), st, 1, t0());
    assert_eq!(
        attach(&mut r, None, &settings(), t0()).unwrap_err(),
        ResearchSpecError::MissingPhase(Phase::Synthesizing)
    );
    let mut st = stages();
    st[2].params["min_validated_ratio"] = json!(2);
    let mut r = instantiate("w".into(), "t".into(), "p".into(), st, 1, t0());
    assert!(matches!(
        attach(&mut r, None, &settings(), t0()),
        Err(ResearchSpecError::Threshold(_))
    ));
    // The seed's 2 s stagger with 100 ms time units: 8 s of stagger
    // against a 1.5 s discovery limit is refused, not run to a failure.
    let mut r = instantiate("w".into(), "t".into(), "p".into(), stages(), UNIT_MS, t0());
    let e = attach(&mut r, None, &ResearchSettings::default(), t0()).unwrap_err();
    assert_eq!(e.to_string(), "stage `discover`: 5 streams started 2000 ms apart need 8000 ms, but DISCOVERING is limited to 1500 ms; use a longer time unit or a shorter coordinator.research_stagger");
    let mut st = stages();
    for s in &mut st {
        s.params = Value::Null;
    }
    let mut r = instantiate("w".into(), "t".into(), "p".into(), st, 1, t0());
    assert!(!attach(&mut r, None, &settings(), t0()).unwrap());
    assert!(r.research.is_none());
}

#[test]
fn a_run_completes_phase_by_phase_with_an_audit_trail() {
    let mut r = record();
    for i in 0..5u32 {
        let o = finish(
            &mut r,
            &format!("discover#{i}"),
            sources(i + 1, 5),
            ms(100 + i as i64 * 20),
        );
        let ready = match o {
            EventOutcome::Completed { newly_ready, .. } => newly_ready,
            o => panic!("{o:?}"),
        };
        assert_eq!(
            ready.is_empty(),
            i < 4,
            "consolidate waits for every stream"
        );
    }
    assert_eq!(phase(&r), Phase::Consolidating);
    let res = r.research.as_ref().unwrap();
    assert_eq!(res.gates[&Phase::Discovering].verdict, Verdict::Pass);
    assert_eq!(res.pending_writes.len(), 5);
    assert!(res
        .streams
        .values()
        .all(|s| s.state == StreamState::Complete && s.sources == 5));
    // ETA: start + the stage's expected 10 units × 100 ms.
    assert_eq!(res.streams[&2].eta, Some(ms(120 + 1000)));
    finish(
        &mut r,
        "consolidate",
        json!({"sources": [{}], "writes": [{"key": "validation/all-sources.md", "value": "x"}]}),
        ms(300),
    );
    assert_eq!(phase(&r), Phase::Validating);
    finish(&mut r, "validate", good_validation(), ms(400));
    finish(&mut r, "analyze", good_analysis(), ms(500));
    assert_eq!(phase(&r), Phase::Synthesizing);
    let o = finish(&mut r, "synthesize", report(), ms(600));
    assert!(
        matches!(
            o,
            EventOutcome::Completed {
                workflow_completed: true,
                ..
            }
        ),
        "{o:?}"
    );
    assert_eq!(r.state, WorkflowState::Completed);
    assert_eq!(phase(&r), Phase::Complete);
    let transitions: Vec<String> = r
        .research
        .as_ref()
        .unwrap()
        .audit
        .iter()
        .filter(|e| e.action == "transition")
        .map(|e| e.result.clone())
        .collect();
    assert_eq!(
        transitions,
        [
            "INITIALIZING → DISCOVERING: setup complete; 5 streams, 20 ms apart",
            "DISCOVERING → CONSOLIDATING",
            "CONSOLIDATING → VALIDATING",
            "VALIDATING → ANALYZING",
            "ANALYZING → SYNTHESIZING",
            "SYNTHESIZING → COMPLETE",
        ]
    );
    let a = actions(&r);
    assert_eq!(
        a.iter()
            .filter(|x| *x == "coordinator quality_gate")
            .count(),
        5
    );
    assert!(a.contains(&"stream-3 stream_complete".to_string()));
    assert!(a.contains(&"research_validation complete".to_string()));
}

#[test]
fn one_failed_stream_is_marked_and_the_run_continues() {
    let mut r = record();
    for i in [0u32, 1, 3, 4] {
        finish(&mut r, &format!("discover#{i}"), sources(i + 1, 6), ms(100));
    }
    let o = fail_stream(&mut r, "discover#2", ms(150));
    assert_eq!(
        o,
        EventOutcome::Failed(RetryDecision::Isolated {
            newly_ready: vec!["consolidate".into()]
        })
    );
    assert_eq!(
        r.state,
        WorkflowState::Running,
        "no pause for a failed stream"
    );
    assert!(r.pause.is_none());
    let res = r.research.as_ref().unwrap();
    assert_eq!(
        res.gates[&Phase::Discovering].verdict,
        Verdict::PassWithFallback
    );
    let s3 = &res.streams[&3];
    assert_eq!(s3.state, StreamState::Failed);
    assert_eq!(s3.can_continue, Some(true));
    assert!(!s3.needs_intervention);
    assert_eq!(r.tasks["discover#2"].state, TaskRunState::Failed);
    let d = r.dispatch("consolidate", ms(160)).unwrap();
    assert!(
        d.inputs["discover"][2].is_null(),
        "the failed stream gives no output"
    );
}

#[test]
fn all_streams_failing_fails_and_escalates() {
    let mut r = record();
    for i in 0..4 {
        fail_stream(&mut r, &format!("discover#{i}"), ms(100));
        assert_eq!(r.state, WorkflowState::Running);
    }
    let o = fail_stream(&mut r, "discover#4", ms(200));
    assert_eq!(
        o,
        EventOutcome::Failed(RetryDecision::Isolated {
            newly_ready: vec![]
        })
    );
    assert_eq!(r.state, WorkflowState::Failed);
    assert_eq!(phase(&r), Phase::Failed);
    let res = r.research.as_ref().unwrap();
    let alert = res.alert.as_ref().unwrap();
    assert_eq!(alert.event_type, "workflow_escalated");
    assert_eq!(alert.severity, "critical");
    assert!(
        alert.reason.contains("0 of 5 streams successful"),
        "{}",
        alert.reason
    );
    assert!(res
        .streams
        .values()
        .all(|s| s.needs_intervention && s.can_continue == Some(false)));
    assert!(actions(&r).contains(&"coordinator escalation".to_string()));
    assert!(r
        .failure
        .as_deref()
        .unwrap()
        .contains("DISCOVERING quality gate failed"));
}

#[test]
fn writes_outside_the_key_space_are_refused_and_audited() {
    let mut r = record();
    let mut out = sources(2, 5);
    out["writes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "streams/stream-1/sources.md", "value": "overwrite"}));
    out["writes"]
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "report/final-report.md", "value": "fake"}));
    finish(&mut r, "discover#1", out, ms(100));
    let res = r.research.as_ref().unwrap();
    assert_eq!(res.refused_count, 2);
    assert_eq!(res.refused_writes[0].key, "streams/stream-1/sources.md");
    assert_eq!(res.pending_writes.len(), 1);
    assert_eq!(res.pending_writes[0].key, "streams/stream-2/sources.md");
    assert_eq!(
        res.streams[&2].keys,
        vec!["streams/stream-2/sources.md".to_string()]
    );
    let refused: Vec<&String> = res
        .audit
        .iter()
        .filter(|e| e.action == "write_refused")
        .map(|e| &e.result)
        .collect();
    assert_eq!(refused.len(), 2);
    assert!(
        refused[0].contains("outside the task's key space `streams/stream-2/`"),
        "{refused:?}"
    );
    let stored = r.tasks["discover#1"].output.as_ref().unwrap();
    assert_eq!(
        stored["writes"].as_array().unwrap().len(),
        1,
        "downstream never sees refused writes"
    );
}

#[test]
fn discovery_time_limit_times_out_open_streams_and_the_gate_decides() {
    let mut r = record();
    for i in 0..3u32 {
        finish(&mut r, &format!("discover#{i}"), sources(i + 1, 5), ms(100));
    }
    r.dispatch("discover#3", ms(100));
    // Discovery limit: 15 units × 100 ms.
    assert!(!r.research_due(ms(1500)));
    assert!(r.research_due(ms(1501)));
    assert!(r.research_tick(ms(1501)));
    let res = r.research.as_ref().unwrap();
    assert_eq!(res.streams[&4].state, StreamState::TimedOut);
    assert_eq!(res.streams[&5].state, StreamState::TimedOut);
    assert_eq!(
        res.gates[&Phase::Discovering].verdict,
        Verdict::PassWithFallback
    );
    assert_eq!(phase(&r), Phase::Consolidating);
    assert_eq!(r.tasks["consolidate"].state, TaskRunState::Ready);
    assert_eq!(
        r.tasks["discover#4"].error.as_ref().unwrap().error_type,
        "phase_timeout"
    );
    // A late completion of a timed-out stream changes nothing.
    let late = ev(
        &r,
        "discover#3",
        TaskStatus::Completed,
        Some(sources(4, 5)),
        ms(1600),
    );
    assert_eq!(
        r.apply_event(&late, ms(1600)),
        EventOutcome::Ignored("task already finished")
    );
}

#[test]
fn other_phase_time_limits_and_the_total_limit_fail_the_run() {
    let mut r = record();
    for i in 0..5u32 {
        finish(&mut r, &format!("discover#{i}"), sources(i + 1, 5), ms(100));
    }
    finish(&mut r, "consolidate", json!({"sources": [{}]}), ms(200));
    r.dispatch("validate", ms(200));
    // Validation: 20 units = 2000 ms from the phase start (200 ms).
    assert!(!r.research_tick(ms(2200)));
    assert!(r.research_tick(ms(2201)));
    assert_eq!(r.state, WorkflowState::Failed);
    assert_eq!(
        r.failure.as_deref(),
        Some("phase VALIDATING exceeded its time limit of 2000 ms")
    );
    let a = r.research.as_ref().unwrap().alert.as_ref().unwrap();
    assert_eq!(
        (a.event_type.as_str(), a.severity.as_str()),
        ("research_failed", "warning")
    );

    let mut st = stages();
    for s in &mut st {
        s.params["phase_limit"] = json!(1000);
    }
    let mut r = record_with(st);
    assert!(!r.research_tick(ms(9000)));
    assert!(r.research_tick(ms(9001)));
    assert!(r
        .failure
        .as_deref()
        .unwrap()
        .contains("total time limit of 9000 ms"));
}

#[test]
fn a_failed_gate_fails_the_run_without_escalation() {
    let mut r = record();
    for i in 0..5u32 {
        finish(&mut r, &format!("discover#{i}"), sources(i + 1, 5), ms(100));
    }
    finish(&mut r, "consolidate", json!({"sources": [{}]}), ms(200));
    finish(&mut r, "validate", good_validation(), ms(300));
    let mut weak = good_analysis();
    weak["patterns"] = json!([1, 2]);
    finish(&mut r, "analyze", weak, ms(400));
    assert_eq!(r.state, WorkflowState::Failed);
    assert_eq!(
        r.tasks["synthesize"].state,
        TaskRunState::Waiting,
        "never started"
    );
    let res = r.research.as_ref().unwrap();
    assert_eq!(res.gates[&Phase::Analyzing].verdict, Verdict::Fail);
    assert_eq!(res.alert.as_ref().unwrap().event_type, "research_failed");
}

#[test]
fn checkpoints_are_due_every_interval() {
    let mut r = record();
    let every = std::time::Duration::from_millis(180);
    assert!(!r.research_checkpoint_due(ms(179), every));
    assert!(r.research_checkpoint_due(ms(180), every));
    r.research_checkpointed("w.r1", ms(180));
    assert!(!r.research_checkpoint_due(ms(359), every));
    assert!(r.research_checkpoint_due(ms(360), every));
    let res = r.research.as_ref().unwrap();
    assert_eq!(res.checkpoints, 1);
    let last = &res.audit.last().unwrap().result;
    assert_eq!(last, "w.r1: phase DISCOVERING, 0/5 streams complete");
    // A stuck stream is named at the next checkpoint.
    r.dispatch("discover#0", ms(200));
    let s = ev(&r, "discover#0", TaskStatus::Started, None, ms(200));
    r.apply_event(&s, ms(200));
    assert_eq!(
        r.flag_overdue(ms(2000), 1.5),
        vec!["discover#0".to_string()]
    );
    r.research_checkpointed("w.r2", ms(360));
    let last = &r.research.as_ref().unwrap().audit.last().unwrap().result;
    assert_eq!(
        last,
        "w.r2: phase DISCOVERING, 0/5 streams complete, overdue: discover#0"
    );
}

#[test]
fn the_engine_staggers_streams_and_queues_what_an_isolated_failure_made_ready() {
    let mut engine = crate::engine::Engine::new();
    let r = record();
    engine.insert(r.clone());
    let cap = |_: &str| 5;
    let (d, _) = engine.next_dispatches(ms(0), cap);
    assert_eq!(
        d.len(),
        1,
        "stream 1 only: the others wait for their stagger"
    );
    let (d, _) = engine.next_dispatches(ms(80), cap);
    assert_eq!(d.len(), 4);
    for i in 0..4u32 {
        let key = format!("discover#{i}");
        let rec = engine.get("w").unwrap();
        let done = ev(
            rec,
            &key,
            TaskStatus::Completed,
            Some(sources(i + 1, 5)),
            ms(100),
        );
        engine.apply_event(&done, ms(100));
    }
    let rec = engine.get("w").unwrap();
    let failed = ev(rec, "discover#4", TaskStatus::Failed, None, ms(120));
    let o = engine.apply_event(&failed, ms(120));
    assert!(matches!(
        o,
        Some(EventOutcome::Failed(RetryDecision::Isolated { .. }))
    ));
    assert_eq!(engine.load(ms(120))["research_discovery"].in_flight, 0);
    let (d, _) = engine.next_dispatches(ms(120), cap);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].stage, "consolidate");
    assert!(d[0].inputs["discover"][4].is_null());
}

#[test]
fn a_pause_is_audited_stops_the_clocks_and_never_retries_a_decided_stream() {
    use crate::workflow::{InFlightPolicy, PauseSpec};
    let mut r = record();
    for i in [0u32, 1, 3, 4] {
        finish(&mut r, &format!("discover#{i}"), sources(i + 1, 5), ms(100));
    }
    fail_stream(&mut r, "discover#2", ms(100));
    assert_eq!(phase(&r), Phase::Consolidating);
    let spec = PauseSpec {
        reason: "vendor maintenance".into(),
        trigger_source: "api".into(),
        ..PauseSpec::default()
    };
    r.request_pause(spec, ms(200)).unwrap();
    assert_eq!(r.state, WorkflowState::Paused);
    assert!(!r.research_due(ms(60_000)), "no limit runs while paused");
    let plan = r.resume_plan(InFlightPolicy::Wait, ms(10_200));
    assert!(
        !plan.restart.contains(&"discover#2".to_string()),
        "{plan:?}"
    );
    assert!(plan.skip.contains(&"discover#2".to_string()));
    r.resume(&plan, ms(10_200)).unwrap();
    assert_eq!(r.tasks["discover#2"].state, TaskRunState::Failed);
    let res = r.research.as_ref().unwrap();
    assert_eq!(res.paused_ms, 10_000);
    // CONSOLIDATING began at 100 ms; 10 s paused; limit 5 units = 500 ms.
    assert!(!r.research_due(ms(10_600)));
    assert!(r.research_due(ms(10_601)));
    let a = actions(&r);
    assert!(a.contains(&"api pause_requested".to_string()), "{a:?}");
    assert!(a.contains(&"api resumed".to_string()), "{a:?}");
}

#[test]
fn an_agent_asking_for_a_person_pauses_the_run_at_tier_three() {
    use crate::workflow::InFlightPolicy;
    let mut r = record();
    let mut out = sources(2, 5);
    out["needs_intervention"] = json!(true);
    out["intervention_reason"] = json!("ethical concern");
    finish(&mut r, "discover#1", out, ms(100));
    assert_eq!(r.state, WorkflowState::Paused, "nothing else was in flight");
    let p = r.pause.as_ref().unwrap();
    assert!(p.escalated);
    assert_eq!(p.trigger_source, "research_agent");
    assert_eq!(p.reason, "stream-2 asks for a person: ethical concern");
    assert_eq!(
        r.research.as_ref().unwrap().streams[&2].state,
        StreamState::Complete
    );
    let plan = r.resume_plan(InFlightPolicy::Wait, ms(5000));
    r.resume(&plan, ms(5000)).unwrap();
    for i in [0u32, 2, 3, 4] {
        finish(
            &mut r,
            &format!("discover#{i}"),
            sources(i + 1, 5),
            ms(5100),
        );
    }
    assert_eq!(phase(&r), Phase::Consolidating);
    let a = actions(&r);
    assert!(
        a.contains(&"stream-2 intervention_requested".to_string()),
        "{a:?}"
    );
    assert!(
        a.contains(&"research_agent pause_requested".to_string()),
        "{a:?}"
    );
}

#[test]
fn research_runs_have_no_level_reviews_so_a_failed_stream_cannot_hold_them() {
    use crate::workflow::{LevelReviewMode, LevelReviewPolicy};
    let policy = LevelReviewPolicy::resolve(
        None,
        &Default::default(),
        LevelReviewMode::Always,
        "reviewer",
    )
    .unwrap();
    let mut r = instantiate("w".into(), "t".into(), "p".into(), stages(), UNIT_MS, t0())
        .with_level_review(policy);
    assert!(attach(&mut r, None, &settings(), t0()).unwrap());
    assert!(r.level_review.is_none());
    for i in [0u32, 1, 2, 3] {
        finish(&mut r, &format!("discover#{i}"), sources(i + 1, 5), ms(100));
    }
    let o = fail_stream(&mut r, "discover#4", ms(100));
    assert_eq!(
        o,
        EventOutcome::Failed(RetryDecision::Isolated {
            newly_ready: vec!["consolidate".into()]
        })
    );
}

#[test]
fn a_stream_that_ends_before_its_started_is_sent_is_audited_as_started_too() {
    // worker.started_delay: a stream done within it reports only
    // `completed`, carrying started_at; the run must read as if `started`
    // had come first (in the same batch, so at the same `now`).
    let run = |announce: bool| {
        let mut r = record();
        r.dispatch("discover#0", ms(0));
        let mut s = ev(&r, "discover#0", TaskStatus::Started, None, ms(10));
        s.started_at = Some(ms(10));
        let mut done = ev(
            &r,
            "discover#0",
            TaskStatus::Completed,
            Some(sources(1, 5)),
            ms(60),
        );
        done.started_at = Some(ms(10));
        if announce {
            r.apply_event(&s, ms(70));
        }
        assert!(matches!(
            r.apply_event(&done, ms(70)),
            EventOutcome::Completed { .. }
        ));
        r
    };
    let (alone, both) = (run(false), run(true));
    assert_eq!(
        serde_json::to_value(&alone).unwrap(),
        serde_json::to_value(&both).unwrap()
    );
    let s = &alone.research.as_ref().unwrap().streams[&1];
    assert_eq!(s.state, StreamState::Complete);
    assert_eq!(s.started_at, Some(ms(10)));
    assert!(s.eta.is_some_and(|eta| eta > ms(10)), "{:?}", s.eta);
    let a = actions(&alone);
    let started = a.iter().position(|x| x == "stream-1 started");
    let complete = a.iter().position(|x| x == "stream-1 stream_complete");
    assert!(started.is_some() && started < complete, "{a:?}");
}
