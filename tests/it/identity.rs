//! Who decided (docs/SECURITY.md): with `security.require_identity`, the
//! coordinator records the caller's identity, not the name the body types.
//!
//! - a gate decided through `ApiClient::with_identity("alice")` with
//!   `reviewer: "mallory"` in the body is recorded as decided by `alice`;
//! - the same decision on the bare subject is recorded as `operator`;
//! - a pause as `alice` names her as its trigger;
//! - read operations are not served on `.as.<identity>` subjects;
//! - a level-3 decision as `erin` and a level-5 review made at the
//!   coordinator as `alice` (forwarded to the facilitator as her) name
//!   them in the debates' resolutions.
//!
//! shared/tests/api_identity.rs checks the API server alone.
//!
//! NATS runs without authentication here: which connection may speak as
//! whom is the permission table's business (the auth tests).

use std::time::Duration;

use caucus_harness::Stack;
use caucus_shared::api::coordinator::control::{Pause, PauseRequest};
use caucus_shared::api::coordinator::gates::{
    GateAction, GateDecide, GateDecideRequest, GateReview, GateReviewRequest,
};
use caucus_shared::api::facilitator::{Decide, DecideRequest, Side};
use caucus_shared::api::identity::{subject_as, OPERATOR};
use caucus_shared::api::ApiClient;
use caucus_shared::nats::api::api_request_on;
use caucus_shared::subjects::Subjects;
use serde_json::{json, Value};

use crate::common::{call, coordinator, eventually, worker, Api};

/// An exec agent answering its stage's `params.output`.
const AGENT: &str = r#"
import json, sys
t = json.load(sys.stdin)
print(json.dumps((t.get("params") or {}).get("output") or {}))
"#;

/// One analysis, then a gate.
fn gated() -> Value {
    json!({
        "name": "identity-gated",
        "capacities": {"analyst": 2},
        "stages": [
            {"name": "draft", "agent": "analyst", "params": {"output": {"v": 1}}},
            {"name": "review", "kind": "gate", "depends_on": ["draft"]}
        ]
    })
}

/// Waits until `wf`'s review gate is open.
async fn wait_gate(api: &Api, wf: &str) {
    let ids = vec![wf.to_string()];
    eventually(
        &format!("the review gate of {wf} to open"),
        Duration::from_secs(30),
        || async {
            let w = api.status(&ids).await.pop()?;
            w["open_gates"]
                .as_array()
                .is_some_and(|g| g.iter().any(|x| x == "review"))
                .then_some(())
        },
    )
    .await
}

/// `wf`'s status with its tasks, as `coordinator.status` reads it back.
async fn stored(api: &Api, wf: &str) -> Value {
    let r = call(api, "status", json!({"ids": [wf], "tasks": true}))
        .await
        .unwrap();
    r["workflows"][0].clone()
}

