//! The overview updates without a reload: a workflow held at its gate
//! shows `running`; when someone approves it elsewhere and it completes,
//! the row's state cell turns `completed` in the open page (over the
//! Server-Sent Events stream), while the document stays the same one.

use std::time::{Duration, Instant};

use caucus_harness::Stack;
use serde_json::json;

use super::browser::Browser;
use super::stack::{login, Console, PASSWORD, PERSON};
use crate::common::{call, coordinator, eventually, wait_state, worker, Api};

/// How long after the workflow completes the page may show it: the issue
/// asks for 1 s from the event; the rest is the browser's polling and a
/// loaded CI machine.
const LIVE_WITHIN: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_shows_a_workflow_completing_without_a_reload() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    // A gate decision asks it about provisional decisions first.
    let _f = crate::facilitator_common::facilitator(&stack, &[]);
    let _w = worker(&stack, "analyst", 2, "noop", &[]);
    let console = Console::start(&stack, &[]);
    let api = Api::connect(&stack).await;
    let pipeline = json!({
        "name": "held",
        "capacities": {"analyst": 2},
        "stages": [
            {"name": "draft", "agent": "analyst"},
            {"name": "signoff", "kind": "gate", "depends_on": ["draft"]},
            {"name": "publish", "agent": "analyst", "depends_on": ["signoff"]}
        ]
    });
    let r = call(
        &api,
        "submit",
        json!({"items": ["NVDA"], "pipeline": pipeline, "time_unit_ms": 20}),
    )
    .await
    .expect("submit");
    let wf = r["workflow_ids"][0].as_str().expect("id").to_string();
    let ids = vec![wf.clone()];
    eventually("the gate to open", Duration::from_secs(30), || async {
        let w = api.status(&ids).await.pop()?;
        w["open_gates"]
            .as_array()
            .is_some_and(|g| !g.is_empty())
            .then_some(())
    })
    .await;

    let b = Browser::open(&console.url).await;
    login(&b, PERSON, PASSWORD).await;
    b.goto("/").await;
    let cell = format!("table#workflows tr[data-workflow-id='{wf}'] td.state");
    b.wait_text(&cell, "NVDA running at its gate", |t| t.contains("running"))
        .await;
    assert_local_times(&b, &wf, "on load").await;
    b.wait_css("section#agents").await;
    b.wait_css("#bottleneck").await;
    b.screenshot("overview").await;

    // Someone else approves (over the API); the page is only watched.
    b.mark_document().await;
    call(
        &api,
        "gate_decide",
        json!({"workflow_id": wf, "action": "approve", "reviewer": "bo", "rationale": "ok"}),
    )
    .await
    .expect("approve");
    wait_state(&api, &wf, "completed").await;
    let completed = Instant::now();
    b.wait_text(&cell, "the row to turn completed", |t| {
        t.contains("completed")
    })
    .await;
    let took = completed.elapsed();
    assert!(
        b.same_document().await,
        "the row changed without reloading the page"
    );
    assert!(
        took < LIVE_WITHIN,
        "the page showed the completion {took:?} after the API did (goal: 1 s from the event)"
    );
    assert_local_times(&b, &wf, "after the live update").await;
    b.screenshot("overview-live").await;
    b.close().await;
}

/// The row's times are in the browser's time zone: the page script
/// rewrote each `<time datetime>` (the server's text ends in "UTC"),
/// also in rows the live update brought.
async fn assert_local_times(b: &Browser, wf: &str, when: &str) {
    let times = b
        .js(&format!(
            "return Array.from(document.querySelectorAll(\
             \"table#workflows tr[data-workflow-id='{wf}'] time[datetime]\")).map(t => t.textContent);"
        ))
        .await;
    let times = times.as_array().cloned().unwrap_or_default();
    assert!(!times.is_empty(), "the row shows when it was submitted");
    for t in &times {
        let t = t.as_str().unwrap_or_default();
        assert!(
            !t.ends_with("UTC"),
            "{when}: `{t}` is the server's UTC text, not the browser's local time"
        );
    }
}
