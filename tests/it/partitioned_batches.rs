//! Batches with partitioned coordinators (docs/PARTITIONS.md, "Batches")
//! on real processes: two coordinators sharing 4 partitions (2/2) on one
//! NATS server and one Redis. A `batch_pause` over items whose workflows
//! both coordinators own pauses every one; `batch_status` answers the
//! whole batch whichever coordinator is asked; `batch_resume` with a
//! concurrency limit of 2 never has more than 2 of the batch's workflows
//! resumed and unfinished at once, over every partition, and all finish;
//! the batch's running slots are gone from Redis afterwards. Slots a
//! killed coordinator left behind are removed by the partitions' next
//! owner. A correlator's `batch_trigger` and a `batch_pause_request` on
//! the control stream are applied (not dead-lettered) and show in
//! `batch_status`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::{
    call, eventually, peak_concurrency, pipeline, publish_envelope, stream_messages, task_events,
    worker, Api,
};

use crate::common::TwoCoordinators as Two;
use crate::common::RIG_PARTITIONS as PARTITIONS;
/// Items per batch: the chance that one coordinator owns every workflow
/// is 2 × 2⁻¹⁶.
const ITEMS: usize = 16;

impl Two {
    /// The coordinators owning `ids`.
    fn owners(&self, ids: &[String]) -> BTreeSet<&str> {
        ids.iter()
            .map(|w| self.owner[caucus_shared::partition::of(w, PARTITIONS) as usize].as_str())
            .collect()
    }
}

/// `batch_status` of `batch_id`, asked `times` times (the API queue group
/// picks either coordinator): every answer must be the same.
async fn status_everywhere(api: &Api, batch_id: &str, times: usize) -> Value {
    let mut first: Option<Value> = None;
    for _ in 0..times {
        let s = call(api, "batch_status", json!({"batch_id": batch_id}))
            .await
            .unwrap_or_else(|e| panic!("batch_status {batch_id}: {e:?}"));
        match &first {
            None => first = Some(s),
            Some(f) => assert_eq!(&s, f, "two coordinators disagree"),
        }
    }
    first.expect("asked")
}

