//! Pause/resume, failure tiers and batches across real processes.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::{
    alerts_of, call, coordinator, eventually, pipeline, publish_envelope, quota_handler, starts,
    stream_messages, wait_paused, wait_state, worker, Api,
};
use async_nats::jetstream;
use caucus_harness::Stack;
use serde_json::{json, Value};

/// Pause mid-run: the in-flight task finishes and is recorded, nothing new
/// is dispatched, the workflow is PAUSED with a checkpoint and a
/// `pause_complete`; reminders fire at their (shrunk) times once each, also
/// across a coordinator restart; the dry-run plan skips the completed
/// tasks and the resume finishes without re-running any of them.
#[tokio::test(flavor = "multi_thread")]
async fn pause_mid_run_checkpoints_reminds_and_resumes_without_rerun() {
    let stack = Stack::start();
    let env = [("CAUCUS_COORDINATOR_PAUSE_REMINDERS", "300ms,600ms,5s")];
    let mut c1 = coordinator(&stack, &env);
    let _a = worker(&stack, "alpha", 2, "noop", &[]);
    let _b = worker(&stack, "beta", 1, "sleep:1500", &[]);
    let _g = worker(&stack, "gamma", 1, "noop", &[]);
    let api = Api::connect(&stack).await;
    let p = pipeline(
        "mid",
        json!([
            {"name": "x", "agent": "alpha", "expected_duration": 1.0},
            {"name": "y", "agent": "beta", "expected_duration": 1.0, "depends_on": ["x"]},
            {"name": "z", "agent": "gamma", "expected_duration": 1.0, "depends_on": ["x"]},
            {"name": "w", "agent": "alpha", "expected_duration": 1.0, "depends_on": ["y", "z"]}
        ]),
    );
    let ids = api.submit(&["PAUS"], p, 1000).await;
    let id = ids[0].clone();

    // Resuming a running workflow is an illegal transition.
    // Pause while y (1.5 s) runs and its sibling z has finished; waiting
    // for both keeps a loaded machine from pausing before z ran at all.
    eventually(
        "y to run and z to finish",
        Duration::from_secs(20),
        || async {
            let w = api.status(&ids).await.pop()?;
            (w["tasks"]["y"]["state"] == "running" && w["tasks"]["z"]["state"] == "completed")
                .then_some(())
        },
    )
    .await;
    let e = call(&api, "resume", json!({"workflow_id": id}))
        .await
        .unwrap_err();
    assert_eq!(e.code, "illegal_transition");
    assert!(e.message.contains("running → resuming"), "{}", e.message);

    let r = call(
        &api,
        "pause",
        json!({"item": "PAUS", "reason": "vendor maintenance"}),
    )
    .await
    .unwrap();
    assert_eq!(r["workflow_id"], id.as_str());
    assert_eq!(r["outcome"], "pausing", "{r}");
    assert!(
        r["in_flight"].as_array().unwrap().contains(&json!("y")),
        "{r}"
    );

    // With its checkpoint: the checkpoint, pause_complete and the card
    // are written after `paused` is visible.
    let w = wait_paused(&api, &id).await;
    assert_eq!(
        w["tasks"]["y"]["state"], "completed",
        "in-flight y finished: {w}"
    );
    assert_eq!(
        w["tasks"]["w"]["state"], "ready",
        "w not dispatched while paused: {w}"
    );
    let cp_id = format!("{id}.1");
    assert_eq!(w["pause"]["checkpoint_id"], cp_id.as_str(), "{w}");

    // Checkpoint in KV, pause_complete on the control stream.
    let js = jetstream::new(api.nats.clone());
    let kv = js.get_key_value("caucus_checkpoints").await.unwrap();
    let cp: Value = serde_json::from_slice(&kv.get(&cp_id).await.unwrap().unwrap()).unwrap();
    let completed: Vec<&String> = cp["completed"].as_object().unwrap().keys().collect();
    assert_eq!(completed, vec!["x", "y", "z"]);
    assert_eq!(cp["pending"], json!(["w"]));
    assert_eq!(cp["reason"], "vendor maintenance");
    let done = stream_messages(&api.nats, "CAUCUS_CONTROL", "caucus.control.pause_complete").await;
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0].body["message_type"], "pause_complete");
    assert_eq!(done[0].body["content"]["stock_id"], "PAUS");
    assert_eq!(done[0].body["content"]["checkpoint_id"], cp_id.as_str());

    // Reminders 1 and 2 (300 ms, 600 ms).
    eventually("two reminders", Duration::from_secs(20), || async {
        let a = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>").await;
        (alerts_of(&a, "pause_reminder", &id).len() >= 2).then_some(())
    })
    .await;
    // Kill the coordinator; its successor sends reminder 3 (5 s, an
    // escalation) and none of the earlier ones again.
    c1.kill();
    let _c2 = coordinator(&stack, &env);
    let alerts = eventually("the escalation", Duration::from_secs(30), || async {
        let a = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>").await;
        (!alerts_of(&a, "pause_escalation", &id).is_empty()).then_some(a)
    })
    .await;
    let reminders = alerts_of(&alerts, "pause_reminder", &id);
    let numbers: Vec<&Value> = reminders
        .iter()
        .map(|a| &a.body["content"]["reminder"])
        .collect();
    assert_eq!(numbers, vec![&json!(1), &json!(2)], "each reminder once");
    let esc = alerts_of(&alerts, "pause_escalation", &id);
    assert_eq!(esc.len(), 1);
    assert_eq!(esc[0].body["content"]["reminder"], 3);
    assert!(esc[0].subject.ends_with(".critical"));
    assert!(reminders[0].subject.ends_with(".warning"));

    // Dry run: nothing changes.
    let plan = call(&api, "resume", json!({"workflow_id": id, "dry_run": true}))
        .await
        .unwrap();
    assert_eq!(plan["plan"]["skip"], json!(["x", "y", "z"]), "{plan}");
    assert_eq!(plan["plan"]["restart"], json!(["w"]));
    assert_eq!(plan["plan"]["wait"], json!([]));
    assert_eq!(api.status(&ids).await[0]["state"], "paused");

    let r = call(&api, "resume", json!({"workflow_id": id}))
        .await
        .unwrap();
    assert_eq!(r["state"], "running", "{r}");
    api.wait_completed(&ids, Duration::from_secs(30)).await;
    let s = starts(&api).await;
    for k in ["x", "y", "z", "w"] {
        assert_eq!(
            s.get(&format!("{id}/{k}")),
            Some(&1),
            "{k} started once: {s:?}"
        );
    }
    // Pausing a finished workflow is illegal.
    let e = call(&api, "pause", json!({"workflow_id": id}))
        .await
        .unwrap_err();
    assert_eq!(e.code, "illegal_transition");
    assert!(e.message.contains("completed → pausing"), "{}", e.message);
}

