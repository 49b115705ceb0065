//! The deep-research pipeline across real processes: coordinator, research
//! workers (built-in, `sleep:`), NATS and Redis.

use std::time::Duration;

use crate::common::{caucus, coordinator, eventually, stream_messages, worker, Api};
use async_nats::jetstream;
use caucus_harness::{Service, Stack};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

const ALL: &str =
    "research_discovery,research_consolidation,research_validation,research_analysis,research_synthesis";
const STAGGER_MS: i64 = 150;

/// The built-in spec, as JSON, for inline variants.
fn builtin_spec() -> Value {
    let t: toml::Value = toml::from_str(include_str!(
        "../../coordinator/pipelines/deep-research.toml"
    ))
    .unwrap();
    serde_json::to_value(t).unwrap()
}

/// The built-in spec with `params` merged into stage `stage`.
fn variant(name: &str, edits: &[(&str, Value)]) -> Value {
    let mut spec = builtin_spec();
    spec["name"] = json!(name);
    for (stage, params) in edits {
        let s = spec["stages"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|s| s["name"] == *stage)
            .unwrap();
        for (k, v) in params.as_object().unwrap() {
            if k == "timeout" {
                s["timeout"] = v.clone();
            } else {
                s["params"][k] = v.clone();
            }
        }
    }
    spec
}

fn start(stack: &Stack) -> (Service, Service) {
    let c = coordinator(
        stack,
        &[
            ("CAUCUS_COORDINATOR_RESEARCH_STAGGER", "150ms"),
            ("CAUCUS_COORDINATOR_RESEARCH_CHECKPOINT_INTERVAL", "300ms"),
        ],
    );
    let w = worker(stack, ALL, 5, "builtin", &[]);
    (c, w)
}

/// Waits for `id` to finish and for its finished record to be stored.
/// `status` answers from memory and can say `completed` before the
/// coordinator's next pump, which stores the run's pending writes in the
/// `research` bucket and then persists the record (`coordinator.audit`
/// reads the stored one): the tests read both after this.
async fn finished(api: &Api, id: &str) -> Value {
    let ids = vec![id.to_string()];
    let w = eventually(
        &format!("{id} to finish"),
        Duration::from_secs(60),
        || async {
            let w = api.status(&ids).await.pop()?;
            matches!(w["state"].as_str(), Some("completed" | "failed")).then_some(w)
        },
    )
    .await;
    let js = jetstream::new(api.nats.clone());
    let records = js
        .get_key_value("caucus_workflows")
        .await
        .expect("workflows bucket");
    eventually(
        &format!("{id}'s finished record to be stored"),
        Duration::from_secs(20),
        || async {
            let raw = records.get(id).await.ok()??;
            let stored: Value = serde_json::from_slice(&raw).ok()?;
            (stored["state"] == w["state"]).then_some(())
        },
    )
    .await;
    w
}

