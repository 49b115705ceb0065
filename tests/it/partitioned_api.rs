//! What partitioned coordinators serve across partitions (docs/PARTITIONS.md)
//! on real processes: two coordinators sharing 4 partitions (2/2) on one
//! NATS server and one Redis. `pause` / `resume` by item reach the item's
//! latest workflow whichever coordinator is asked and whichever owns it;
//! `gates` without a workflow lists the open gates of both coordinators'
//! partitions, paged as with one; a pause request and a resume command by
//! item on the control stream (read by partition 0's owner only) are
//! carried out by the owner of the item's latest workflow (batches:
//! `partitioned_batches.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use caucus_harness::{Service, Stack};
use serde_json::{json, Value};

use crate::common::{
    call, coordinator, eventually, pipeline, publish_envelope, wait_paused, worker, Api,
};

use crate::common::TwoCoordinators as Two;
use crate::common::RIG_PARTITIONS as PARTITIONS;
/// Items submitted twice: each has an older and a latest workflow. With
/// 16 the chance that no item's two workflows have different owners is
/// 2⁻¹⁶.
const ITEMS: usize = 16;

impl Two {
    /// The coordinator that owns `workflow_id`.
    fn owner_of(&self, workflow_id: &str) -> &str {
        &self.owner[caucus_shared::partition::of(workflow_id, PARTITIONS) as usize]
    }

    /// Submits every item twice, one submission after the other (nobody
    /// runs `idle`: they stay pending): item → (older, latest).
    async fn twice(&self, items: &[String]) -> BTreeMap<String, (String, String)> {
        let p = pipeline("idlep", json!([{"name": "work", "agent": "idle"}]));
        let refs: Vec<&str> = items.iter().map(String::as_str).collect();
        let older = self.api.submit(&refs, p.clone(), 10).await;
        let latest = self.api.submit(&refs, p, 10).await;
        let created = |w: &Value| {
            w["created_at"]
                .as_str()
                .and_then(|s| s.parse::<chrono::DateTime<chrono::Utc>>().ok())
                .expect("created_at")
        };
        let (o, l) = (
            self.api.status(&older).await,
            self.api.status(&latest).await,
        );
        for (o, l) in o.iter().zip(&l) {
            assert!(
                created(o) < created(l),
                "the second submission is the later: {o} {l}"
            );
        }
        items
            .iter()
            .cloned()
            .zip(older.into_iter().zip(latest))
            .collect()
    }

    async fn state(&self, id: &str) -> Value {
        self.api
            .status(&[id.to_string()])
            .await
            .pop()
            .expect("known")
    }
}

