//! Human gates and override re-runs across real processes: a coordinator,
//! a facilitator and worker processes on a real NATS and Redis.
//!
//! - the built-in stock-analysis pipeline holds at its review gate; the
//!   decision package carries the analysts' findings; approval completes it;
//! - reminders and an escalation fire at shrunk durations; reject needs a
//!   reason and fails the workflow; send-back re-runs upstream work;
//! - the seed's override example: a provisional 25 % margin blocks the
//!   gate, a person overrides with 28 % at the gate, the facilitator's
//!   impact report says DCF re-run required ($85 → about $95) and risk
//!   update only, and the coordinator re-runs exactly the DCF and the
//!   sensitivity analysis, serially, with the new margin in their inputs.

use std::time::Duration;

use caucus_harness::Stack;
use serde_json::{json, Value};

use crate::common::{
    alerts_of, call, coordinator, eventually, starts, stream_messages, wait_state, worker, Api,
};

/// An exec agent: answers `params.output`, reports the settled assumptions
/// it was given, and moves a `target_price` by the margin's relative change
/// from 25 % (1 point of margin ≈ 4 % here; the test only needs "moved").
const AGENT: &str = r#"
import json, sys
t = json.load(sys.stdin)
p = t.get("params") or {}
out = dict(p.get("output") or {})
ra = (t.get("inputs") or {}).get("resolved_assumptions")
if ra:
    out["resolved_assumptions"] = ra
    m = ra.get("operating_margin")
    if m is not None and "target_price" in out:
        out["target_price"] = round(out["target_price"] * m / 0.25, 2)
    if m is not None and "operating_margin_used" in out:
        out["operating_margin_used"] = m
out["attempt"] = t["attempt"]
print(json.dumps(out))
"#;

fn agent_handler(dir: &tempfile::TempDir) -> String {
    let script = dir.path().join("agent.py");
    std::fs::write(&script, AGENT).unwrap();
    format!("exec:python3 {}", script.display())
}

/// The seed's analyses as stages of one workflow, a gate after them.
fn seed_pipeline() -> Value {
    let stage = |name: &str, deps: &[&str], output: Value, impact: Value| {
        json!({"name": name, "agent": "analyst", "depends_on": deps,
               "params": {"output": output, "impact": impact}})
    };
    json!({
        "name": "override-example",
        "capacities": {"analyst": 4},
        "stages": [
            {"name": "financial", "agent": "analyst", "params": {"output": {"operating_margin": 0.25}}},
            stage("dcf_valuation", &["financial"], json!({"target_price": 85.0, "findings": [
                      {"finding": "DCF target price", "confidence": 0.7, "key": "ACME:target_price",
                       "metric": "target_price", "value": 85.0}]}),
                  json!({"kind": "valuation", "output_metric": "target_price", "result": "/target_price", "rerun_minutes": 5})),
            stage("sensitivity_analysis", &["dcf_valuation"], json!({"target_price": 85.0}),
                  json!({"kind": "sensitivity", "output_metric": "target_price", "result": "/target_price", "rerun_minutes": 10})),
            stage("risk_assessment", &["financial"], json!({"confidence_score": 0.6}),
                  json!({"kind": "risk_assessment", "output_metric": "confidence_score", "result": "/confidence_score", "rerun_minutes": 3})),
            stage("peer_comparison", &["financial"], json!({"peers": 4}),
                  json!({"kind": "other", "output_metric": "context", "rerun_minutes": 2})),
            {"name": "review", "kind": "gate",
             "depends_on": ["dcf_valuation", "sensitivity_analysis", "risk_assessment", "peer_comparison"]},
            {"name": "report", "agent": "analyst", "depends_on": ["review"], "params": {"output": {"done": true}}}
        ]
    })
}

