//! At the gate, in the browser: a person logs in, finds AAPL's review gate
//! on /gates, reads its decision package and approves it with a rationale;
//! the workflow completes with the decision recorded under their name. A
//! provisional decision blocking a gate, listed on /debates, is confirmed
//! from the gate page's provisional section, after which the gate can be
//! approved.

use std::time::Duration;

use caucus_harness::Stack;
use fantoccini::Locator;
use serde_json::{json, Value};

use super::browser::Browser;
use super::stack::{login, Console, PASSWORD, PERSON};
use crate::common::{call, coordinator, eventually, wait_state, worker, Api};
use crate::facilitator_common::{challenge, facilitator, Client};

/// Submits `pipeline` for `items` the way a person's batch comes in: its
/// gates wait for a person (no auto-approval).
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
        .expect("workflow_ids")
        .iter()
        .map(|v| v.as_str().expect("id").to_string())
        .collect()
}

/// Waits until `gate` of `wf` is open.
async fn wait_gate(api: &Api, wf: &str, gate: &str) {
    let ids = vec![wf.to_string()];
    eventually(
        &format!("gate {gate} of {wf} to open"),
        Duration::from_secs(30),
        || async {
            let w = api.status(&ids).await.pop()?;
            w["open_gates"]
                .as_array()
                .is_some_and(|g| g.iter().any(|x| x == gate))
                .then_some(())
        },
    )
    .await;
}

/// The gate task `gate` of `wf` as the coordinator stores it.
async fn gate_task(api: &Api, wf: &str, gate: &str) -> Value {
    let r = call(api, "status", json!({"ids": [wf], "tasks": true}))
        .await
        .expect("status");
    r["workflows"][0]["tasks"][gate].clone()
}

/// Opens the gate of `wf` from the /gates list, as a person would: by the
/// link in its row.
async fn open_from_list(b: &Browser, wf: &str) {
    b.goto("/gates").await;
    let row = b
        .wait_css(&format!("table#gates tr[data-workflow-id='{wf}']"))
        .await;
    let link = row
        .find(Locator::Css(&format!("a[href='/gates/{wf}']")))
        .await
        .unwrap_or_else(|e| panic!("a link to /gates/{wf} in its row: {e}"));
    link.click().await.expect("follow the gate's link");
    b.wait_css("form#decide").await;
    assert_eq!(b.location().await, format!("/gates/{wf}"));
}

/// Types `rationale` and presses Approve on the open gate page; returns
/// where the POST led.
async fn approve(b: &Browser, rationale: &str) -> String {
    let text = b.wait_css("form#decide textarea[name=rationale]").await;
    text.send_keys(rationale).await.expect("type the rationale");
    let button = b.wait_css("form#decide button[value=approve]").await;
    assert_eq!(
        button.attr("disabled").await.expect("disabled attr"),
        None,
        "Approve is enabled"
    );
    b.submit(&button).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_approves_aapls_review_gate_and_it_is_recorded_under_their_name() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let _f = facilitator(&stack, &[]);
    let _w = worker(
        &stack,
        "screening,business,financial,strategy,valuation,report",
        2,
        "builtin",
        &[],
    );
    let console = Console::start(&stack, &[]);
    let api = Api::connect(&stack).await;
    let wf = submit(&api, &["AAPL"], json!("stock-analysis"))
        .await
        .remove(0);
    wait_gate(&api, &wf, "review").await;

    let b = Browser::open(&console.url).await;
    login(&b, PERSON, PASSWORD).await;

    // /gates lists AAPL's review gate.
    b.goto("/gates").await;
    let row = b
        .wait_text(
            &format!("table#gates tr[data-workflow-id='{wf}']"),
            "AAPL's review gate in the list",
            |t| t.contains("AAPL") && t.contains("review"),
        )
        .await;
    assert!(row.contains("AAPL"), "{row}");
    b.screenshot("gates").await;

    // Its decision package: the analysts' findings with their confidence,
    // nothing provisional, nothing blocking.
    open_from_list(&b, &wf).await;
    let findings = b.all("section#findings tr td.confidence").await;
    assert!(
        findings.len() >= 3,
        "the analysts' findings with their confidence: {}",
        b.body_text().await
    );
    let body = b.body_text().await;
    assert!(body.contains("AAPL"), "{body}");
    assert!(
        body.contains("0 provisional decisions require review"),
        "{body}"
    );
    b.screenshot("gate").await;

    let rationale = "Figures tie out; approved from the console";
    // Decided: back to the list of open gates, which says so.
    let at = approve(&b, rationale).await;
    assert!(at.starts_with("/gates?"), "back to the open gates: {at}");
    b.wait_text("p.flash", "the flash saying it was approved", |t| {
        t.starts_with("Approved")
    })
    .await;
    assert!(
        b.all(&format!("table#gates tr[data-workflow-id='{wf}']"))
            .await
            .is_empty(),
        "the approved gate is no longer listed"
    );
    b.screenshot("gate-approved").await;

    // The workflow completes, the decision under ana's name with her words.
    wait_state(&api, &wf, "completed").await;
    let gate = gate_task(&api, &wf, "review").await;
    let d = &gate["gate"]["decision"];
    assert_eq!(d["action"], "approve", "{gate}");
    assert_eq!(d["decided_by"], PERSON, "{gate}");
    assert_eq!(d["rationale"], rationale, "{gate}");
    let listed = call(&api, "gates", json!({"item": "AAPL"}))
        .await
        .expect("gates");
    assert_eq!(listed["count"], 0, "no gate left open: {listed}");

    // The other pages, for the screenshots of docs/CONSOLE.md.
    b.goto(&format!("/workflows/{wf}")).await;
    let body = b.body_text().await;
    assert!(
        body.contains("AAPL") && body.contains("completed"),
        "{body}"
    );
    b.screenshot("workflow").await;
    // The planner: three items of the same pipeline on the pipeline's
    // capacities.
    b.goto("/plan").await;
    b.wait_css("form#plan-form textarea[name=items]")
        .await
        .send_keys("AAPL MSFT GOOGL")
        .await
        .expect("type the items");
    b.wait_css("form#plan-form input[name=pipeline]")
        .await
        .send_keys("stock-analysis")
        .await
        .expect("type the pipeline");
    let plan = b.wait_css("form#plan-form button[type=submit]").await;
    b.submit(&plan).await;
    b.wait_text("section#plan #makespan", "the makespan", |t| {
        t.starts_with("Makespan:")
    })
    .await;
    b.wait_css("section#plan svg.gantt").await;
    b.wait_css("section#plan #critical-path").await;
    b.screenshot("plan").await;
    b.close().await;
}