/// A decision naming `mallory` in its body.
fn approve(wf: &str) -> GateDecideRequest {
    GateDecideRequest {
        workflow_id: wf.to_string(),
        gate: None,
        action: GateAction::Approve,
        reviewer: "mallory".into(),
        rationale: "looks right".into(),
        send_back_to: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recorded_decider_is_the_callers_identity_not_the_body() {
    let stack = Stack::start();
    let secure = [("CAUCUS_SECURITY_REQUIRE_IDENTITY", "true")];
    let _c = coordinator(&stack, &secure);
    // Gates ask it whether provisional decisions wait for review.
    let _f = crate::facilitator_common::facilitator(&stack, &secure);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("agent.py");
    std::fs::write(&script, AGENT).unwrap();
    let handler = format!("exec:python3 {}", script.display());
    let _w = worker(&stack, "analyst", 2, &handler, &[]);
    let api = Api::connect(&stack).await;
    let r = call(
        &api,
        "submit",
        json!({"items": ["A", "B", "C"], "pipeline": gated(), "time_unit_ms": 20}),
    )
    .await
    .unwrap();
    let ids: Vec<String> = r["workflow_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    for wf in &ids {
        wait_gate(&api, wf).await;
    }
    let bare = ApiClient::new(
        api.nats.clone(),
        Subjects::default(),
        Duration::from_secs(10),
    );
    let alice = bare.clone().with_identity("alice");

    // As alice: her name is recorded, whatever the body says.
    let r = alice.call::<GateDecide>(&approve(&ids[0])).await.unwrap();
    assert_eq!(r.decision.as_ref().unwrap().decided_by, "alice", "{r:?}");
    let w = stored(&api, &ids[0]).await;
    assert_eq!(
        w["tasks"]["review"]["gate"]["decision"]["decided_by"], "alice",
        "{w}"
    );

    // Bare, with identity required: the shared operator role.
    let r = bare.call::<GateDecide>(&approve(&ids[1])).await.unwrap();
    assert_eq!(r.decision.as_ref().unwrap().decided_by, OPERATOR, "{r:?}");
    let w = stored(&api, &ids[1]).await;
    assert_eq!(
        w["tasks"]["review"]["gate"]["decision"]["decided_by"], OPERATOR,
        "{w}"
    );

    // A pause as alice names her, not the body's trigger.
    let pause = PauseRequest {
        workflow_id: Some(ids[2].clone()),
        trigger_source: Some("mallory".into()),
        ..PauseRequest::default()
    };
    alice.call::<Pause>(&pause).await.unwrap();
    let w = stored(&api, &ids[2]).await;
    assert_eq!(w["pause"]["trigger_source"], "alice", "{w}");

    // Reads are served on their bare subjects only.
    let subjects = Subjects::default();
    let e = api_request_on(
        &api.nats,
        subject_as(&subjects, "coordinator", "gates", "alice"),
        "coordinator",
        &json!({}),
        Duration::from_secs(10),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, "unknown_operation", "{e:?}");
    let gates = call(&api, "gates", json!({})).await.unwrap();
    assert!(gates["count"].is_number(), "{gates}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debate_decisions_and_reviews_record_the_caller() {
    let stack = Stack::start();
    let secure = [("CAUCUS_SECURITY_REQUIRE_IDENTITY", "true")];
    let _c = coordinator(&stack, &secure);
    let _f = crate::facilitator_common::facilitator(&stack, &secure);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("agent.py");
    std::fs::write(&script, AGENT).unwrap();
    let _w = worker(
        &stack,
        "analyst",
        2,
        &format!("exec:python3 {}", script.display()),
        &[],
    );
    let api = Api::connect(&stack).await;
    let fac = crate::facilitator_common::Client::connect(&stack).await;
    let r = call(
        &api,
        "submit",
        json!({"items": ["ACME"], "pipeline": gated(), "time_unit_ms": 20}),
    )
    .await
    .unwrap();
    let wf = r["workflow_ids"][0].as_str().unwrap().to_string();
    let bare = ApiClient::new(
        api.nats.clone(),
        Subjects::default(),
        Duration::from_secs(10),
    );
    let debate = |id: &str| {
        let mut ch = crate::facilitator_common::challenge(id, "valuation", "strategy", "financial");
        ch["content"]["workflow_id"] = json!(wf);
        ch["content"]["item"] = json!("ACME");
        ch
    };
    let at_level_3 = |d: &Value| d["state"] == "awaiting_human";

    // Level 3: erin decides; the body claims mallory.
    fac.publish_debate("CH-ERIN", "challenge", debate("CH-ERIN"))
        .await;
    fac.wait_debate("CH-ERIN", "level 3", Duration::from_secs(20), at_level_3)
        .await;
    let decided = bare
        .clone()
        .with_identity("erin")
        .call::<Decide>(&DecideRequest {
            debate_id: "CH-ERIN".into(),
            expert: "mallory".into(),
            side: Some(Side::Challenger),
            position: None,
            rationale: "guidance".into(),
            unavailable: false,
        })
        .await
        .unwrap();
    let res = decided.resolution.expect("resolved");
    assert_eq!(res.decided_by.as_deref(), Some("erin"), "{res:?}");
    let stored = fac.debate("CH-ERIN").await;
    assert_eq!(stored["resolution"]["decided_by"], "erin", "{stored}");

    // Level 5 at the coordinator: alice confirms a provisional decision;
    // the coordinator forwards the review as her.
    fac.publish_debate("CH-GATE", "challenge", debate("CH-GATE"))
        .await;
    fac.wait_debate("CH-GATE", "level 3", Duration::from_secs(20), at_level_3)
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
    let review = GateReviewRequest {
        workflow_id: wf.clone(),
        debate_id: "CH-GATE".into(),
        action: "confirm".into(),
        reviewer: Some("mallory".into()),
        side: None,
        position: None,
        rationale: None,
        context: None,
        analyses: None,
        dry_run: false,
    };
    let r = bare
        .clone()
        .with_identity("alice")
        .call::<GateReview>(&review)
        .await
        .unwrap();
    let res = r.facilitator.resolution.expect("final resolution");
    assert_eq!(res.decided_by.as_deref(), Some("alice"), "{res:?}");
    let stored = fac.debate("CH-GATE").await;
    assert_eq!(stored["resolution"]["decided_by"], "alice", "{stored}");
}