async fn submit(api: &Api, items: &[&str], pipeline: Value) -> Vec<String> {
    let r = call(
        api,
        "submit",
        json!({"items": items, "pipeline": pipeline, "time_unit_ms": 20}),
    )
    .await
    .expect("submit");
    r["workflow_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// Waits until `gate` of `wf` is open and returns the workflow status.
async fn wait_gate(api: &Api, wf: &str, gate: &str) -> Value {
    let ids = vec![wf.to_string()];
    eventually(
        &format!("gate {gate} of {wf} to open"),
        Duration::from_secs(30),
        || async {
            let w = api.status(&ids).await.pop()?;
            w["open_gates"]
                .as_array()
                .is_some_and(|g| g.iter().any(|x| x == gate))
                .then_some(w)
        },
    )
    .await
}

async fn task_of(api: &Api, wf: &str, key: &str) -> Value {
    let r = call(api, "status", json!({"ids": [wf], "tasks": true}))
        .await
        .unwrap();
    r["workflows"][0]["tasks"][key].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtin_pipeline_holds_at_its_gate_until_a_person_approves() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let _f = crate::facilitator_common::facilitator(&stack, &[]);
    let _w = worker(
        &stack,
        "screening,business,financial,strategy,valuation,report",
        2,
        "builtin",
        &[],
    );
    let api = Api::connect(&stack).await;
    let ids = submit(&api, &["MSFT"], json!("stock-analysis")).await;
    let wf = &ids[0];
    let w = wait_gate(&api, wf, "review").await;
    assert_eq!(w["state"], "running");
    assert_eq!(
        w["progress"]["completed"], 5,
        "five analyses done, gate and report to go"
    );
    // Held: the report does not start while the gate waits.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(task_of(&api, wf, "report").await["state"], "waiting");
    let listed = call(&api, "gates", json!({"item": "MSFT"})).await.unwrap();
    assert_eq!(listed["count"], 1);
    assert_eq!(listed["gates"][0]["gate"], "review");

    let pkg = call(&api, "gate", json!({"workflow_id": wf}))
        .await
        .unwrap();
    assert_eq!(pkg["gate"]["gate"], "review");
    assert_eq!(pkg["item"], "MSFT");
    let findings = pkg["findings"].as_array().unwrap();
    assert!(
        findings.len() >= 3,
        "the analysts' findings are in the package: {pkg}"
    );
    for f in findings {
        assert!(f["confidence"].is_number(), "{f}");
        assert!(f["evidence"].is_array(), "{f}");
    }
    assert_eq!(pkg["provisional"]["count"], 0);
    assert_eq!(
        pkg["provisional"]["message"],
        "0 provisional decisions require review"
    );
    assert_eq!(pkg["can_approve"], true, "{pkg}");

    // An outside service's finding about this workflow that leaves out
    // fields (no confidence, evidence as text) is listed, not dropped:
    // the person reviewing must see it.
    crate::common::publish_envelope(
        &api,
        "caucus.findings.MSFT",
        json!({"id": "outside-1", "from_agent": "risk_desk", "to_agent": "all",
               "message_type": "finding", "correlation_id": wf,
               "content": {"finding": "Supplier strike", "evidence": "a memo"}}),
    )
    .await;
    let pkg = call(&api, "gate", json!({"workflow_id": wf}))
        .await
        .unwrap();
    let outside: Vec<&Value> = pkg["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["from_agent"] == "risk_desk")
        .collect();
    assert_eq!(outside.len(), 1, "{}", pkg["findings"]);
    assert_eq!(outside[0]["finding"], "Supplier strike");
    assert!(outside[0]["confidence"].is_null(), "{}", outside[0]);
    assert_eq!(outside[0]["evidence"], json!([]));

    // Errors are specific and change nothing.
    let e = call(
        &api,
        "gate_decide",
        json!({"workflow_id": wf, "action": "approve"}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, "bad_request", "{e:?}");
    let e = call(
        &api,
        "gate_decide",
        json!({"workflow_id": wf, "action": "reject", "reviewer": "ana"}),
    )
    .await
    .unwrap_err();
    assert!(e.message.contains("rationale"), "{e:?}");
    let e = call(
        &api,
        "gate_decide",
        json!({"workflow_id": "nope", "action": "approve", "reviewer": "ana"}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, "not_found", "{e:?}");

    let r = call(
        &api,
        "gate_decide",
        json!({"workflow_id": wf, "action": "approve", "reviewer": "ana", "rationale": "figures tie out"}),
    )
    .await
    .unwrap();
    assert_eq!(r["decision"]["decided_by"], "ana");
    assert_eq!(r["persisted"], true, "stored before the reply");
    assert!(r["decision"]["response_ms"].as_i64().unwrap() >= 300);
    assert_eq!(r["newly_ready"], json!(["report"]));
    let done = wait_state(&api, wf, "completed").await;
    assert!(done.get("open_gates").is_none());
    let gate = task_of(&api, wf, "review").await;
    assert_eq!(gate["state"], "completed");
    assert_eq!(gate["gate"]["decision"]["action"], "approve");
    let e = call(
        &api,
        "gate_decide",
        json!({"workflow_id": wf, "action": "approve", "reviewer": "ana"}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, "workflow_finished", "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reminders_escalation_reject_and_send_back() {
    let stack = Stack::start();
    let env = [
        ("CAUCUS_COORDINATOR_GATE_REMINDERS", "150ms,300ms"),
        ("CAUCUS_COORDINATOR_GATE_ESCALATE_AFTER", "500ms"),
    ];
    let mut c = coordinator(&stack, &env);
    let _f = crate::facilitator_common::facilitator(&stack, &[]);
    let dir = tempfile::tempdir().unwrap();
    let _w = worker(&stack, "analyst", 2, &agent_handler(&dir), &[]);
    let api = Api::connect(&stack).await;
    let p = json!({
        "name": "gated",
        "capacities": {"analyst": 2},
        "stages": [
            {"name": "draft", "agent": "analyst", "params": {"output": {"v": 1}}},
            {"name": "check", "agent": "analyst", "depends_on": ["draft"]},
            {"name": "signoff", "kind": "gate", "depends_on": ["check"]},
            {"name": "publish", "agent": "analyst", "depends_on": ["signoff"]}
        ]
    });
    let ids = submit(&api, &["X", "Y"], p).await;
    let (x, y) = (&ids[0], &ids[1]);

    // X: two reminders then one escalation, as alert cards; then reject.
    wait_gate(&api, x, "signoff").await;
    let alerts = eventually("the escalation card", Duration::from_secs(20), || async {
        let all = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>").await;
        (!alerts_of(&all, "gate_escalation", x).is_empty()).then_some(all)
    })
    .await;
    let reminders = alerts_of(&alerts, "gate_reminder", x);
    assert_eq!(reminders.len(), 2, "one card per reminder");
    assert!(reminders
        .iter()
        .all(|a| a.subject == "caucus.alerts.warning"));
    let esc = alerts_of(&alerts, "gate_escalation", x);
    assert_eq!(esc.len(), 1);
    assert_eq!(esc[0].subject, "caucus.alerts.critical");
    assert_eq!(esc[0].body["content"]["gate"], "signoff");
    assert_eq!(
        esc[0].body["content"]["actions"],
        json!(["approve", "reject", "send_back"])
    );
    let r = call(
        &api,
        "gate_decide",
        json!({"workflow_id": x, "action": "reject", "reviewer": "bo", "rationale": "sources unverified"}),
    )
    .await
    .unwrap();
    assert_eq!(r["decision"]["escalated"], true);
    assert_eq!(r["decision"]["reminders_sent"], 2);
    let failed = wait_state(&api, x, "failed").await;
    assert_eq!(
        failed["failure"],
        "rejected at gate signoff by bo: sources unverified"
    );

    // Y: send back to `draft`: draft and check run again, the gate reopens.
    wait_gate(&api, y, "signoff").await;
    let r = call(
        &api,
        "gate_decide",
        json!({"workflow_id": y, "action": "send_back", "reviewer": "bo",
               "rationale": "redo with the new filing", "send_back_to": ["draft"]}),
    )
    .await
    .unwrap();
    assert_eq!(r["renewed"], json!(["check", "draft"]));
    eventually("the gate to reopen", Duration::from_secs(20), || async {
        let t = task_of(&api, y, "signoff").await;
        (t["state"] == "awaiting_approval" && t["gate"]["history"].as_array()?.len() == 1)
            .then_some(())
    })
    .await;
    // `status` answers from memory, before the pump persists the reopened
    // gate; the SIGKILL must come after the write, or the successor loads
    // the gate still closed and `gates` below lists nothing until the
    // unacknowledged events are redelivered to it.
    crate::common::eventually_stored(
        &api,
        y,
        "the reopened gate in KV",
        Duration::from_secs(20),
        |stored| {
            let g = &stored["tasks"]["signoff"];
            g["state"] == "awaiting_approval"
                && g["gate"]["history"]
                    .as_array()
                    .is_some_and(|h| h.len() == 1)
        },
    )
    .await;
    // SIGKILL the coordinator while the gate waits: a new one carries on
    // from KV with the gate still open and its send-back history kept.
    c.kill();
    let _c2 = coordinator(&stack, &env);
    let listed = call(&api, "gates", json!({"workflow_id": y}))
        .await
        .unwrap();
    assert_eq!(listed["count"], 1, "{listed}");
    assert_eq!(listed["gates"][0]["sent_back"], 1);
    let draft = task_of(&api, y, "draft").await;
    assert_eq!(draft["attempt"], 2, "ran again");
    assert_eq!(draft["previous_output"]["attempt"], 1);
    call(
        &api,
        "gate_decide",
        json!({"workflow_id": y, "action": "approve", "reviewer": "bo"}),
    )
    .await
    .unwrap();
    wait_state(&api, y, "completed").await;
    let s = starts(&api).await;
    assert_eq!(s[&format!("{y}/draft")], 2);
    assert_eq!(s[&format!("{y}/check")], 2);
    assert_eq!(s[&format!("{y}/publish")], 1);
    assert!(
        !s.contains_key(&format!("{x}/publish")),
        "rejected: never published"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_override_example_reruns_exactly_the_affected_tasks() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let _f = crate::facilitator_common::facilitator(&stack, &[]);
    let dir = tempfile::tempdir().unwrap();
    let _w = worker(&stack, "analyst", 4, &agent_handler(&dir), &[]);
    let api = Api::connect(&stack).await;
    let fac = crate::facilitator_common::Client::connect(&stack).await;
    let ids = submit(&api, &["ACME"], seed_pipeline()).await;
    let wf = &ids[0];

    // A valuation debate of this workflow ends provisional at 25 %: nobody
    // answers level 1, the expert is unavailable at level 3.
    let mut ch =
        crate::facilitator_common::challenge("CH-GATE", "valuation", "strategy", "financial");
    ch["content"]["workflow_id"] = json!(wf);
    ch["content"]["item"] = json!("ACME");
    fac.publish_debate("CH-GATE", "challenge", ch).await;
    fac.wait_debate("CH-GATE", "level 3", Duration::from_secs(20), |d| {
        d["state"] == "awaiting_human"
    })
    .await;
    fac.call(
        "decide",
        json!({"debate_id": "CH-GATE", "expert": "expert", "unavailable": true}),
    )
    .await
    .unwrap();
    fac.wait_debate("CH-GATE", "provisional", Duration::from_secs(10), |d| {
        d["state"] == "provisional"
    })
    .await;

    wait_gate(&api, wf, "review").await;
    let pkg = call(&api, "gate", json!({"workflow_id": wf}))
        .await
        .unwrap();
    assert_eq!(pkg["provisional"]["count"], 1);
    assert_eq!(
        pkg["provisional"]["message"],
        "1 provisional decision requires review"
    );
    let d = &pkg["provisional"]["decisions"][0];
    assert_eq!(d["debate_id"], "CH-GATE");
    assert_eq!(d["conservative_position"]["value"], 0.25);
    assert!(d["positions"]["strategy"]["statement"].is_string());
    assert_eq!(pkg["can_approve"], false);
    let e = call(
        &api,
        "gate_decide",
        json!({"workflow_id": wf, "action": "approve", "reviewer": "gate4"}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, "provisional_unreviewed", "{e:?}");
    assert!(e.message.contains("CH-GATE"), "{e:?}");

    // The person overrides with 28 %.
    let r = call(
        &api,
        "gate_review",
        json!({"workflow_id": wf, "debate_id": "CH-GATE", "action": "override", "reviewer": "gate4",
               "rationale": "Q3 guidance supports 28%",
               "position": {"statement": "28% operating margin", "metric": "operating_margin", "value": 0.28}}),
    )
    .await
    .unwrap();
    let report = &r["facilitator"]["impact"]["report"];
    let impact = |id: &str| {
        report["impacts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["analysis_id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} in {report}"))
    };
    let dcf = impact("dcf_valuation");
    assert_eq!(dcf["old_value"], 85.0);
    assert!((dcf["estimated_new_value"].as_f64().unwrap() - 95.2).abs() < 1e-6);
    assert_eq!(dcf["requires_rerun"], true, "DCF re-run required");
    let risk = impact("risk_assessment");
    assert_eq!(risk["requires_rerun"], false);
    assert!(risk["action"].as_str().unwrap().starts_with("update only"));
    let plan = &r["facilitator"]["impact"]["plan"];
    assert_eq!(plan["execution_strategy"], "serial");
    assert_eq!(
        r["rerun"]["renewed"],
        json!(["dcf_valuation", "sensitivity_analysis"]),
        "exactly the tasks whose re-run is required"
    );

    // The re-runs finish (DCF first, then sensitivity), then the gate is
    // approved and the report runs.
    eventually("the re-runs", Duration::from_secs(20), || async {
        let t = task_of(&api, wf, "sensitivity_analysis").await;
        (t["state"] == "completed" && t["attempt"] == 2).then_some(())
    })
    .await;
    let dcf = task_of(&api, wf, "dcf_valuation").await;
    assert_eq!(dcf["attempt"], 2);
    assert_eq!(
        dcf["output"]["resolved_assumptions"],
        json!({"operating_margin": 0.28}),
        "the re-run saw the human's margin"
    );
    assert_eq!(dcf["output"]["target_price"], 95.2);
    assert_eq!(dcf["previous_output"]["target_price"], 85.0);
    let sens = task_of(&api, wf, "sensitivity_analysis").await;
    assert!(
        sens["started_at"].as_str().unwrap() >= dcf["finished_at"].as_str().unwrap(),
        "serial: sensitivity after the DCF"
    );
    // The package lists the DCF's finding once (its re-run restated it),
    // and the re-run record shows each estimate next to the actual result.
    let pkg = call(&api, "gate", json!({"workflow_id": wf}))
        .await
        .unwrap();
    let dcf_findings: Vec<&Value> = pkg["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["finding"] == "DCF target price")
        .collect();
    assert_eq!(dcf_findings.len(), 1, "{}", pkg["findings"]);
    assert_eq!(
        dcf_findings[0]["finding_id"],
        format!("{wf}/dcf_valuation:finding:0")
    );
    let estimates = pkg["reruns"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|r| r["estimates"].as_array())
        .unwrap_or_else(|| panic!("estimates in {}", pkg["reruns"]));
    let est = |task: &str| {
        estimates
            .iter()
            .find(|e| e["task"] == task)
            .unwrap_or_else(|| panic!("{task} in {estimates:?}"))
    };
    let e = est("dcf_valuation");
    assert_eq!(e["before"], 85.0, "{e}");
    assert_eq!(e["estimate"], 95.2, "{e}");
    assert_eq!(e["estimate_method"], "linear sensitivity", "{e}");
    assert_eq!(e["actual"], 95.2, "{e}");
    assert_eq!(e["error"], 0.0, "{e}");
    assert_eq!(est("sensitivity_analysis")["actual"], 95.2);
    assert_eq!(estimates.len(), 2, "only re-run tasks: {estimates:?}");
    let r = call(
        &api,
        "gate_decide",
        json!({"workflow_id": wf, "action": "approve", "reviewer": "gate4"}),
    )
    .await
    .unwrap();
    assert_eq!(r["decision"]["action"], "approve");
    let done = wait_state(&api, wf, "completed").await;
    assert_eq!(
        done["resolved_assumptions"],
        json!({"operating_margin": 0.28})
    );
    let s = starts(&api).await;
    let n = |k: &str| s.get(&format!("{wf}/{k}")).copied().unwrap_or(0);
    assert_eq!(n("dcf_valuation"), 2);
    assert_eq!(n("sensitivity_analysis"), 2);
    assert_eq!(n("risk_assessment"), 1, "update only: not re-run");
    assert_eq!(n("peer_comparison"), 1);
    assert_eq!(n("financial"), 1);
    assert_eq!(n("report"), 1);
    // The override fed both agents' track records: strategy's 30 % was
    // closer to the person's 28 %; financial's applied 25 % was overridden.
    let fin = fac
        .call("credibility", json!({"agent": "financial"}))
        .await
        .unwrap();
    assert_eq!(fin["total_records"], 1, "{fin}");
    assert_eq!(fin["override_rate"], 1.0, "{fin}");
    let strat = fac
        .call("credibility", json!({"agent": "strategy"}))
        .await
        .unwrap();
    assert_eq!(strat["total_records"], 1, "{strat}");
    assert_eq!(strat["overall_accuracy"], 1.0, "{strat}");

    // A later debate on the same margin cites this one as a precedent
    // (resolved before its snapshot, overridden by a person).
    let mut ch =
        crate::facilitator_common::challenge("CH-NEXT", "supporting", "strategy", "financial");
    ch["content"]["item"] = json!("ACME");
    fac.publish_debate("CH-NEXT", "challenge", ch).await;
    let next = fac
        .wait_debate("CH-NEXT", "to open", Duration::from_secs(10), |_| true)
        .await;
    let p = &next["precedents"][0];
    assert_eq!(p["debate_id"], "CH-GATE", "{next}");
    assert_eq!(p["overridden"], true);
    assert_eq!(p["outcome"], "28% operating margin");
    assert_eq!(p["matched"], json!(["metric", "agents", "item"]));
    let report_task = task_of(&api, wf, "report").await;
    assert_eq!(
        report_task["output"]["resolved_assumptions"],
        json!({"operating_margin": 0.28}),
        "later tasks get the settled assumption too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_binding_debate_resolution_reruns_the_valuation_that_used_another_margin() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let _f = crate::facilitator_common::facilitator(&stack, &[]);
    let dir = tempfile::tempdir().unwrap();
    let _w = worker(&stack, "analyst", 2, &agent_handler(&dir), &[]);
    let api = Api::connect(&stack).await;
    let fac = crate::facilitator_common::Client::connect(&stack).await;
    let p = json!({
        "name": "debated",
        "capacities": {"analyst": 2},
        "stages": [
            {"name": "financial", "agent": "analyst", "params": {"output": {"operating_margin": 0.25}}},
            {"name": "valuation", "agent": "analyst", "depends_on": ["financial"],
             "params": {"output": {"target_price": 85.0, "operating_margin_used": 0.25},
                        "impact": {"kind": "valuation", "output_metric": "target_price",
                                   "result": "/target_price", "inputs": ["operating_margin"],
                                   "used": "/operating_margin_used"}}},
            {"name": "review", "kind": "gate", "depends_on": ["valuation"]},
            {"name": "report", "agent": "analyst", "depends_on": ["review", "valuation"]}
        ]
    });
    let ids = submit(&api, &["ACME"], p).await;
    let wf = &ids[0];
    wait_gate(&api, wf, "review").await;

    // The debate ends binding at level 3: the expert sides with the challenger (30 %).
    let mut ch =
        crate::facilitator_common::challenge("CH-RES", "valuation", "strategy", "financial");
    ch["content"]["workflow_id"] = json!(wf);
    fac.publish_debate("CH-RES", "challenge", ch).await;
    fac.wait_debate("CH-RES", "level 3", Duration::from_secs(20), |d| {
        d["state"] == "awaiting_human"
    })
    .await;
    fac.call(
        "decide",
        json!({"debate_id": "CH-RES", "expert": "expert", "side": "challenger", "rationale": "guidance"}),
    )
    .await
    .unwrap();

    let v = eventually(
        "the valuation to run again",
        Duration::from_secs(20),
        || async {
            let t = task_of(&api, wf, "valuation").await;
            (t["attempt"] == 2 && t["state"] == "completed").then_some(t)
        },
    )
    .await;
    assert_eq!(
        v["output"]["resolved_assumptions"],
        json!({"operating_margin": 0.30})
    );
    assert_eq!(v["output"]["operating_margin_used"], 0.30);
    assert_eq!(v["output"]["target_price"], 102.0);
    assert_eq!(v["previous_output"]["operating_margin_used"], 0.25);
    let w = api.status(std::slice::from_ref(wf)).await.pop().unwrap();
    assert_eq!(w["resolved_assumptions"], json!({"operating_margin": 0.30}));
    let reason = w["reruns"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("debate CH-RES resolved at level 3"),
        "{reason}"
    );
    assert_eq!(
        task_of(&api, wf, "financial").await["attempt"],
        1,
        "not affected"
    );
    // The gate stayed open throughout and approves now the re-run is done.
    call(
        &api,
        "gate_decide",
        json!({"workflow_id": wf, "action": "approve", "reviewer": "ana"}),
    )
    .await
    .unwrap();
    wait_state(&api, wf, "completed").await;
    assert_eq!(
        starts(&api).await[&format!("{wf}/valuation")],
        2,
        "once more, not again"
    );
}
