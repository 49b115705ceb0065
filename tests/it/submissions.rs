//! Submissions that can be retried, and large ones, on real servers and a
//! real coordinator: a retry with the same idempotency key returns the same
//! workflows and creates nothing; a coordinator killed half-way through a
//! submission and a retry converge on exactly the submitted workflows; a
//! 20,000-item submit answers within NATS's max_payload and every id can
//! be paged.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::common::{caucus, coordinator, pipeline, worker, Api};
use async_nats::jetstream;
use caucus_harness::Stack;
use caucus_shared::subjects::Subjects;
use futures::StreamExt;
use serde_json::{json, Value};

/// Every key of a KV bucket.
async fn kv_keys(nats: &async_nats::Client, bucket: &str) -> HashSet<String> {
    let js = jetstream::new(nats.clone());
    let Ok(kv) = js.get_key_value(bucket).await else {
        return HashSet::new();
    };
    let mut keys = kv.keys().await.expect("keys");
    let mut out = HashSet::new();
    while let Some(k) = keys.next().await {
        out.insert(k.expect("key"));
    }
    out
}

/// A stored submission record, read straight from KV.
async fn stored_submission(nats: &async_nats::Client, id: &str) -> Option<Value> {
    let js = jetstream::new(nats.clone());
    let kv = js.get_key_value("caucus_submissions").await.ok()?;
    let v = kv.get(id).await.ok()??;
    serde_json::from_slice(&v).ok()
}

fn one_stage() -> Value {
    pipeline(
        "one",
        json!([{"name": "x", "agent": "alpha", "expected_duration": 1.0}]),
    )
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|s| s.as_str().expect("string").to_string())
        .collect()
}

/// Every workflow id of a submission, page by page.
async fn all_ids(api: &Api, submission_id: &str, limit: usize) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor = Some(0u64);
    while let Some(c) = cursor {
        let page = api
            .call(
                "coordinator",
                "submission",
                json!({"submission_id": submission_id, "cursor": c, "limit": limit}),
            )
            .await
            .expect("submission page");
        assert_eq!(page["cursor"], c);
        let got = strings(&page["workflow_ids"]);
        assert!(got.len() <= limit);
        ids.extend(got);
        cursor = page["next_cursor"].as_u64();
    }
    ids
}

/// The same key twice: the same workflow ids, nothing created the second
/// time (the records in KV are the same ones), the same through the CLI;
/// the key reused for another request is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_retried_submit_with_the_same_key_creates_nothing() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let _w = worker(&stack, "alpha", 4, "noop", &[]);
    let api = Api::connect(&stack).await;
    let items: Vec<String> = (0..30).map(|i| format!("R{i}")).collect();
    let body = json!({"items": items, "pipeline": one_stage(), "time_unit_ms": 10,
                      "idempotency_key": "nightly-2026-11-25"});
    let first = api
        .call("coordinator", "submit", body.clone())
        .await
        .expect("submit");
    let ids = strings(&first["workflow_ids"]);
    assert_eq!(ids.len(), 30);
    assert_eq!(first["count"], 30);
    assert_eq!(first["created"], 30);
    assert_eq!(first["replayed"], false);
    assert_eq!(first["state"], "complete");
    assert_eq!(first["next_cursor"], Value::Null);
    assert_eq!(first["idempotency_key"], "nightly-2026-11-25");
    assert_eq!(first["workflows"][3]["item"], "R3");
    assert_eq!(first["workflows"][3]["workflow_id"], ids[3]);
    api.wait_completed(&ids, Duration::from_secs(30)).await;
    let stored = kv_keys(&api.nats, "caucus_workflows").await;
    assert_eq!(stored, ids.iter().cloned().collect::<HashSet<_>>());

    // The retry: same ids, nothing created, nothing run again.
    let again = api
        .call("coordinator", "submit", body.clone())
        .await
        .expect("retry");
    assert_eq!(strings(&again["workflow_ids"]), ids);
    assert_eq!(again["submission_id"], first["submission_id"]);
    assert_eq!(again["created"], 0);
    assert_eq!(again["replayed"], true);
    assert_eq!(kv_keys(&api.nats, "caucus_workflows").await, stored);
    let wfs = api.status(&ids).await;
    assert!(wfs
        .iter()
        .all(|w| w["state"] == "completed" && w["tasks"]["x"]["attempt"] == 1));

    // The submission, by key, from the `submission` operation.
    let page = api
        .call(
            "coordinator",
            "submission",
            json!({"idempotency_key": "nightly-2026-11-25"}),
        )
        .await
        .expect("submission");
    assert_eq!(strings(&page["workflow_ids"]), ids);
    assert_eq!(page["state"], "complete");
    assert_eq!(page["stored"], 30);

    // The same key for another request is refused, and creates nothing.
    let mut other = body.clone();
    other["items"] = json!(["R0", "R1"]);
    let e = api
        .call("coordinator", "submit", other)
        .await
        .expect_err("key reused for another request");
    assert_eq!(e.code, "idempotency_conflict", "{e:?}");
    assert_eq!(kv_keys(&api.nats, "caucus_workflows").await, stored);

    // The CLI: twice with one key, the same ids; the second run says so.
    let p = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
    std::fs::write(p.path(), one_stage().to_string()).unwrap();
    let file = p.path().to_str().unwrap();
    let args = [
        "--json",
        "submit",
        "C1",
        "C2",
        "--file",
        file,
        "--idempotency-key",
        "cli-key",
    ];
    let (code, out1, err) = caucus(&stack, &args);
    assert_eq!(code, 0, "{out1}{err}");
    let (code, out2, err) = caucus(&stack, &args);
    assert_eq!(code, 0, "{out2}{err}");
    let (r1, r2): (Value, Value) = (
        serde_json::from_str(&out1).unwrap(),
        serde_json::from_str(&out2).unwrap(),
    );
    assert_eq!(r1["workflow_ids"], r2["workflow_ids"]);
    assert_eq!(r2["replayed"], true);
    let (code, text, _) = caucus(
        &stack,
        &[
            "submit",
            "C1",
            "C2",
            "--file",
            file,
            "--idempotency-key",
            "cli-key",
        ],
    );
    assert_eq!(code, 0);
    assert!(
        text.contains("already submitted (nothing new created): 2 workflow(s)"),
        "{text}"
    );
    let (code, text, _) = caucus(&stack, &["submission", "--key", "cli-key"]);
    assert_eq!(code, 0);
    for id in r1["workflow_ids"].as_array().unwrap() {
        assert!(text.contains(id.as_str().unwrap()), "{text}");
    }
    assert_eq!(
        kv_keys(&api.nats, "caucus_workflows").await.len(),
        stored.len() + 2
    );
}