/// A gated pipeline on agent type `analyst`: `draft`, the gate `review`,
/// `publish`.
fn gated() -> Value {
    json!({
        "name": "gated",
        "capacities": {"analyst": 2},
        "stages": [
            {"name": "draft", "agent": "analyst"},
            {"name": "review", "kind": "gate", "depends_on": ["draft"]},
            {"name": "publish", "agent": "analyst", "depends_on": ["review"]}
        ]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provisional_decision_is_confirmed_at_the_gate() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let _f = facilitator(&stack, &[]);
    let _w = worker(&stack, "analyst", 2, "noop", &[]);
    let console = Console::start(&stack, &[]);
    let api = Api::connect(&stack).await;
    let fac = Client::connect(&stack).await;
    let wf = submit(&api, &["MSFT"], gated()).await.remove(0);
    wait_gate(&api, &wf, "review").await;

    // A debate of this workflow ends provisional on the conservative
    // default (25 %): nobody answers level 1, the expert is unavailable.
    let id = "CH-CONSOLE";
    let mut ch = challenge(id, "valuation", "strategy", "financial");
    ch["content"]["workflow_id"] = json!(wf);
    ch["content"]["item"] = json!("MSFT");
    fac.publish_debate(id, "challenge", ch).await;
    fac.wait_debate(id, "level 3", Duration::from_secs(20), |d| {
        d["state"] == "awaiting_human"
    })
    .await;
    fac.call(
        "decide",
        json!({"debate_id": id, "expert": "expert", "unavailable": true}),
    )
    .await
    .expect("expert unavailable");
    fac.wait_debate(id, "provisional", Duration::from_secs(10), |d| {
        d["state"] == "provisional"
    })
    .await;

    let b = Browser::open(&console.url).await;
    login(&b, PERSON, PASSWORD).await;

    // /debates lists it as a provisional decision, with the expert queue;
    // its page has the history of its levels.
    b.goto("/debates").await;
    b.wait_css("section#experts").await;
    b.wait_text(
        &format!("table#debates tr[data-debate-id='{id}']"),
        "the debate flagged as a provisional decision",
        |t| t.contains("provisional decision"),
    )
    .await;
    b.screenshot("debates").await;
    b.goto(&format!("/debates/{id}")).await;
    b.wait_text("section#history", "the debate's history", |t| {
        !t.trim().is_empty()
    })
    .await;
    b.screenshot("debate").await;

    open_from_list(&b, &wf).await;
    let section = b
        .wait_text(
            "section#provisional",
            "the provisional decision at the gate",
            |t| t.contains("1 provisional decision requires review"),
        )
        .await;
    assert!(section.contains("25% operating margin"), "{section}");
    assert!(section.contains("30% operating margin"), "{section}");
    let approve_button = b.wait_css("form#decide button[value=approve]").await;
    assert!(
        approve_button
            .attr("disabled")
            .await
            .expect("disabled attr")
            .is_some(),
        "Approve is disabled while a provisional decision awaits review"
    );
    b.screenshot("gate-provisional").await;

    let confirm = b
        .wait_css(&format!(
            "section#provisional [data-debate-id='{id}'] form.confirm button"
        ))
        .await;
    let at = b.submit(&confirm).await;
    assert!(
        at.starts_with(&format!("/gates/{wf}")),
        "back to the gate: {at}"
    );
    b.wait_text("section#provisional", "no provisional decision left", |t| {
        t.contains("0 provisional decisions require review")
    })
    .await;
    b.screenshot("gate-provisional-confirmed").await;

    // Confirmed by ana at level 5: the debate is settled, bindingly, on
    // the conservative default.
    let d = fac.debate(id).await;
    let res = &d["resolution"];
    assert_eq!(res["label"], "gate-confirmed", "{d}");
    assert_eq!(res["level"], 5, "{d}");
    assert_eq!(res["provisional"], false, "{d}");
    assert_eq!(res["decided_by"], PERSON, "{d}");
    assert_eq!(res["final_position"]["value"], 0.25, "{d}");
    let pkg = call(&api, "gate", json!({"workflow_id": wf}))
        .await
        .expect("gate");
    assert_eq!(pkg["provisional"]["count"], 0, "{pkg}");
    assert_eq!(pkg["can_approve"], true, "{pkg}");

    // Now the gate approves, and the workflow completes.
    approve(&b, "Conservative default confirmed").await;
    wait_state(&api, &wf, "completed").await;
    let gate = gate_task(&api, &wf, "review").await;
    assert_eq!(gate["gate"]["decision"]["decided_by"], PERSON, "{gate}");
    b.close().await;
}