/// The seed's example: AAPL, MSFT, GOOGL, AMZN and TSLA fail valuation with
/// a Koyfin quota error (tier 2: each pauses with a checkpoint, and an
/// `agent_failure_event` goes to the correlator); other items carry on. A
/// correlator's `batch_trigger` (sent twice as items join) makes one batch;
/// after the vendor is fixed, resuming the batch completes every workflow
/// without re-running a completed task.
#[tokio::test(flavor = "multi_thread")]
async fn tier2_quota_failures_pause_and_batch_resume_completes_them() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let dir = tempfile::tempdir().unwrap();
    let named = ["AAPL", "MSFT", "GOOGL", "AMZN", "TSLA"];
    std::fs::write(dir.path().join("named"), named.join("\n") + "\n").unwrap();
    std::fs::write(dir.path().join("broken"), "").unwrap();
    let _s = worker(&stack, "screening", 4, "noop", &[]);
    let _v = worker(
        &stack,
        "valuation",
        2,
        &format!("exec:{}", quota_handler(dir.path())),
        &[],
    );
    let _r = worker(&stack, "report", 2, "noop", &[]);
    let api = Api::connect(&stack).await;
    let p = pipeline(
        "mini-stock",
        json!([
            {"name": "screening", "agent": "screening", "expected_duration": 1.0},
            {"name": "valuation", "agent": "valuation", "expected_duration": 1.0,
             "depends_on": ["screening"],
             "retry": {"max_attempts": 3, "backoff_initial_ms": 10, "backoff_max_ms": 10}},
            {"name": "report", "agent": "report", "expected_duration": 1.0, "depends_on": ["valuation"]}
        ]),
    );
    let mut items: Vec<&str> = named.to_vec();
    items.extend(["NVDA", "META"]);
    let ids = api.submit(&items, p, 50).await;
    let by_item: BTreeMap<&str, String> = items.iter().copied().zip(ids.iter().cloned()).collect();

    // The others complete; the named ones pause at tier 2 (no retry).
    api.wait_completed(
        &[by_item["NVDA"].clone(), by_item["META"].clone()],
        Duration::from_secs(30),
    )
    .await;
    for item in named {
        let w = wait_paused(&api, &by_item[item]).await;
        assert_eq!(w["pause"]["tier"], 2, "{w}");
        assert_eq!(w["pause"]["trigger_source"], "tier2_failure");
        assert_eq!(w["pause"]["failed_tasks"], json!(["valuation"]));
        assert_eq!(
            w["tasks"]["valuation"]["attempt"], 1,
            "quota is not retried"
        );
        assert!(w["pause"]["checkpoint_id"].is_string(), "{w}");
    }
    // One failure event per item for the correlator, de-duplicable.
    // Published from the coordinator's outbox after the failures are
    // applied (and retried there if JetStream does not confirm at once).
    let failures = eventually("five failure events", Duration::from_secs(20), || async {
        let f = stream_messages(&api.nats, "CAUCUS_FAILURES", "caucus.failures.valuation").await;
        (f.len() >= 5).then_some(f)
    })
    .await;
    assert_eq!(failures.len(), 5, "{failures:?}");
    for f in &failures {
        assert_eq!(f.body["message_type"], "agent_failure_event");
        assert_eq!(f.body["content"]["error_type"], "quota_exceeded");
        assert_eq!(f.body["content"]["data_source"], "koyfin");
        let task = f.body["content"]["task_id"].as_str().unwrap();
        assert_eq!(
            f.msg_id.as_deref(),
            Some(format!("failure:{task}@1").as_str())
        );
        assert!(named.contains(&f.body["content"]["stock_ticker"].as_str().unwrap()));
    }

    // The correlator's triggers: first three items, then all five.
    let trigger = |ids: &[&str]| {
        json!({"message_type": "batch_trigger", "from_agent": "correlator",
               "content": {"stock_ids": ids, "root_cause": "koyfin API quota exceeded",
                           "correlation_id": "corr-koyfin-1447"}})
    };
    publish_envelope(&api, "caucus.control.batch_trigger", trigger(&named[..3])).await;
    publish_envelope(&api, "caucus.control.batch_trigger", trigger(&named)).await;
    let batch_id = "corr-corr-koyfin-1447";
    let st = eventually(
        "the batch to hold five items",
        Duration::from_secs(20),
        || async {
            let s = call(&api, "batch_status", json!({"batch_id": batch_id}))
                .await
                .ok()?;
            (s["total"] == 5).then_some(s)
        },
    )
    .await;
    assert_eq!(
        (st["paused"].clone(), st["failed"].clone()),
        (json!(5), json!(0)),
        "{st}"
    );
    assert_eq!(st["correlation_id"], "corr-koyfin-1447");
    assert_eq!(st["reason"], "koyfin API quota exceeded");
    assert_eq!(st["state"], "paused");

    // The vendor is fixed; resume all.
    std::fs::remove_file(dir.path().join("broken")).unwrap();
    let r = call(
        &api,
        "batch_resume",
        json!({"batch_id": batch_id, "concurrency_limit": 2}),
    )
    .await
    .unwrap();
    assert_eq!(r["total"], 5, "{r}");
    let named_ids: Vec<String> = named.iter().map(|i| by_item[i].clone()).collect();
    api.wait_completed(&named_ids, Duration::from_secs(60))
        .await;
    let st = eventually("the batch to complete", Duration::from_secs(20), || async {
        let s = call(&api, "batch_status", json!({"batch_id": batch_id}))
            .await
            .ok()?;
        (s["state"] == "completed").then_some(s)
    })
    .await;
    assert_eq!(
        (
            st["resumed"].clone(),
            st["failed"].clone(),
            st["paused"].clone()
        ),
        (json!(5), json!(0), json!(0))
    );
    let s = starts(&api).await;
    for item in named {
        let id = &by_item[item];
        assert_eq!(s.get(&format!("{id}/screening")), Some(&1), "{item}");
        assert_eq!(
            s.get(&format!("{id}/valuation")),
            Some(&2),
            "{item}: failed once, ran once more"
        );
        assert_eq!(s.get(&format!("{id}/report")), Some(&1), "{item}");
    }
}