/// Resumes batch `batch_id` of `ids` with a limit of 2, waits until all
/// completed and checks from the workers' events that never more than 2
/// ran at once (`status` cannot say: it reads the partitions one after
/// another, so under load it can show one partition's workflow still
/// running next to another's that took its freed place); then that the
/// batch completed and its running slots are gone from Redis.
async fn resume_two_at_a_time(two: &Two, batch_id: &str, ids: &[String]) {
    let api = &two.api;
    let r = call(
        api,
        "batch_resume",
        json!({"batch_id": batch_id, "concurrency_limit": 2}),
    )
    .await
    .expect("batch_resume");
    assert_eq!(r["total"], ids.len(), "{r}");
    assert_eq!(r["concurrency_limit"], 2, "{r}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ws = api.status(ids).await;
        if ws.iter().all(|w| w["state"] == "completed") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not all completed: {:?}",
            states(&ws)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ran = peak_concurrency(&task_events(&api.nats).await, "slowb");
    assert!(ran <= 2, "{ran} batch workflows ran at once");
    let st = eventually("the batch completed", Duration::from_secs(20), || async {
        let s = call(api, "batch_status", json!({"batch_id": batch_id}))
            .await
            .ok()?;
        (s["state"] == "completed").then_some(s)
    })
    .await;
    assert_eq!(
        (st["resumed"].clone(), st["failed"].clone()),
        (json!(ids.len()), json!(0)),
        "{st}"
    );
    let key = format!("HLEN caucus:{{batch:{batch_id}}}:running");
    eventually(
        "the running slots released",
        Duration::from_secs(10),
        || async { (two.stack.redis.command(&key).trim() == ":0").then_some(()) },
    )
    .await;
}

/// Submits `ITEMS` items of a one-stage `slowb` pipeline (no worker yet:
/// they wait, nothing in flight) and pauses them as batch `batch_id`.
async fn paused_batch(two: &Two, prefix: &str, batch_id: &str) -> Vec<String> {
    let api = &two.api;
    let p = pipeline("slowp", json!([{"name": "work", "agent": "slowb"}]));
    let items: Vec<String> = (0..ITEMS).map(|i| format!("{prefix}{i}")).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let ids = api.submit(&refs, p, 10).await;
    assert_eq!(
        two.owners(&ids).len(),
        2,
        "every workflow on one coordinator"
    );
    let r = call(
        api,
        "batch_pause",
        json!({"items": items, "batch_id": batch_id, "reason": "vendor down"}),
    )
    .await
    .expect("batch_pause");
    assert_eq!(r["batch_id"], batch_id, "{r}");
    assert_eq!(
        (r["total"].clone(), r["paused"].clone()),
        (json!(ITEMS), json!(ITEMS)),
        "{r}"
    );
    ids
}

fn states(ws: &[Value]) -> Vec<String> {
    ws.iter()
        .map(|w| w["state"].as_str().unwrap_or("?").to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_spans_the_partitions_and_its_limit_is_one_number() {
    let two = Two::start().await;
    let api = &two.api;
    let ids = paused_batch(&two, "BI", "pb-1").await;
    let paused = eventually("all paused", Duration::from_secs(20), || async {
        let ws = api.status(&ids).await;
        ws.iter().all(|w| w["state"] == "paused").then_some(ws)
    })
    .await;
    for w in &paused {
        assert_eq!(w["pause"]["batch_id"], "pb-1", "{w}");
        assert_eq!(w["pause"]["reason"], "vendor down", "{w}");
    }
    let st = status_everywhere(api, "pb-1", 8).await;
    assert_eq!(st["state"], "paused", "{st}");
    let listed: BTreeSet<String> = st["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|i| i["workflow_id"].as_str().expect("a workflow").to_string())
        .collect();
    assert_eq!(listed, ids.iter().cloned().collect(), "{st}");
    let e = call(api, "batch_status", json!({"batch_id": "nope"}))
        .await
        .unwrap_err();
    assert_eq!(e.code, "not_found", "{e:?}");

    // Slots enough for every partition's share to run 2 at once: only
    // the batch's limit can keep the whole batch at 2.
    let _w = worker(&two.stack, "slowb", 8, "sleep:500", &[]);
    resume_two_at_a_time(&two, "pb-1", &ids).await;
    let ran = peak_concurrency(&task_events(&api.nats).await, "slowb");
    assert_eq!(ran, 2, "the limit was used");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_batch_messages_are_applied_across_the_partitions() {
    let two = Two::start().await;
    let api = &two.api;
    let p = pipeline("idlep", json!([{"name": "work", "agent": "idle"}]));
    let items: Vec<String> = (0..ITEMS).map(|i| format!("CB{i}")).collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let ids = api.submit(&refs, p, 10).await;
    assert_eq!(
        two.owners(&ids).len(),
        2,
        "every workflow on one coordinator"
    );

    // The correlator names 5 items, then all of them (one batch per
    // correlation); an unknown item fails in the batch, as with one
    // partition.
    let trigger = |named: &[String]| {
        json!({"message_type": "batch_trigger", "from_agent": "correlator",
               "content": {"stock_ids": named, "root_cause": "koyfin API quota exceeded",
                           "correlation_id": "c-part"}})
    };
    publish_envelope(api, "caucus.control.batch_trigger", trigger(&items[..5])).await;
    let mut all = items.clone();
    all.push("NOPE".into());
    publish_envelope(api, "caucus.control.batch_trigger", trigger(&all)).await;
    let st = eventually(
        "the batch to hold every item",
        Duration::from_secs(30),
        || async {
            let s = call(api, "batch_status", json!({"batch_id": "corr-c-part"}))
                .await
                .ok()?;
            (s["total"] == ITEMS + 1).then_some(s)
        },
    )
    .await;
    assert_eq!(
        (st["paused"].clone(), st["failed"].clone()),
        (json!(ITEMS), json!(1)),
        "{st}"
    );
    assert_eq!(st["correlation_id"], "c-part", "{st}");
    assert_eq!(st["reason"], "koyfin API quota exceeded", "{st}");
    let ws = api.status(&ids).await;
    for w in &ws {
        assert_eq!(w["state"], "paused", "{w}");
        assert_eq!(w["pause"]["batch_id"], "corr-c-part", "{w}");
        assert_eq!(w["pause"]["trigger_source"], "correlator", "{w}");
    }
    assert_eq!(status_everywhere(api, "corr-c-part", 6).await, st);

    // The first item gets a new workflow in another partition, and a new
    // item joins: a trigger naming both adds only the new item (an item
    // is in a batch once, as with one partition; its new workflow runs).
    let p = pipeline("idlep", json!([{"name": "work", "agent": "idle"}]));
    let part = |w: &str| caucus_shared::partition::of(w, PARTITIONS);
    let mut newer = None;
    for _ in 0..40 {
        let id = api
            .submit(&[items[0].as_str()], p.clone(), 10)
            .await
            .remove(0);
        if part(&id) != part(&ids[0]) {
            newer = Some(id);
            break;
        }
    }
    let newer = newer.expect("a workflow in another partition");
    let joined = api.submit(&["CBN"], p, 10).await.remove(0);
    publish_envelope(
        api,
        "caucus.control.batch_trigger",
        trigger(&[items[0].clone(), "CBN".to_string()]),
    )
    .await;
    // Polled by hand so that a timeout shows what the batch and the two
    // workflows looked like (it showed the batch stopped: partition 0,
    // holding none of the 16, judged the unknown item's failure alone).
    let deadline = Instant::now() + Duration::from_secs(30);
    let st = loop {
        let s = call(api, "batch_status", json!({"batch_id": "corr-c-part"})).await;
        match s {
            Ok(s) if s["total"] != ITEMS + 1 => break s,
            s if Instant::now() > deadline => panic!(
                "the new item did not join: batch {s:?}; workflows {:?}",
                api.status(&[newer.clone(), joined.clone()]).await
            ),
            _ => tokio::time::sleep(Duration::from_millis(30)).await,
        }
    };
    assert_eq!(st["total"], ITEMS + 2, "{st}");
    let first: Vec<&Value> = st["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter(|i| i["item"] == items[0].as_str())
        .collect();
    assert_eq!(first.len(), 1, "{st}");
    assert_eq!(first[0]["workflow_id"], ids[0].as_str(), "{st}");
    let state = |id: &String| {
        let ids = vec![id.clone()];
        async move { api.status(&ids).await.remove(0)["state"].clone() }
    };
    assert_eq!(state(&newer).await, "pending", "not paused: {newer}");
    assert_eq!(state(&joined).await, "paused", "{joined}");

    // A person's batch pause request by message, into a new batch: the
    // items are paused already, and linked to it.
    publish_envelope(
        api,
        "caucus.control.batch_pause_request",
        json!({"message_type": "batch_pause_request", "from_agent": "ops",
               "content": {"stock_ids": &items[..4], "reason": "ops hold",
                           "batch_id": "ops-1", "max_concurrency": 2}}),
    )
    .await;
    let st = eventually("the ops batch", Duration::from_secs(30), || async {
        let s = call(api, "batch_status", json!({"batch_id": "ops-1"}))
            .await
            .ok()?;
        (s["total"] == 4).then_some(s)
    })
    .await;
    assert_eq!(st["paused"], 4, "{st}");
    let dlq = stream_messages(&api.nats, "CAUCUS_DLQ", "caucus.dlq.>").await;
    let dead: Vec<(&str, Option<&str>)> = dlq
        .iter()
        .map(|d| (d.subject.as_str(), d.dlq_code.as_deref()))
        .collect();
    assert!(dead.is_empty(), "dead-lettered: {dead:?}");
}

/// A coordinator killed while its partitions held slots of a batch
/// (here: stale slots, as a kill between a change and its release would
/// leave, enough to fill the limit): the survivor, taking its partitions
/// over, removes them, and the batch runs within its limit to the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_owner_removes_the_slots_a_killed_coordinator_left() {
    let mut two = Two::start().await;
    let ids = paused_batch(&two, "KI", "pb-kill").await;
    let victim = two.ids[0].clone();
    // A slot names a partition holding a part of the batch: ghosts go
    // only where the victim holds items (ids are random, and a partition
    // with none has no part whose load would clear them).
    let theirs: Vec<usize> = (0..PARTITIONS as usize)
        .filter(|p| two.owner[*p] == victim)
        .filter(|p| {
            ids.iter()
                .any(|w| caucus_shared::partition::of(w, PARTITIONS) as usize == *p)
        })
        .collect();
    assert!(!theirs.is_empty(), "the victim holds no item of the batch");
    for p in &theirs {
        let r = two.stack.redis.command(&format!(
            "HSET caucus:{{batch:pb-kill}}:running ghost-{p} {p}"
        ));
        assert_eq!(r.trim(), ":1", "{r}");
    }
    two.c[0].kill();
    let survivor = two.ids[1].clone();
    eventually(
        "the survivor holds every partition",
        Duration::from_secs(30),
        || async {
            let v = call(&two.api, "partitions", json!({})).await.ok()?;
            (0..PARTITIONS)
                .all(|p| v["partitions"][p.to_string()]["owner"] == survivor.as_str())
                .then_some(())
        },
    )
    .await;
    let _w = worker(&two.stack, "slowb", 8, "sleep:200", &[]);
    resume_two_at_a_time(&two, "pb-kill", &ids).await;
}