async fn audit_lines(api: &Api, id: &str) -> Vec<String> {
    let r = api
        .call("coordinator", "audit", json!({"workflow_id": id}))
        .await
        .expect("audit");
    r["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_string())
        .collect()
}

fn has(lines: &[String], needle: &str) -> bool {
    lines.iter().any(|l| l.contains(needle))
}

async fn stored(api: &Api, bucket: &str, key: &str) -> Option<String> {
    let js = jetstream::new(api.nats.clone());
    let kv = js.get_key_value(format!("caucus_{bucket}")).await.ok()?;
    kv.get(key)
        .await
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str().unwrap().parse().unwrap()
}

/// The built-in pipeline by name: five staggered streams, every gate,
/// writes stored per key space, periodic checkpoints, the audit trail over
/// the API and the CLI.
#[tokio::test(flavor = "multi_thread")]
async fn a_run_completes_with_staggered_streams_checkpoints_and_an_audit_trail() {
    let stack = Stack::start();
    let (_c, _w) = start(&stack);
    let api = Api::connect(&stack).await;
    let id = api
        .submit(&["solid-state batteries"], json!("deep-research"), 100)
        .await
        .remove(0);
    let w = finished(&api, &id).await;
    assert_eq!(w["state"], "completed", "{w}");
    let r = &w["research"];
    assert_eq!(r["phase"], "COMPLETE");
    for (n, s) in r["streams"].as_object().unwrap() {
        assert_eq!(s["state"], "complete", "stream {n}: {s}");
        let found = s["sources"].as_u64().unwrap();
        assert!(found >= 5);
        // Completion signal: the agent's items done/total; ETA from the start.
        assert_eq!(s["progress"], format!("{found}/{found} items"));
        assert!(time(&s["eta"]) > time(&s["started_at"]));
    }
    for p in [
        "DISCOVERING",
        "CONSOLIDATING",
        "VALIDATING",
        "ANALYZING",
        "SYNTHESIZING",
    ] {
        assert_eq!(r["gates"][p]["verdict"], "pass", "{p}: {}", r["gates"][p]);
    }
    // Stream N starts no earlier than (N-1) × the stagger after submission.
    let created = time(&w["created_at"]);
    for i in 0..5i64 {
        let started = time(&w["tasks"][format!("discover#{i}")]["started_at"]);
        let offset = (started - created).num_milliseconds();
        assert!(
            offset >= i * STAGGER_MS,
            "stream {} started at +{offset} ms",
            i + 1
        );
    }
    // Accepted writes are in the research bucket, under the run's id.
    let src = stored(
        &api,
        "research",
        &format!("{id}/streams/stream-1/sources.md"),
    )
    .await
    .expect("stream 1 sources");
    assert!(src.starts_with("# Stream 1: background"), "{src}");
    let report = stored(&api, "research", &format!("{id}/report/final-report.md"))
        .await
        .expect("report");
    assert!(report.contains("## Citations"), "{report}");
    assert_eq!(r["refused_count"], 0);
    // At least one periodic checkpoint (the streams alone take 600 ms).
    assert!(r["checkpoints"].as_u64().unwrap() >= 1, "{r}");
    let cp = stored(&api, "checkpoints", &format!("{id}.r1"))
        .await
        .expect("checkpoint");
    assert!(cp.contains("research_checkpoint"), "{cp}");

    let lines = audit_lines(&api, &id).await;
    for needle in [
        "| coordinator | transition | INITIALIZING → DISCOVERING",
        "| coordinator | transition | DISCOVERING → CONSOLIDATING",
        "| coordinator | quality_gate | VALIDATING: pass",
        "| coordinator | transition | SYNTHESIZING → COMPLETE",
        "| stream-5 | stream_complete | ",
        "| coordinator | checkpoint | ",
    ] {
        assert!(has(&lines, needle), "{needle} missing from {lines:#?}");
    }
    let (code, out, err) = caucus(&stack, &["audit", &id]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("timestamp | agent | action | result"), "{out}");
    assert!(
        out.contains("| stream-3 | started | DISCOVERING task discover#2"),
        "{out}"
    );
    let (code, out, _) = caucus(&stack, &["status", &id]);
    assert_eq!(code, 0);
    assert!(out.contains("phase COMPLETE"), "{out}");
    assert!(out.contains("gate DISCOVERING   pass"), "{out}");
    let (code, out, err) = caucus(&stack, &["result", &id]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("# Research report: solid-state batteries"),
        "{out}"
    );
    let (code, _, err) = caucus(&stack, &["audit", "no-such-workflow"]);
    assert_eq!(code, 1);
    assert!(err.contains("no workflow `no-such-workflow`"), "{err}");
}

/// One stream fails: it is marked, not retried, and the run completes on
/// the other four.
#[tokio::test(flavor = "multi_thread")]
async fn one_failing_stream_is_marked_and_the_run_continues() {
    let stack = Stack::start();
    let (_c, _w) = start(&stack);
    let api = Api::connect(&stack).await;
    let p = variant(
        "dr-one-fails",
        &[("discover", json!({"fail_streams": [3]}))],
    );
    let id = api.submit(&["grid storage"], p, 100).await.remove(0);
    let w = finished(&api, &id).await;
    assert_eq!(w["state"], "completed", "{w}");
    let r = &w["research"];
    assert_eq!(r["streams"]["3"]["state"], "failed");
    assert_eq!(r["streams"]["3"]["can_continue"], true);
    assert!(r["streams"]["3"]["error"]
        .as_str()
        .unwrap()
        .contains("discovery_failed"));
    assert_eq!(w["tasks"]["discover#2"]["attempt"], 1, "not retried");
    assert_eq!(r["gates"]["DISCOVERING"]["verdict"], "pass_with_fallback");
    assert!(
        w["pause"].is_null(),
        "a failed stream does not pause the run"
    );
    let lines = audit_lines(&api, &id).await;
    assert!(
        has(&lines, "| stream-3 | stream_failed | discovery_failed"),
        "{lines:#?}"
    );
    assert!(
        has(&lines, "continuing with 4 successful streams"),
        "{lines:#?}"
    );
}

/// Every stream fails: FAILED, and a person is called through the
/// existing critical alert card.
#[tokio::test(flavor = "multi_thread")]
async fn all_streams_failing_fail_the_run_and_escalate() {
    let stack = Stack::start();
    let (_c, _w) = start(&stack);
    let api = Api::connect(&stack).await;
    let p = variant(
        "dr-all-fail",
        &[("discover", json!({"fail_streams": [1, 2, 3, 4, 5]}))],
    );
    let id = api.submit(&["cold fusion"], p, 100).await.remove(0);
    let w = finished(&api, &id).await;
    assert_eq!(w["state"], "failed", "{w}");
    assert_eq!(w["research"]["phase"], "FAILED");
    assert!(
        w["failure"]
            .as_str()
            .unwrap()
            .contains("0 of 5 streams successful"),
        "{w}"
    );
    assert_eq!(
        w["tasks"]["consolidate"]["state"], "waiting",
        "nothing after discovery ran"
    );
    let alert = eventually("the escalation card", Duration::from_secs(20), || async {
        let a = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.critical").await;
        a.into_iter()
            .find(|a| a.body["content"]["workflow_id"] == id.as_str())
    })
    .await;
    let c = &alert.body["content"];
    assert_eq!(c["event_type"], "workflow_escalated");
    assert_eq!(c["escalated"], true);
    assert_eq!(c["streams"].as_array().unwrap().len(), 5);
    assert_eq!(
        alert.msg_id.as_deref(),
        Some(format!("alert:research:{id}").as_str())
    );
    let lines = audit_lines(&api, &id).await;
    assert!(
        has(
            &lines,
            "| coordinator | escalation | human intervention requested"
        ),
        "{lines:#?}"
    );
    assert!(
        has(&lines, "| coordinator | transition | DISCOVERING → FAILED"),
        "{lines:#?}"
    );
}

/// Gates just below and just above their thresholds, each in its own run.
#[tokio::test(flavor = "multi_thread")]
async fn gates_just_below_and_above_their_thresholds() {
    let stack = Stack::start();
    let (_c, _w) = start(&stack);
    let api = Api::connect(&stack).await;
    let cases = [
        (
            "sources-4",
            "discover",
            json!({"sources_per_stream": 4}),
            "failed",
            "DISCOVERING",
        ),
        (
            "sources-5",
            "discover",
            json!({"sources_per_stream": 5}),
            "completed",
            "DISCOVERING",
        ),
        (
            "streams-1",
            "discover",
            json!({"fail_streams": [1, 2, 3, 4]}),
            "failed",
            "DISCOVERING",
        ),
        (
            "streams-2",
            "discover",
            json!({"fail_streams": [1, 2, 3]}),
            "completed",
            "DISCOVERING",
        ),
        (
            "one-domain",
            "discover",
            json!({"single_domain": true}),
            "failed",
            "DISCOVERING",
        ),
        (
            "validated-56",
            "validate",
            json!({"validated_ratio": 0.56}),
            "failed",
            "VALIDATING",
        ),
        (
            "validated-60",
            "validate",
            json!({"validated_ratio": 0.6}),
            "completed",
            "VALIDATING",
        ),
        (
            "patterns-2",
            "analyze",
            json!({"emit_patterns": 2}),
            "failed",
            "ANALYZING",
        ),
        (
            "patterns-3",
            "analyze",
            json!({"emit_patterns": 3}),
            "completed",
            "ANALYZING",
        ),
        (
            "insights-4",
            "analyze",
            json!({"emit_insights": 4}),
            "failed",
            "ANALYZING",
        ),
        (
            "insights-5",
            "analyze",
            json!({"emit_insights": 5}),
            "completed",
            "ANALYZING",
        ),
    ];
    let mut ids = Vec::new();
    for (name, stage, params, _, _) in &cases {
        // Five streams × 5 sources = 25: 14/25 = 56 %, 15/25 = 60 %.
        let mut edits = vec![(*stage, params.clone())];
        if *stage != "discover" {
            edits.push(("discover", json!({"sources_per_stream": 5})));
        }
        let p = variant(&format!("dr-{name}"), &edits);
        // 200 ms units: eleven runs share one worker, keep the limits roomy.
        ids.push(api.submit(&[name], p, 200).await.remove(0));
    }
    for (id, (name, _, _, want, phase)) in ids.iter().zip(&cases) {
        let w = finished(&api, id).await;
        assert_eq!(w["state"], *want, "{name}: {w}");
        let g = &w["research"]["gates"][phase];
        // Two of five streams pass with the fallback (the others are marked).
        let verdict = match (*want, *name) {
            ("failed", _) => "fail",
            (_, "streams-2") => "pass_with_fallback",
            _ => "pass",
        };
        assert_eq!(g["verdict"], verdict, "{name}: {g}");
    }
}

/// A phase over its limit fails the run (VALIDATING here: the validator
/// sleeps far beyond the 500 ms phase limit).
#[tokio::test(flavor = "multi_thread")]
async fn a_phase_over_its_time_limit_fails_the_run() {
    let stack = Stack::start();
    let c = coordinator(&stack, &[("CAUCUS_COORDINATOR_RESEARCH_STAGGER", "20ms")]);
    let _w = worker(
        &stack,
        "research_discovery,research_consolidation,research_analysis,research_synthesis",
        5,
        "builtin",
        &[],
    );
    let _slow = worker(&stack, "research_validation", 1, "sleep:20000", &[]);
    let api = Api::connect(&stack).await;
    let p = variant(
        "dr-slow",
        &[("validate", json!({"phase_limit": 5, "timeout": 100}))],
    );
    let id = api.submit(&["slow topic"], p, 100).await.remove(0);
    let w = finished(&api, &id).await;
    assert_eq!(w["state"], "failed", "{w}");
    assert_eq!(
        w["failure"], "phase VALIDATING exceeded its time limit of 500 ms",
        "{w}"
    );
    let v = w["tasks"]["validate"]["state"].as_str().unwrap();
    assert!(matches!(v, "dispatched" | "running"), "{v}");
    let lines = audit_lines(&api, &id).await;
    assert!(
        has(
            &lines,
            "| coordinator | transition | VALIDATING → FAILED: phase VALIDATING exceeded"
        ),
        "{lines:#?}"
    );
    let alert = eventually("the failure card", Duration::from_secs(20), || async {
        let a = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.warning").await;
        a.into_iter()
            .find(|a| a.body["content"]["workflow_id"] == id.as_str())
    })
    .await;
    assert_eq!(alert.body["content"]["event_type"], "research_failed");
    drop(c);
}

/// A stream writing into another stream's key space (and the validator's):
/// refused, not stored, audited and reported; the run still completes.
#[tokio::test(flavor = "multi_thread")]
async fn a_write_outside_the_key_space_is_refused_and_audited() {
    let stack = Stack::start();
    let (_c, _w) = start(&stack);
    let api = Api::connect(&stack).await;
    let p = variant("dr-rogue", &[("discover", json!({"rogue_streams": [2]}))]);
    let id = api.submit(&["tidal power"], p, 100).await.remove(0);
    let w = finished(&api, &id).await;
    assert_eq!(w["state"], "completed", "{w}");
    let r = &w["research"];
    assert_eq!(r["refused_count"], 2, "{r}");
    let refused: Vec<&str> = r["refused_writes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        refused,
        ["streams/stream-1/injected.md", "validation/validated.md"]
    );
    assert_eq!(r["refused_writes"][0]["task"], "discover#1");
    assert!(
        stored(
            &api,
            "research",
            &format!("{id}/streams/stream-1/injected.md")
        )
        .await
        .is_none(),
        "a refused write is not stored"
    );
    let validated = stored(&api, "research", &format!("{id}/validation/validated.md"))
        .await
        .expect("the validator's own write");
    assert!(validated.starts_with("# Validation:"), "{validated}");
    assert!(stored(
        &api,
        "research",
        &format!("{id}/streams/stream-2/sources.md")
    )
    .await
    .is_some());
    let lines = audit_lines(&api, &id).await;
    assert!(
        has(&lines, "| stream-2 | write_refused | streams/stream-1/injected.md: outside the task's key space `streams/stream-2/`"),
        "{lines:#?}"
    );
}

/// DISCOVERING over its limit with three streams still running (an `exec:`
/// agent that never answers for them): they are timed out and the gate
/// decides with the two that finished, so the run goes on and completes.
#[tokio::test(flavor = "multi_thread")]
async fn discovery_over_its_limit_continues_with_the_finished_streams() {
    let stack = Stack::start();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("discover.py");
    std::fs::write(
        &script,
        r#"import json, sys, time
t = json.load(sys.stdin)
shard = t.get("shard") or 0
if shard >= 2:
    time.sleep(30)
n = shard + 1
domains = ["arxiv.org", "reuters.com", "who.int", "oecd.org", "nature.com", "ft.com"]
print(json.dumps({"stream": n, "writes": [{"key": f"streams/stream-{n}/sources.md", "value": "x"}],
    "sources": [{"id": f"s{n}-{i}", "url": f"https://{d}/{n}/{i}", "domain": d,
                 "aspect": f"aspect {n}", "title": f"t{i}", "credibility": 80}
                for i, d in enumerate(domains)]}))
"#,
    )
    .unwrap();
    let _c = coordinator(&stack, &[("CAUCUS_COORDINATOR_RESEARCH_STAGGER", "20ms")]);
    let handler = format!("exec:python3 {}", script.display());
    let _d = worker(&stack, "research_discovery", 5, &handler, &[]);
    let _w = worker(
        &stack,
        "research_consolidation,research_validation,research_analysis,research_synthesis",
        1,
        "builtin",
        &[],
    );
    let api = Api::connect(&stack).await;
    // 30 units × 100 ms: DISCOVERING ends 3 s after submission.
    let p = variant(
        "dr-slow-streams",
        &[("discover", json!({"phase_limit": 30, "timeout": 100}))],
    );
    let id = api.submit(&["slow streams"], p, 100).await.remove(0);
    let w = finished(&api, &id).await;
    assert_eq!(w["state"], "completed", "{w}");
    let r = &w["research"];
    for n in ["1", "2"] {
        assert_eq!(r["streams"][n]["state"], "complete", "{r}");
    }
    for n in ["3", "4", "5"] {
        assert_eq!(r["streams"][n]["state"], "timed_out", "{r}");
        assert_eq!(r["streams"][n]["can_continue"], true);
    }
    assert_eq!(r["gates"]["DISCOVERING"]["verdict"], "pass_with_fallback");
    let lines = audit_lines(&api, &id).await;
    assert!(
        has(&lines, "| stream-4 | stream_timed_out | still running when DISCOVERING reached its limit of 3000 ms"),
        "{lines:#?}"
    );
}

/// The coordinator is killed mid-discovery; its successor carries the run
/// on from the stored record: staggered streams still start, the audit
/// trail keeps the first coordinator's entries, the run completes.
#[tokio::test(flavor = "multi_thread")]
async fn a_restarted_coordinator_carries_the_run_on() {
    let stack = Stack::start();
    let env = [("CAUCUS_COORDINATOR_RESEARCH_STAGGER", "400ms")];
    let mut c1 = coordinator(&stack, &env);
    let _w = worker(&stack, ALL, 5, "builtin", &[]);
    let api = Api::connect(&stack).await;
    // One unit = 1 s: DISCOVERING may last 15 s, ample for a takeover.
    let id = api
        .submit(&["restart topic"], json!("deep-research"), 1000)
        .await
        .remove(0);
    let ids = vec![id.clone()];
    eventually("stream 1 to complete", Duration::from_secs(20), || async {
        let w = api.status(&ids).await.pop()?;
        (w["research"]["streams"]["1"]["state"] == "complete").then_some(())
    })
    .await;
    c1.kill();
    let _c2 = coordinator(&stack, &env);
    let w = finished(&api, &id).await;
    assert_eq!(w["state"], "completed", "{w}");
    let created = time(&w["created_at"]);
    let started = time(&w["tasks"]["discover#4"]["started_at"]);
    assert!((started - created).num_milliseconds() >= 4 * 400);
    let lines = audit_lines(&api, &id).await;
    assert!(has(&lines, "| stream-1 | stream_complete |"), "{lines:#?}");
    assert!(
        has(
            &lines,
            "| coordinator | transition | SYNTHESIZING → COMPLETE"
        ),
        "{lines:#?}"
    );
    assert_eq!(
        lines
            .iter()
            .filter(|l| l.contains("| transition | INITIALIZING"))
            .count(),
        1
    );
}

/// Discovery by the Python example agent (`deploy/examples/research_discovery.py`
/// through the `exec:` handler) over a catalogue; the rest built-in.
#[tokio::test(flavor = "multi_thread")]
async fn an_exec_discovery_agent_drives_a_complete_run() {
    let stack = Stack::start();
    let dir = tempfile::tempdir().unwrap();
    let aspects = [
        "background",
        "recent developments",
        "quantitative evidence",
        "expert opinion",
        "counterarguments",
    ];
    let domains = [
        "arxiv.org",
        "reuters.com",
        "who.int",
        "oecd.org",
        "nature.com",
        "ft.com",
    ];
    let mut catalogue = Vec::new();
    for (a, aspect) in aspects.iter().enumerate() {
        for (d, domain) in domains.iter().enumerate() {
            catalogue.push(json!({
                "title": format!("{aspect} {d}"),
                "url": format!("https://{domain}/heat-pumps/{a}/{d}"),
                "aspects": [aspect],
                "topics": ["heat pumps"],
                "credibility": 70 + d,
            }));
        }
    }
    // One entry on another topic, which must not be picked.
    catalogue.push(json!({"title": "x", "url": "https://x.org/1", "aspects": ["background"], "topics": ["tides"]}));
    let cat = dir.path().join("catalogue.json");
    std::fs::write(&cat, serde_json::to_vec(&catalogue).unwrap()).unwrap();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy/examples/research_discovery.py");
    let handler = format!("exec:python3 {} {}", script.display(), cat.display());
    let _c = coordinator(&stack, &[("CAUCUS_COORDINATOR_RESEARCH_STAGGER", "20ms")]);
    let _d = worker(&stack, "research_discovery", 5, &handler, &[]);
    let _w = worker(
        &stack,
        "research_consolidation,research_validation,research_analysis,research_synthesis",
        1,
        "builtin",
        &[],
    );
    let api = Api::connect(&stack).await;
    let id = api
        .submit(&["heat pumps"], json!("deep-research"), 400)
        .await
        .remove(0);
    let w = finished(&api, &id).await;
    assert_eq!(w["state"], "completed", "{w}");
    let r = &w["research"];
    for n in 1..=5 {
        assert_eq!(r["streams"][n.to_string()]["sources"], 6, "{r}");
    }
    let s4 = stored(
        &api,
        "research",
        &format!("{id}/streams/stream-4/sources.md"),
    )
    .await
    .expect("stream 4 listing");
    assert!(s4.starts_with("# Stream 4: expert opinion"), "{s4}");
    assert_eq!(r["refused_count"], 0);
}

/// An agent raises the seed's `NeedsIntervention` signal: the run pauses
/// with a checkpoint and the tier-3 critical card; a person resumes it and
/// it completes.
#[tokio::test(flavor = "multi_thread")]
async fn an_agent_asking_for_a_person_pauses_until_resumed() {
    let stack = Stack::start();
    let (_c, _w) = start(&stack);
    let api = Api::connect(&stack).await;
    let p = variant(
        "dr-intervene",
        &[("discover", json!({"intervention_streams": [2]}))],
    );
    let id = api.submit(&["gene drives"], p, 100).await.remove(0);
    let w = crate::common::wait_state(&api, &id, "paused").await;
    assert_eq!(w["pause"]["trigger_source"], "research_agent", "{w}");
    assert_eq!(w["pause"]["escalated"], true);
    let card = eventually("the escalation card", Duration::from_secs(20), || async {
        let a = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.critical").await;
        a.into_iter().find(|a| {
            a.body["content"]["workflow_id"] == id.as_str()
                && a.body["content"]["event_type"] == "workflow_escalated"
        })
    })
    .await;
    assert!(card.body["content"]["reason"]
        .as_str()
        .unwrap()
        .contains("stream-2 asks for a person"));
    // Checkpointed like every pause; the person resumes.
    crate::common::call(&api, "resume", json!({"workflow_id": id}))
        .await
        .expect("resume");
    let w = finished(&api, &id).await;
    assert_eq!(w["state"], "completed", "{w}");
    let lines = audit_lines(&api, &id).await;
    for needle in [
        "| stream-2 | intervention_requested | stream 2: sources raise an ethical concern",
        "| research_agent | pause_requested | in DISCOVERING",
        "| api | resumed | in ",
    ] {
        assert!(has(&lines, needle), "{needle} missing from {lines:#?}");
    }
}
