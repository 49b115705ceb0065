//! The seed's failure-correlation example across every process: workers,
//! the coordinator and the correlator, nothing simulated. Five valuation
//! tasks fail with a Koyfin quota error; the coordinator pauses each
//! (tier 2) and reports the failure; the correlator sees one incident,
//! names its root cause, triggers one batch and sends one card per item;
//! other workflows keep running; "Resume all" finishes the five without
//! re-running a completed task.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::{
    call, coordinator, eventually, one_correlation, pipeline, quota_handler, starts,
    stream_messages, wait_state, worker, Api,
};
use caucus_harness::Stack;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn koyfin_quota_incident_end_to_end() {
    let stack = Stack::start();
    // Nothing is exported here, so trace context is asked for by name
    // (`auto` builds none without an exporter): the failures must still
    // carry their tasks' context for the correlator to link.
    let traced = [("CAUCUS_TELEMETRY_TRACE_LEVEL", "info")];
    let _c = coordinator(&stack, &traced);
    let _k = stack
        .service("caucus-correlator")
        .env("CAUCUS_CORRELATOR_LEADER_LEASE", "1s")
        .env("CAUCUS_SHUTDOWN_GRACE", "5s")
        .start();
    let dir = tempfile::tempdir().unwrap();
    let named = ["AAPL", "MSFT", "GOOGL", "AMZN", "TSLA"];
    std::fs::write(dir.path().join("named"), named.join("\n") + "\n").unwrap();
    std::fs::write(dir.path().join("broken"), "").unwrap();
    let _s = worker(&stack, "screening", 4, "noop", &[]);
    let handler = format!("exec:{}", quota_handler(dir.path()));
    let _v = worker(&stack, "valuation", 2, &handler, &traced);
    let _r = worker(&stack, "report", 2, "noop", &[]);
    let api = Api::connect(&stack).await;
    let p = pipeline(
        "mini-stock",
        json!([
            {"name": "screening", "agent": "screening", "expected_duration": 1.0},
            {"name": "valuation", "agent": "valuation", "expected_duration": 1.0,
             "depends_on": ["screening"]},
            {"name": "report", "agent": "report", "expected_duration": 1.0, "depends_on": ["valuation"]}
        ]),
    );
    let mut items: Vec<&str> = named.to_vec();
    items.extend(["NVDA", "META"]);
    let ids = api.submit(&items, p, 20).await;
    let by_item: BTreeMap<&str, String> = items.iter().copied().zip(ids.iter().cloned()).collect();

    // Other workflows keep running to completion.
    api.wait_completed(
        &[by_item["NVDA"].clone(), by_item["META"].clone()],
        Duration::from_secs(30),
    )
    .await;

    // One correlation with all five tickers and the seed's root cause.
    let rec = one_correlation(&api, 5).await;
    assert_eq!(
        rec["root_cause"]["text"], "Koyfin API quota exceeded",
        "{rec}"
    );
    let mut got: Vec<&str> = rec["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    got.sort_unstable();
    let mut want = named.to_vec();
    want.sort_unstable();
    assert_eq!(got, want);
    let cid = rec["correlation_id"].as_str().unwrap().to_string();

    // The batch of exactly those five workflows, all paused.
    let st = eventually(
        "the batch to hold five paused items",
        Duration::from_secs(30),
        || async {
            let s = call(&api, "batch_status", json!({"batch_id": cid}))
                .await
                .ok()?;
            (s["total"] == 5 && s["paused"] == 5).then_some(s)
        },
    )
    .await;
    assert_eq!(st["correlation_id"], cid.as_str(), "{st}");
    for item in named {
        wait_state(&api, &by_item[item], "paused").await;
    }

    // One alert card per affected item, each with the resume-all action.
    let cards = eventually("five alert cards", Duration::from_secs(20), || async {
        let all = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>").await;
        let cards: Vec<_> = all
            .into_iter()
            .filter(|a| a.body["content"]["event_type"] == "correlated_failure")
            .collect();
        (cards.len() >= 5).then_some(cards)
    })
    .await;
    assert_eq!(cards.len(), 5, "exactly one card per item");
    let mut card_items: Vec<&str> = cards
        .iter()
        .map(|c| c.body["content"]["item"].as_str().unwrap())
        .collect();
    card_items.sort_unstable();
    assert_eq!(card_items, want);
    let action = &cards[0].body["content"]["action"];
    assert_eq!(action["operation"], "coordinator.batch_resume");

    // The vendor recovers; the card's action resumes them all.
    std::fs::remove_file(dir.path().join("broken")).unwrap();
    call(&api, "batch_resume", action["body"].clone())
        .await
        .unwrap();
    let named_ids: Vec<String> = named.iter().map(|i| by_item[i].clone()).collect();
    api.wait_completed(&named_ids, Duration::from_secs(60))
        .await;
    let s = starts(&api).await;
    for item in named {
        let id = &by_item[item];
        assert_eq!(
            s.get(&format!("{id}/screening")),
            Some(&1),
            "{item}: not re-run"
        );
        assert_eq!(s.get(&format!("{id}/valuation")), Some(&2), "{item}");
        assert_eq!(s.get(&format!("{id}/report")), Some(&1), "{item}");
    }
    // Exactly one detection was announced.
    let detected = stream_messages(&api.nats, "CAUCUS_CONTROL", "caucus.correlations").await;
    assert_eq!(detected.len(), 1, "{detected:?}");
    // Each failure event is in the failed task's trace (the worker's
    // `failed` event's span), which is what the correlation span links to.
    let failed_events = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.events.task.>").await;
    let failures = stream_messages(&api.nats, "CAUCUS_FAILURES", "caucus.failures.>").await;
    assert!(!failures.is_empty());
    for f in &failures {
        let task = f.body["content"]["task_id"].as_str().expect("task_id");
        let tp = f
            .traceparent
            .as_deref()
            .unwrap_or_else(|| panic!("failure of {task} has no traceparent"));
        assert!(
            failed_events.iter().any(|e| e.body["status"] == "failed"
                && e.body["task_id"] == task
                && e.traceparent.as_deref() == Some(tp)),
            "failure of {task} is not in its failed task's trace ({tp})"
        );
    }
}
