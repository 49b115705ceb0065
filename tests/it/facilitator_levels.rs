//! Each level of the debate ladder on real servers with shrunk time-outs.

use std::time::Duration;

use crate::facilitator_common::*;
use caucus_harness::Stack;
use serde_json::{json, Value};

const S: &str = "strategy_analyst";
const F: &str = "financial_analyst";
const WAIT: Duration = Duration::from_secs(20);

fn snap(d: &Value) -> String {
    d["snapshot"]["snapshot_id"].as_str().unwrap().to_string()
}

async fn ack_evidence(c: &Client, id: &str, snapshot: &str, position: Option<Value>) {
    c.publish_debate(
        id,
        "ack",
        message(
            "debate_ack",
            F,
            json!({"debate_id": id, "snapshot_id": snapshot}),
        ),
    )
    .await;
    let mut ev = json!({"debate_id": id, "snapshot_id": snapshot, "evidence": ["10-K page 45", "CFO commentary"]});
    if let Some(p) = position {
        ev["position"] = p;
    }
    c.publish_debate(id, "evidence", message("debate_evidence", F, ev))
        .await;
    c.wait_debate(id, "awaiting_verdict", WAIT, |d| {
        d["state"] == "awaiting_verdict"
    })
    .await;
}

async fn verdict(c: &Client, id: &str, snapshot: &str, accepted: bool) {
    c.publish_debate(
        id,
        "verdict",
        message("debate_verdict", S, json!({"debate_id": id, "snapshot_id": snapshot, "accepted": accepted, "reason": "checked"})),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn level1_accepted_evidence_resolves_and_every_message_carries_the_snapshot() {
    let stack = Stack::start();
    let _f = facilitator(
        &stack,
        &[
            ("CAUCUS_FACILITATOR_ACK_TIMEOUT", "30s"),
            ("CAUCUS_FACILITATOR_EVIDENCE_TIMEOUT", "60s"),
        ],
    );
    let c = Client::connect(&stack).await;
    let _s = Agent::start(&c, S, Flush::Now).await;
    let f = Agent::start(&c, F, Flush::Now).await;
    let d = open(&c, "CH-001", "valuation", S, F).await;
    assert_eq!(
        (d["level"].as_u64(), d["state"].as_str()),
        (Some(1), Some("awaiting_ack"))
    );
    let snapshot = snap(&d);
    assert!(snapshot.starts_with("snap_"), "{snapshot}");
    let mut flushed: Vec<&str> = d["snapshot"]["flushed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    flushed.sort();
    assert_eq!(flushed, vec![F, S]);
    // The challenged agent got the challenge stamped with the snapshot.
    let handed = f.wait_challenge("CH-001").await;
    assert_eq!(handed["content"]["snapshot_id"], snapshot.as_str());

    ack_evidence(&c, "CH-001", &snapshot, Some(json!({"statement": "26% operating margin", "metric": "operating_margin", "value": 0.26}))).await;
    verdict(&c, "CH-001", &snapshot, true).await;
    let d = c
        .wait_debate("CH-001", "resolution", WAIT, |d| d["state"] == "resolved")
        .await;
    let r = &d["resolution"];
    assert_eq!(r["level"], 1);
    assert_eq!(r["method"], "agent_direct");
    assert_eq!(r["final_position"]["statement"], "26% operating margin");
    assert_eq!(r["override_window"]["status"], "not_applicable");
    for field in [
        "evidence_considered",
        "rationale",
        "confidence",
        "impact",
        "snapshot_id",
    ] {
        assert!(!r[field].is_null(), "resolution lacks {field}: {r}");
    }
    // The event goes out right after the stored resolution: poll for it.
    let events = poll("the resolution event", WAIT, || async {
        let e = c.events("CH-001", "resolution").await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["message_type"], "debate_resolution");
    assert_eq!(events[0]["content"]["snapshot_id"], snapshot.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_timeout_goes_to_level2_and_without_track_records_to_a_person() {
    let stack = Stack::start();
    let _f = facilitator(&stack, &[]);
    let c = Client::connect(&stack).await;
    let _s = Agent::start(&c, S, Flush::Now).await;
    let _a = Agent::start(&c, F, Flush::Now).await;
    open(&c, "CH-002", "valuation", S, F).await;
    // Nobody acknowledges: 300 ms later level 2 finds no track records,
    // so the debate goes to the expert.
    let d = c
        .wait_debate("CH-002", "level 3", WAIT, |d| d["level"] == 3)
        .await;
    assert_eq!(d["state"], "awaiting_human");
    assert_eq!(d["expert"], "expert");
    assert!(
        d["assessment"]["reason"]
            .as_str()
            .unwrap()
            .contains("insufficient track record"),
        "{}",
        d["assessment"]
    );
    let esc = poll("both escalation events", WAIT, || async {
        let e = c.events("CH-002", "escalation").await;
        (e.len() >= 2).then_some(e)
    })
    .await;
    let steps: Vec<(u64, u64, String)> = esc
        .iter()
        .map(|e| {
            (
                e["content"]["from_level"].as_u64().unwrap(),
                e["content"]["to_level"].as_u64().unwrap(),
                e["content"]["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        (steps[0].0, steps[0].1, steps[0].2.as_str()),
        (1, 2, "ack_timeout")
    );
    assert_eq!((steps[1].0, steps[1].1), (2, 3));
    assert_eq!(
        c.call("expert_load", json!({})).await.unwrap(),
        json!({"expert": "1/3"})
    );
    let listed = c
        .call("debates", json!({"state": "awaiting_human"}))
        .await
        .unwrap();
    assert_eq!(listed["debates"][0]["debate_id"], "CH-002");
    assert_eq!(listed["debates"][0]["level"], 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn level2_auto_resolves_a_clear_credibility_gap_but_never_a_critical_path_debate() {
    let stack = Stack::start();
    let _f = facilitator(
        &stack,
        &[
            ("CAUCUS_FACILITATOR_ACK_TIMEOUT", "30s"),
            ("CAUCUS_FACILITATOR_EVIDENCE_TIMEOUT", "60s"),
        ],
    );
    let c = Client::connect(&stack).await;
    let _s = Agent::start(&c, S, Flush::Now).await;
    let _a = Agent::start(&c, F, Flush::Now).await;
    let r = c.call("track_record", records(S, 20, 0)).await.unwrap();
    assert_eq!(r["agents"][S], 20);
    c.call("track_record", records(F, 2, 18)).await.unwrap();
    let cred = c
        .call(
            "credibility",
            json!({"agent": S, "context": {"metric": "operating_margin"}}),
        )
        .await
        .unwrap();
    assert_eq!(cred["sample_size"], 20);

    for (id, priority) in [("CH-V", "valuation"), ("CH-C", "critical-path")] {
        let d = open(&c, id, priority, S, F).await;
        let snapshot = snap(&d);
        ack_evidence(&c, id, &snapshot, None).await;
        verdict(&c, id, &snapshot, false).await;
    }
    let d = c
        .wait_debate("CH-V", "credibility resolution", WAIT, |d| {
            d["state"] == "resolved"
        })
        .await;
    let r = &d["resolution"];
    assert_eq!(
        (
            r["level"].as_u64(),
            r["method"].as_str(),
            r["label"].as_str()
        ),
        (Some(2), Some("credibility"), Some("facilitator-resolved"))
    );
    assert_eq!(r["binding"], true);
    assert_eq!(r["winner"], S);
    assert_eq!(r["final_position"]["statement"], "30% operating margin");
    let cred = &r["credibility"];
    assert_eq!(cred["clear"], true);
    for k in ["challenger", "challenged"] {
        for f in ["score", "interval", "override_rate", "context_match"] {
            assert!(!cred[k][f].is_null(), "credibility.{k}.{f} missing: {cred}");
        }
    }
    assert!(cred["differential"].as_f64().unwrap() > cred["required"].as_f64().unwrap());

    let d = c
        .wait_debate("CH-C", "level 3", WAIT, |d| d["level"] == 3)
        .await;
    assert_eq!(
        d["state"], "awaiting_human",
        "critical-path debates go to a person"
    );
    assert_eq!(d["assessment"]["clear"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn human_timeout_gives_a_provisional_default_and_a_gate_override_reports_impact() {
    let stack = Stack::start();
    let _f = facilitator(&stack, &[("CAUCUS_FACILITATOR_HUMAN_TIMEOUT", "700ms")]);
    let c = Client::connect(&stack).await;
    let _s = Agent::start(&c, S, Flush::Now).await;
    let _a = Agent::start(&c, F, Flush::Now).await;
    open(&c, "CH-H", "valuation", S, F).await;
    open(&c, "CH-P", "valuation", S, F).await;
    c.wait_debate("CH-H", "level 3", WAIT, |d| d["level"] == 3)
        .await;
    // A person decides one debate in time …
    let r = c
        .call("decide", json!({"debate_id": "CH-H", "expert": "expert", "side": "challenger", "rationale": "guidance is credible"}))
        .await
        .unwrap();
    assert_eq!(r["resolution"]["level"], 3);
    assert_eq!(r["resolution"]["method"], "human");
    assert_eq!(r["resolution"]["decided_by"], "expert");
    // … and lets the other time out.
    let d = c
        .wait_debate("CH-P", "level 4", WAIT, |d| d["level"] == 4)
        .await;
    assert_eq!(d["state"], "provisional");
    let r = &d["resolution"];
    assert_eq!(r["label"], "provisional - conservative default");
    assert_eq!(r["provisional"], true);
    assert_eq!(r["final_position"]["statement"], "25% operating margin");
    let p = &r["provisional_details"];
    assert_eq!(p["rule"], "lowest:operating_margin");
    assert_eq!(p["trigger"], "human_timeout");
    assert_eq!(p["alternatives"][0]["statement"], "30% operating margin");
    assert!(p["review_deadline"].is_string());
    assert_eq!(p["downstream_dependencies"].as_array().unwrap().len(), 4);
    assert_eq!(r["override_window"]["status"], "open");
    // The timed-out debate's expert slot is released after its level 4
    // is stored (an effect of the stored step): poll for the free slot.
    poll("CH-P's expert slot to be released", WAIT, || async {
        let l = c.call("expert_load", json!({})).await.unwrap();
        (l == json!({"expert": "0/3"})).then_some(())
    })
    .await;

    let prov = c
        .call("provisional", json!({"workflow_id": "wf-1"}))
        .await
        .unwrap();
    assert_eq!(prov["count"], 1);
    assert_eq!(prov["message"], "1 provisional decision requires review");
    assert_eq!(prov["decisions"][0]["debate_id"], "CH-P");
    assert_eq!(
        prov["decisions"][0]["conservative_position"]["statement"],
        "25% operating margin"
    );

    // The seed's usage example: the human overrides with 28 %.
    let e = c
        .call(
            "gate_review",
            json!({"debate_id": "CH-P", "action": "override", "reviewer": "gate4", "rationale": " ",
            "position": {"statement": "28%", "metric": "operating_margin", "value": 0.28}}),
        )
        .await
        .unwrap_err();
    assert!(e.message.contains("rationale"), "{e:?}");
    let r = c
        .call("gate_review", json!({
            "debate_id": "CH-P", "action": "override", "reviewer": "gate4",
            "rationale": "Use 28% based on management guidance",
            "position": {"statement": "28% operating margin", "metric": "operating_margin", "value": 0.28},
            "analyses": [
                {"analysis_id": "dcf_valuation", "kind": "valuation", "output_metric": "target_price", "current_result": 85.0, "rerun_minutes": 5},
                {"analysis_id": "sensitivity_analysis", "kind": "sensitivity", "output_metric": "target_price", "current_result": 85.0, "rerun_minutes": 10, "depends_on": ["dcf_valuation"]},
                {"analysis_id": "risk_assessment", "kind": "risk_assessment", "output_metric": "confidence_score", "current_result": 0.6, "rerun_minutes": 3},
                {"analysis_id": "peer_comparison", "kind": "other", "output_metric": "context", "rerun_minutes": 2}
            ]
        }))
        .await
        .unwrap();
    assert_eq!(r["resolution"]["level"], 5);
    assert_eq!(r["resolution"]["method"], "gate_override");
    let impacts = r["impact"]["report"]["impacts"].as_array().unwrap();
    let dcf = impacts
        .iter()
        .find(|i| i["analysis_id"] == "dcf_valuation")
        .unwrap();
    assert!(
        (dcf["estimated_new_value"].as_f64().unwrap() - 95.2).abs() < 0.01,
        "{dcf}"
    );
    assert_eq!(dcf["requires_rerun"], true);
    let risk = impacts
        .iter()
        .find(|i| i["analysis_id"] == "risk_assessment")
        .unwrap();
    assert_eq!(risk["requires_rerun"], false);
    assert_eq!(r["impact"]["plan"]["execution_strategy"], "serial");
    assert_eq!(r["impact"]["report"]["total_rerun_minutes"], 15.0);
    assert_eq!(c.call("provisional", json!({})).await.unwrap()["count"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_expert_queue_overflows_by_priority_class() {
    let stack = Stack::start();
    let _f = facilitator(&stack, &[]);
    let c = Client::connect(&stack).await;
    let _s = Agent::start(&c, S, Flush::Now).await;
    let _a = Agent::start(&c, F, Flush::Now).await;
    for id in ["Q1", "Q2", "Q3"] {
        open(&c, id, "supporting", S, F).await;
    }
    for id in ["Q1", "Q2", "Q3"] {
        c.wait_debate(id, "level 3", WAIT, |d| d["level"] == 3)
            .await;
    }
    assert_eq!(
        c.call("expert_load", json!({})).await.unwrap(),
        json!({"expert": "3/3"})
    );

    for (id, priority) in [
        ("OC", "critical-path"),
        ("OV", "valuation"),
        ("OS", "supporting"),
    ] {
        open(&c, id, priority, S, F).await;
    }
    let oc = c
        .wait_debate("OC", "level 4", WAIT, |d| d["level"] == 4)
        .await;
    assert_eq!(oc["resolution"]["method"], "conservative_default");
    assert_eq!(
        oc["resolution"]["provisional_details"]["trigger"],
        "expert_queue_full"
    );
    for id in ["OV", "OS"] {
        let d = c
            .wait_debate(id, "deferral", WAIT, |d| d["state"] == "provisional")
            .await;
        assert_eq!(d["resolution"]["method"], "deferred_to_gate", "{id}");
        assert_eq!(d["resolution"]["provisional"], true);
    }
    assert_eq!(
        c.call("expert_load", json!({})).await.unwrap(),
        json!({"expert": "3/3"})
    );
    assert_eq!(c.call("provisional", json!({})).await.unwrap()["count"], 3);

    // Level 5: confirm one, re-debate another.
    let r = c
        .call(
            "gate_review",
            json!({"debate_id": "OV", "action": "confirm", "reviewer": "gate4"}),
        )
        .await
        .unwrap();
    assert_eq!(r["resolution"]["method"], "gate_confirm");
    assert_eq!(
        r["resolution"]["final_position"]["statement"],
        "25% operating margin"
    );
    let r = c
        .call("gate_review", json!({"debate_id": "OS", "action": "redebate", "reviewer": "gate4", "context": "Q3 guidance raised"}))
        .await
        .unwrap();
    assert_eq!(r["resolution"]["method"], "gate_redebate");
    assert_eq!(r["redebate_id"], "OS-r1");
    let again = c
        .wait_debate("OS-r1", "the re-debate", WAIT, |_| true)
        .await;
    assert_eq!(again["redebate_of"], "OS");
    assert!(again["challenge"]["counter_evidence"]
        .to_string()
        .contains("Q3 guidance raised"));

    // A person frees a slot: the next debate is routed again.
    c.call(
        "decide",
        json!({"debate_id": "Q1", "expert": "expert", "side": "challenged"}),
    )
    .await
    .unwrap();
    assert_eq!(
        c.call("expert_load", json!({})).await.unwrap(),
        json!({"expert": "2/3"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_citing_another_snapshot_are_rejected_with_a_clear_error() {
    let stack = Stack::start();
    let _f = facilitator(&stack, &[("CAUCUS_FACILITATOR_ACK_TIMEOUT", "30s")]);
    let c = Client::connect(&stack).await;
    let _s = Agent::start(&c, S, Flush::Now).await;
    let _a = Agent::start(&c, F, Flush::Now).await;
    let d = open(&c, "CH-S", "valuation", S, F).await;
    let snapshot = snap(&d);
    let e = c
        .call(
            "message",
            message(
                "debate_ack",
                F,
                json!({"debate_id": "CH-S", "snapshot_id": "snap_999999"}),
            ),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, "snapshot_mismatch");
    assert!(
        e.message.contains("snap_999999") && e.message.contains(&snapshot),
        "{}",
        e.message
    );
    let e = c
        .call(
            "message",
            message("debate_ack", F, json!({"debate_id": "CH-S"})),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, "snapshot_missing");
    // Through the stream: dead-lettered with the reason, debate unchanged.
    c.publish_debate(
        "CH-S",
        "ack",
        message(
            "debate_ack",
            F,
            json!({"debate_id": "CH-S", "snapshot_id": "snap_1"}),
        ),
    )
    .await;
    let dlq = poll("the dead letter", WAIT, || async {
        let m = c.read_stream("CAUCUS_DLQ", "caucus.dlq.>").await;
        (!m.is_empty()).then_some(m)
    })
    .await;
    let h = dlq[0].headers.as_ref().unwrap();
    assert_eq!(
        h.get("Caucus-Dlq-Code").unwrap().as_str(),
        "snapshot_mismatch"
    );
    assert_eq!(c.debate("CH-S").await["state"], "awaiting_ack");
    let ok = c
        .call(
            "message",
            message(
                "debate_ack",
                F,
                json!({"debate_id": "CH-S", "snapshot_id": snapshot}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(ok["debate"]["state"], "awaiting_evidence");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_without_a_verdict_times_out_to_level2() {
    let stack = Stack::start();
    let _f = facilitator(
        &stack,
        &[
            ("CAUCUS_FACILITATOR_ACK_TIMEOUT", "30s"),
            ("CAUCUS_FACILITATOR_EVIDENCE_TIMEOUT", "1500ms"),
            ("CAUCUS_FACILITATOR_VERDICT_GRACE", "300ms"),
        ],
    );
    let c = Client::connect(&stack).await;
    let _s = Agent::start(&c, S, Flush::Now).await;
    let _a = Agent::start(&c, F, Flush::Now).await;
    let d = open(&c, "CH-VT", "valuation", S, F).await;
    let snapshot = snap(&d);
    // Acknowledged and evidenced in time; the challenger never answers.
    ack_evidence(&c, "CH-VT", &snapshot, None).await;
    let d = c
        .wait_debate("CH-VT", "level 2 or later", WAIT, |d| {
            d["level"].as_u64().unwrap_or(0) >= 2
        })
        .await;
    let esc = poll("the escalation event", WAIT, || async {
        let e = c.events("CH-VT", "escalation").await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert_eq!(esc[0]["content"]["from_level"], 1);
    assert_eq!(esc[0]["content"]["to_level"], 2);
    assert_eq!(esc[0]["content"]["reason"], "verdict_timeout", "{}", esc[0]);
    assert!(d["evidence"].as_array().is_some_and(|e| !e.is_empty()));
}