/// Waits until `id` runs again (a resume took it out of `paused`).
async fn wait_running(api: &Api, id: &str) {
    let ids = vec![id.to_string()];
    eventually(&format!("{id} to run"), Duration::from_secs(30), || async {
        let w = api.status(&ids).await.pop()?;
        (w["state"] == "running").then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_by_item_and_the_gates_list_span_the_partitions() {
    let two = Two::start().await;
    let api = &two.api;
    let items: Vec<String> = (0..ITEMS).map(|i| format!("PI{i}")).collect();
    let wfs = two.twice(&items).await;
    // The routing is exercised only if both coordinators own latest
    // workflows and some item's two workflows have different owners.
    let owners: BTreeSet<&str> = wfs.values().map(|(_, l)| two.owner_of(l)).collect();
    assert_eq!(owners.len(), 2, "every latest workflow on one coordinator");
    assert!(
        wfs.values()
            .any(|(o, l)| two.owner_of(o) != two.owner_of(l)),
        "no item's workflows are on different coordinators"
    );

    // Two rounds over every item: 64 calls, each answered by either
    // coordinator (the API queue group picks), owned by either.
    for round in 0..2 {
        for (item, (_, latest)) in &wfs {
            let r = call(
                api,
                "pause",
                json!({"item": item, "reason": format!("round {round}")}),
            )
            .await
            .unwrap_or_else(|e| panic!("pause {item}: {e:?}"));
            assert_eq!(r["workflow_id"], latest.as_str(), "{item}: {r}");
            assert_eq!(r["outcome"], "paused", "nothing in flight: {r}");
            let w = wait_paused(api, latest).await;
            assert_eq!(w["pause"]["reason"], format!("round {round}"), "{w}");
            let r = call(api, "resume", json!({"item": item}))
                .await
                .unwrap_or_else(|e| panic!("resume {item}: {e:?}"));
            assert_eq!(r["workflow_id"], latest.as_str(), "{item}: {r}");
            assert_eq!(r["dry_run"], false, "{r}");
            wait_running(api, latest).await;
        }
    }
    for (item, (older, _)) in &wfs {
        let w = two.state(older).await;
        assert_eq!(w["state"], "pending", "{item}'s older workflow: {w}");
        assert!(w["pause"].is_null(), "never paused: {w}");
    }
    let e = call(api, "pause", json!({"item": "NOPE"}))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code.as_str(), e.message.as_str()),
        ("not_found", "no workflow for item `NOPE`")
    );
    let e = call(api, "resume", json!({})).await.unwrap_err();
    assert_eq!(e.code, "bad_request", "{e:?}");

    // Gates: 8 workflows stopped at `signoff`, in every partition.
    let _w = worker(&two.stack, "quick", 4, "noop", &[]);
    let gated = json!({
        "name": "gated",
        "capacities": {"quick": 4},
        "stages": [
            {"name": "work", "agent": "quick"},
            {"name": "signoff", "kind": "gate", "depends_on": ["work"]},
            {"name": "after", "agent": "quick", "depends_on": ["signoff"]}
        ]
    });
    let gitems: Vec<String> = (0..8).map(|i| format!("G{i}")).collect();
    let r = call(
        api,
        "submit",
        json!({"items": gitems, "pipeline": gated, "time_unit_ms": 10}),
    )
    .await
    .expect("submit");
    let gwfs: BTreeSet<String> = r["workflow_ids"]
        .as_array()
        .expect("ids")
        .iter()
        .map(|v| v.as_str().expect("an id").to_string())
        .collect();
    let gate_owners: BTreeSet<&str> = gwfs.iter().map(|w| two.owner_of(w)).collect();
    assert_eq!(
        gate_owners.len(),
        2,
        "all 8 gated workflows on one coordinator"
    );
    let all = eventually("8 open gates", Duration::from_secs(30), || async {
        let v = call(api, "gates", json!({})).await.ok()?;
        (v["count"] == 8).then_some(v)
    })
    .await;
    let listed = |v: &Value| -> Vec<(String, String)> {
        v["gates"]
            .as_array()
            .expect("gates")
            .iter()
            .map(|g| {
                (
                    g["opened_at"].as_str().expect("opened_at").to_string(),
                    g["workflow_id"].as_str().expect("workflow_id").to_string(),
                )
            })
            .collect()
    };
    let full = listed(&all);
    let ids: BTreeSet<String> = full.iter().map(|(_, w)| w.clone()).collect();
    assert_eq!(ids, gwfs, "{all}");
    let mut sorted = full.clone();
    sorted.sort_by(|a, b| {
        let at = |s: &str| s.parse::<chrono::DateTime<chrono::Utc>>().expect("a time");
        (at(&a.0), &a.1).cmp(&(at(&b.0), &b.1))
    });
    assert_eq!(full, sorted, "oldest first, as with one partition");
    assert!(all["next_cursor"].is_null(), "{all}");
    // Pages of 3 (each asked of either coordinator) make up the list.
    for _ in 0..3 {
        let mut pages = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut req = json!({"limit": 3});
            if let Some(c) = &cursor {
                req["cursor"] = json!(c);
            }
            let v = call(api, "gates", req).await.expect("a page");
            assert_eq!(v["count"], 8, "{v}");
            pages.extend(listed(&v));
            match v["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
        }
        assert_eq!(pages, full);
    }
    for item in &gitems {
        let v = call(api, "gates", json!({"item": item}))
            .await
            .expect("by item");
        assert_eq!(v["count"], 1, "{item}: {v}");
        assert_eq!(v["gates"][0]["item"], item.as_str(), "{v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_messages_by_item_reach_the_owner_of_the_latest_workflow() {
    let two = Two::start().await;
    let api = &two.api;
    let items: Vec<String> = (0..ITEMS).map(|i| format!("CI{i}")).collect();
    let wfs = two.twice(&items).await;
    // Partition 0's owner reads the control stream: an item whose latest
    // workflow the other coordinator owns (and, if there is one, whose
    // older one partition 0's owner does) is carried out over NATS.
    let reader = two.owner[0].as_str();
    let remote: Vec<(&String, &(String, String))> = wfs
        .iter()
        .filter(|(_, (_, l))| two.owner_of(l) != reader)
        .collect();
    let (item, (older, latest)) = remote
        .iter()
        .find(|(_, (o, _))| two.owner_of(o) == reader)
        .or(remote.first())
        .copied()
        .expect("a latest workflow on the other coordinator");
    assert_ne!(two.owner_of(latest), reader);

    publish_envelope(
        api,
        "caucus.control.pause_request",
        json!({"message_type": "pause_request", "from_agent": "ops",
               "content": {"stock_id": item, "reason": "feed outage",
                           "trigger_source": "ops-desk"}}),
    )
    .await;
    let w = wait_paused(api, latest).await;
    assert_eq!(w["pause"]["reason"], "feed outage", "{w}");
    assert_eq!(w["pause"]["trigger_source"], "ops-desk", "{w}");
    publish_envelope(
        api,
        "caucus.control.resume_command",
        json!({"message_type": "resume_command", "from_agent": "human",
               "content": {"stock_id": item}}),
    )
    .await;
    wait_running(api, latest).await;
    let w = two.state(older).await;
    assert!(
        w["pause"].is_null(),
        "the older workflow was not paused: {w}"
    );
}

/// Each partition's epochs as `coordinator.partitions` reports them, once
/// every partition has an owner.
async fn epochs(api: &Api) -> Vec<u64> {
    eventually("every partition held", Duration::from_secs(30), || async {
        let v = call(api, "partitions", json!({})).await.ok()?;
        (0..PARTITIONS)
            .map(|p| {
                let e = &v["partitions"][p.to_string()];
                e["owner"].as_str()?;
                e["epoch"].as_u64()
            })
            .collect::<Option<Vec<u64>>>()
    })
    .await
}

fn stop(c: &mut Service) {
    c.sigterm();
    c.wait_exit(Duration::from_secs(30));
}

/// Redis loses its data (and with it every partition lock's epoch counter)
/// while no workflow is unfinished, so no record carries an epoch: each
/// partition's next tenure still starts above its last one, from the
/// epoch its tenure noted in the index (`_epoch_p<p>`), not at 1 again.
#[tokio::test]
async fn after_redis_lost_its_data_every_partition_starts_above_its_last_epoch() {
    let stack = Stack::start();
    let env = [("CAUCUS_COORDINATOR_PARTITIONS", "4")];
    let api = Api::connect(&stack).await;
    let mut c = coordinator(&stack, &env);
    let first = epochs(&api).await;
    // A second tenure, so that starting over at 1 would be visible. A
    // clean stop hands the partitions over at once.
    stop(&mut c);
    let mut c = coordinator(&stack, &env);
    let before = eventually("a second tenure", Duration::from_secs(30), || async {
        let e = epochs(&api).await;
        e.iter().zip(&first).all(|(b, f)| b > f).then_some(e)
    })
    .await;
    let js = async_nats::jetstream::new(api.nats.clone());
    let index = js
        .get_key_value("caucus_workflows_active")
        .await
        .expect("the index bucket");
    for (p, e) in before.iter().enumerate() {
        let noted = eventually("the epoch noted", Duration::from_secs(10), || async {
            let v = index.get(format!("_epoch_p{p}")).await.ok()??;
            let n: u64 = std::str::from_utf8(&v).ok()?.parse().ok()?;
            (n == *e).then_some(n)
        })
        .await;
        assert_eq!(noted, *e, "partition {p}");
    }
    stop(&mut c);
    assert_eq!(stack.redis.command("FLUSHALL").trim(), "+OK");
    let _c = coordinator(&stack, &env);
    let after = epochs(&api).await;
    for p in 0..PARTITIONS as usize {
        assert!(
            after[p] > before[p],
            "partition {p}: epoch {} after the flush, {} before",
            after[p],
            before[p]
        );
    }
}
