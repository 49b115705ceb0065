//! Fenced leadership on real processes: a coordinator frozen past its
//! lease is replaced, and when it wakes it writes nothing, acknowledges
//! nothing it did not store, and every workflow still completes with each
//! task completed exactly once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::common::{coordinator, pipeline, task_events, wait_leading, worker, Api};
use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy};
use caucus_harness::Stack;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde_json::{json, Value};

/// One stored revision of a workflow record.
struct Revision {
    workflow_id: String,
    epoch: u64,
    published: DateTime<Utc>,
}

/// Every revision ever written to the workflows bucket, with the server's
/// timestamp of the write.
async fn record_history(nats: &async_nats::Client) -> Vec<Revision> {
    let js = jetstream::new(nats.clone());
    let stream = js
        .get_stream("KV_caucus_workflows")
        .await
        .expect("workflows bucket");
    let mut consumer = stream
        .create_consumer(pull::Config {
            ack_policy: AckPolicy::None,
            ..Default::default()
        })
        .await
        .expect("consumer");
    let total = consumer.info().await.expect("info").num_pending as usize;
    let mut out = Vec::with_capacity(total);
    let mut msgs = consumer.messages().await.expect("messages");
    while out.len() < total {
        let m = msgs.next().await.expect("message").expect("ok");
        let published = m.info().expect("info").published;
        let published =
            DateTime::<Utc>::from_timestamp_nanos(published.unix_timestamp_nanos() as i64);
        let Ok(body) = serde_json::from_slice::<Value>(&m.payload) else {
            continue;
        };
        out.push(Revision {
            workflow_id: body["workflow_id"].as_str().unwrap_or_default().to_string(),
            epoch: body["epoch"].as_u64().unwrap_or(0),
            published,
        });
    }
    out
}

/// A leader SIGSTOPed for over twice its lease (2 s here) is replaced by
/// the standby; after SIGCONT it writes no record, every workflow
/// completes, and every task's completion is recorded once.
#[tokio::test(flavor = "multi_thread")]
async fn paused_leader_writes_nothing_after_it_wakes() {
    let stack = Stack::start();
    let c1 = coordinator(&stack, &[]);
    let first_epoch = wait_leading(&c1, Duration::from_secs(20)).epoch;
    let c2 = coordinator(&stack, &[]);
    let _a = worker(&stack, "alpha", 3, "sleep:80", &[]);
    let _b = worker(&stack, "beta", 3, "sleep:80", &[]);
    let api = Api::connect(&stack).await;
    let p = pipeline(
        "two",
        json!([
            {"name": "x", "agent": "alpha", "expected_duration": 1.0},
            {"name": "y", "agent": "beta", "expected_duration": 1.0, "depends_on": ["x"]}
        ]),
    );
    let items: Vec<String> = (0..40).map(|i| format!("F{i}")).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let ids = api.submit(&refs, p, 10).await;
    // Freeze the leader while the batch is running.
    api.wait_some_completed(&ids, 3, Duration::from_secs(20))
        .await;
    c1.pause();
    let second_epoch = wait_leading(&c2, Duration::from_secs(15)).epoch;
    assert!(
        second_epoch > first_epoch,
        "the new tenure's epoch {second_epoch} must be above {first_epoch}"
    );
    // Well past twice the lease in all, so the frozen leader's lease has
    // run out by its own clock too.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let woke = Utc::now();
    c1.resume();
    let wfs = api.wait_completed(&ids, Duration::from_secs(60)).await;
    assert_eq!(wfs.len(), 40);

    // The woken leader has seen that it lost and stands by.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !c1.output().contains("standing by") {
        assert!(
            Instant::now() < deadline,
            "the old leader never stood down:\n{}",
            c1.output()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let stale: Vec<String> = record_history(&api.nats)
        .await
        .into_iter()
        .filter(|r| r.epoch < second_epoch && r.published > woke)
        .map(|r| format!("{} (epoch {}, at {})", r.workflow_id, r.epoch, r.published))
        .collect();
    assert!(
        stale.is_empty(),
        "the deposed leader wrote after it woke: {stale:?}"
    );

    // Each task's recorded completion is the one completion of the
    // attempt it names (a task whose events the frozen leader held past
    // the silence limit may have run twice: at least once, never applied
    // twice).
    let mut completions: HashMap<(String, u64), usize> = HashMap::new();
    for e in task_events(&api.nats)
        .await
        .iter()
        .filter(|e| e["status"] == "completed")
    {
        *completions
            .entry((
                e["task_id"].as_str().unwrap().to_string(),
                e["attempt"].as_u64().unwrap(),
            ))
            .or_default() += 1;
    }
    let mut reruns = 0;
    for w in &wfs {
        for k in ["x", "y"] {
            let t = &w["tasks"][k];
            assert_eq!(t["state"], "completed", "{w}");
            let id = format!("{}/{k}", w["workflow_id"].as_str().unwrap());
            let attempt = t["attempt"].as_u64().unwrap();
            assert_eq!(completions.get(&(id.clone(), attempt)), Some(&1), "{id}");
            reruns += attempt - 1;
        }
    }
    assert!(reruns <= 4, "{reruns} tasks ran again after the takeover");
}