/// A `batch_trigger` pauses exactly the named items' running workflows
/// (their in-flight tasks finish) while the others complete; resuming the
/// batch runs them to completion, oldest pause first within the capacity
/// of the agent type they need. Bad control messages go to the DLQ.
#[tokio::test(flavor = "multi_thread")]
async fn batch_trigger_pauses_only_named_items_and_bad_commands_dead_letter() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let _a = worker(&stack, "alpha", 7, "sleep:1000", &[]);
    let api = Api::connect(&stack).await;
    let p = pipeline(
        "two",
        json!([
            {"name": "x", "agent": "alpha", "expected_duration": 1.0},
            {"name": "y", "agent": "beta", "expected_duration": 1.0, "depends_on": ["x"]}
        ]),
    );
    let items = ["A1", "B2", "C3", "D4", "E5", "X6", "Y7"];
    let ids = api.submit(&items, p, 50).await;
    let by_item: BTreeMap<&str, String> = items.iter().copied().zip(ids.iter().cloned()).collect();
    eventually("every x to run", Duration::from_secs(20), || async {
        let ws = api.status(&ids).await;
        ws.iter()
            .all(|w| w["tasks"]["x"]["state"] == "running")
            .then_some(())
    })
    .await;
    publish_envelope(
        &api,
        "caucus.control.batch_trigger",
        json!({"message_type": "batch_trigger", "from_agent": "correlator",
               "content": {"stock_ids": ["A1", "B2", "C3"], "root_cause": "feed down",
                           "correlation_id": "c-42"}}),
    )
    .await;
    // Bad commands: not JSON, and resuming a workflow that is not paused.
    let js = jetstream::new(api.nats.clone());
    js.publish("caucus.control.pause_request", "{not json".into())
        .await
        .unwrap()
        .await
        .unwrap();
    publish_envelope(
        &api,
        "caucus.control.resume_command",
        json!({"message_type": "resume_command", "from_agent": "human",
               "content": {"stock_id": "X6"}}),
    )
    .await;
    let _b = worker(&stack, "beta", 1, "sleep:100", &[]);
    for item in ["A1", "B2", "C3"] {
        let w = wait_state(&api, &by_item[item], "paused").await;
        assert_eq!(
            w["tasks"]["x"]["state"], "completed",
            "in-flight x finished: {w}"
        );
        assert_eq!(w["tasks"]["y"]["state"], "ready", "{w}");
        assert_eq!(w["pause"]["batch_id"], "corr-c-42");
    }
    let others: Vec<String> = ["D4", "E5", "X6", "Y7"]
        .iter()
        .map(|i| by_item[i].clone())
        .collect();
    api.wait_completed(&others, Duration::from_secs(30)).await;
    let dlq = eventually("two dead letters", Duration::from_secs(20), || async {
        let d = stream_messages(&api.nats, "CAUCUS_DLQ", "caucus.dlq.>").await;
        (d.len() >= 2).then_some(d)
    })
    .await;
    let codes: BTreeMap<String, String> = dlq
        .iter()
        .map(|d| (d.subject.clone(), d.dlq_code.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        codes["caucus.dlq.caucus.control.pause_request"], "malformed_json",
        "{codes:?}"
    );
    assert_eq!(
        codes["caucus.dlq.caucus.control.resume_command"], "illegal_transition",
        "{codes:?}"
    );

    let st = call(&api, "batch_status", json!({"batch_id": "corr-c-42"}))
        .await
        .unwrap();
    assert_eq!(
        (st["total"].clone(), st["paused"].clone()),
        (json!(3), json!(3)),
        "{st}"
    );
    // The batch resumes the oldest pause first, equal pause times by item
    // (workflow ids are not ordered: a submission derives them by hash).
    let mut expected: Vec<(String, String, String)> = st["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["paused_at"].as_str().unwrap().to_string(),
                i["item"].as_str().unwrap().to_string(),
                i["workflow_id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    expected.sort();
    let e = call(&api, "batch_status", json!({"batch_id": "nope"}))
        .await
        .unwrap_err();
    assert_eq!(e.code, "not_found");

    call(&api, "batch_resume", json!({"batch_id": "corr-c-42"}))
        .await
        .unwrap();
    let paused_ids: Vec<String> = ["A1", "B2", "C3"]
        .iter()
        .map(|i| by_item[i].clone())
        .collect();
    let wfs = api
        .wait_completed(&paused_ids, Duration::from_secs(30))
        .await;
    // beta has one slot: the resumes went one at a time, oldest pause first.
    let mut order: Vec<(String, String)> = wfs
        .iter()
        .map(|w| {
            (
                w["tasks"]["y"]["started_at"].as_str().unwrap().to_string(),
                w["workflow_id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    order.sort();
    let got: Vec<&String> = order.iter().map(|(_, id)| id).collect();
    let want: Vec<&String> = expected.iter().map(|(_, _, id)| id).collect();
    assert_eq!(got, want, "resume order follows the pause order");
    let s = starts(&api).await;
    for id in &ids {
        assert_eq!(s.get(&format!("{id}/x")), Some(&1));
        assert_eq!(s.get(&format!("{id}/y")), Some(&1));
    }
    let st = call(&api, "batch_status", json!({"batch_id": "corr-c-42"}))
        .await
        .unwrap();
    assert_eq!(st["resumed"], 3, "{st}");
}