/// A coordinator SIGKILLed half-way through a keyed submission, then the
/// client's retry on its successor: the submission ends with exactly the
/// submitted workflows (records created before the crash kept, the rest
/// created, none twice), and every one of them runs once.
#[tokio::test(flavor = "multi_thread")]
async fn a_submission_cut_short_by_a_crash_is_finished_by_the_retry() {
    const N: usize = 10_000;
    let stack = Stack::start();
    let chunk = [("CAUCUS_COORDINATOR_SUBMIT_CHUNK", "50")];
    let mut first = coordinator(&stack, &chunk);
    let api = Api::connect(&stack).await;
    let items: Vec<String> = (0..N).map(|i| format!("K{i}")).collect();
    let body = json!({"items": items, "pipeline": one_stage(), "time_unit_ms": 10,
                      "idempotency_key": "crash-me"});
    let submission_id = {
        // Derived from the key alone: the retry finds it again.
        let r = api
            .call(
                "coordinator",
                "submission",
                json!({"idempotency_key": "crash-me"}),
            )
            .await
            .expect_err("not submitted yet");
        assert_eq!(r.code, "not_found");
        let m = r.message;
        m.split_whitespace()
            .nth(2)
            .expect("the id in the message")
            .to_string()
    };
    // The raw request below does not retry `standby`: wait for a leader.
    api.call("coordinator", "status", json!({"ids": ["-"]}))
        .await
        .expect("a leader");
    let nats = api.nats.clone();
    let sent = body.clone();
    let lost = tokio::spawn(async move {
        let subjects = Subjects::default();
        caucus_shared::nats::api_request(
            &nats,
            &subjects,
            "coordinator",
            "submit",
            &sent,
            Duration::from_secs(20),
        )
        .await
    });
    // Kill it once part of the submission is stored.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let stored = stored_submission(&api.nats, &submission_id)
            .await
            .and_then(|s| s["created"].as_u64())
            .unwrap_or(0);
        if stored >= 500 {
            break;
        }
        assert!(Instant::now() < deadline, "the submission never progressed");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    first.kill();
    let at_crash = stored_submission(&api.nats, &submission_id)
        .await
        .expect("submission record");
    assert_eq!(at_crash["state"], "creating", "{at_crash}");
    let progress = at_crash["created"].as_u64().unwrap() as usize;
    assert!(progress < N, "killed after the end: {at_crash}");
    let before = kv_keys(&api.nats, "caucus_workflows").await;
    assert!(before.len() >= progress && before.len() < N);
    // Its client never hears back (it would time out and retry).
    lost.abort();

    // The successor, and the client's retry with the same key.
    let _second = coordinator(&stack, &chunk);
    let _w = worker(&stack, "alpha", 16, "noop", &[]);
    let r = api
        .call("coordinator", "submit", body.clone())
        .await
        .expect("retry");
    assert_eq!(r["submission_id"], submission_id.as_str());
    assert_eq!(r["count"], N);
    assert_eq!(r["state"], "complete");
    assert_eq!(r["replayed"], false);
    let created = r["created"].as_u64().unwrap() as usize;
    let existing = r["existing"].as_u64().unwrap() as usize;
    // The retry starts at the stored progress; anything created past it
    // before the crash is found and kept, not created again.
    assert_eq!(created + existing, N - progress, "{r}");
    assert_eq!(created, N - before.len(), "{r}");
    let ids = all_ids(&api, &submission_id, 5_000).await;
    assert_eq!(ids.len(), N);
    // A KV key listing runs over the stream while the running workflows'
    // records are rewritten, and a key rewritten during the listing can be
    // missed by it: list until one listing shows every id (it must, within
    // the deadline, or a record is really missing).
    let expected: HashSet<String> = ids.iter().cloned().collect();
    let list_deadline = Instant::now() + Duration::from_secs(30);
    let after = loop {
        let keys = kv_keys(&api.nats, "caucus_workflows").await;
        if keys == expected || Instant::now() > list_deadline {
            break keys;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(after, expected);
    assert!(before.is_subset(&after));

    // Every workflow runs, exactly once.
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut pending: Vec<String> = ids.clone();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for batch in pending.chunks(1_000) {
            let r = api
                .call("coordinator", "status", json!({"ids": batch}))
                .await
                .expect("status");
            let wfs = r["workflows"].as_array().unwrap();
            assert_eq!(wfs.len(), batch.len(), "every workflow is held");
            for w in wfs {
                assert_ne!(w["state"], "failed", "{w}");
                if w["state"] != "completed" {
                    still.push(w["workflow_id"].as_str().unwrap().to_string());
                }
            }
        }
        pending = still;
        assert!(
            Instant::now() < deadline,
            "{} workflows never completed",
            pending.len()
        );
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let starts = crate::common::starts(&api).await;
    assert_eq!(starts.len(), N);
    assert!(starts.values().all(|n| *n == 1), "a task started twice");
}

/// 20,000 items in one submit: the reply is a summary well within NATS's
/// max_payload (1 MiB) with the first 1,000 ids, and every id can be paged;
/// the pages are exactly the stored workflows.
#[tokio::test(flavor = "multi_thread")]
async fn a_large_submit_answers_within_max_payload_and_every_id_pages() {
    const N: usize = 20_000;
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let api = Api::connect(&stack).await;
    // No worker: the workflows wait, nothing else loads the box.
    let items: Vec<String> = (0..N).map(|i| format!("L{i:05}")).collect();
    let body = json!({"items": items, "pipeline": one_stage(), "time_unit_ms": 10});
    // Through a raw request, to see the reply's size on the wire.
    let payload = serde_json::to_vec(&body).unwrap();
    let t0 = Instant::now();
    let msg = loop {
        let m = api
            .nats
            .send_request(
                "caucus.api.coordinator.submit",
                async_nats::Request::new()
                    .payload(payload.clone().into())
                    .timeout(Some(Duration::from_secs(50))),
            )
            .await
            .expect("submit reply");
        let v: Value = serde_json::from_slice(&m.payload).unwrap();
        if v["error"]["code"] == "standby" {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        break m;
    };
    let took = t0.elapsed();
    let max_payload = api.nats.server_info().max_payload;
    assert!(
        msg.payload.len() < max_payload,
        "{} bytes >= {max_payload}",
        msg.payload.len()
    );
    let r: Value = serde_json::from_slice(&msg.payload).unwrap();
    assert!(r.get("error").is_none(), "{r}");
    eprintln!(
        "20,000-item submit answered in {took:?}, {} bytes",
        msg.payload.len()
    );
    assert_eq!(r["count"], N);
    assert_eq!(r["created"], N);
    assert_eq!(r["state"], "complete");
    let first = strings(&r["workflow_ids"]);
    assert_eq!(first.len(), 1_000);
    assert_eq!(r["workflows"].as_array().unwrap().len(), 1_000);
    assert_eq!(r["workflows"][999]["item"], "L00999");
    assert_eq!(r["next_cursor"], 1_000);
    let sub = r["submission_id"].as_str().unwrap().to_string();

    let ids = all_ids(&api, &sub, 3_000).await;
    assert_eq!(ids.len(), N);
    assert_eq!(&ids[..1_000], &first[..]);
    let distinct: HashSet<String> = ids.iter().cloned().collect();
    assert_eq!(distinct.len(), N);
    assert_eq!(kv_keys(&api.nats, "caucus_workflows").await, distinct);
    // The coordinator holds them: the last page's workflows, by status.
    let tail = &ids[N - 500..];
    let st = api
        .call("coordinator", "status", json!({"ids": tail}))
        .await
        .expect("status");
    let wfs = st["workflows"].as_array().unwrap();
    assert_eq!(wfs.len(), 500);
    assert_eq!(wfs[499]["item"], format!("L{:05}", N - 1));
    // Paging edges.
    let e = api
        .call(
            "coordinator",
            "submission",
            json!({"submission_id": sub, "limit": 10_001}),
        )
        .await
        .expect_err("page too large");
    assert_eq!(e.code, "bad_request");
    let end = api
        .call(
            "coordinator",
            "submission",
            json!({"submission_id": sub, "cursor": N}),
        )
        .await
        .expect("empty last page");
    assert_eq!(end["workflow_ids"], json!([]));
    assert_eq!(end["next_cursor"], Value::Null);
}
