//! `coordinator.partitions` on real processes (issue 14): with two
//! coordinators, whichever answers names the leader as partition 0's
//! owner with its fencing epoch and the unfinished workflows it holds; once
//! the leader is SIGKILLed the survivor owns it under a higher epoch.

use std::time::Duration;

use crate::common::{
    caucus, coordinator, eventually, instance_id, pipeline, wait_leading, worker, Api,
};
use caucus_harness::Stack;
use serde_json::{json, Value};

/// Calls that should reach both instances at least once (the API queue
/// group picks one at random: 2 × 2⁻¹⁶ to miss one).
const CALLS: usize = 16;

async fn partitions(api: &Api) -> Value {
    api.call("coordinator", "partitions", json!({}))
        .await
        .expect("coordinator.partitions")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leader_owns_partition_zero_and_the_survivor_takes_it_over() {
    let stack = Stack::start();
    let mut c1 = coordinator(&stack, &[]);
    wait_leading(&c1, Duration::from_secs(20));
    let c2 = coordinator(&stack, &[]);
    let (id1, id2) = (instance_id(&c1), instance_id(&c2));
    assert_ne!(id1, id2);
    let _w = worker(&stack, "quick", 2, "sleep:20", &[]);
    let api = Api::connect(&stack).await;

    // One workflow that finishes (the scheduler keeps it a while: it must
    // not be counted) and two that cannot start (nobody runs `idle`).
    let done = api
        .submit(
            &["P1"],
            pipeline("quickp", json!([{"name": "work", "agent": "quick"}])),
            10,
        )
        .await;
    api.wait_completed(&done, Duration::from_secs(30)).await;
    api.submit(
        &["P2", "P3"],
        pipeline("idlep", json!([{"name": "work", "agent": "idle"}])),
        10,
    )
    .await;

    let mut first_epoch = None;
    for _ in 0..CALLS {
        let v = partitions(&api).await;
        let parts = v["partitions"].as_object().expect("a partitions map");
        assert_eq!(parts.len(), 1, "{v}");
        let p = &v["partitions"]["0"];
        assert_eq!(p["owner"], id1.as_str(), "{v}");
        let epoch = p["epoch"].as_u64().expect("an epoch");
        assert!(epoch >= 1, "{v}");
        assert_eq!(*first_epoch.get_or_insert(epoch), epoch, "{v}");
        assert_eq!(p["workflows"], 2, "whichever instance answered: {v}");
    }
    let first_epoch = first_epoch.expect("answered");

    // `caucus workers` prints the partition under its table.
    let (code, out, err) = caucus(&stack, &["workers"]);
    assert_eq!(code, 0, "{err}");
    let row = out
        .lines()
        .find(|l| l.contains(&id1))
        .unwrap_or_else(|| panic!("no partition row naming {id1}:\n{out}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        cells,
        ["0", id1.as_str(), &first_epoch.to_string(), "2"],
        "{out}"
    );

    c1.kill();
    let v = eventually(
        "the survivor to own partition 0",
        Duration::from_secs(20),
        || {
            let api = &api;
            let id2 = &id2;
            async move {
                let v = partitions(api).await;
                let p = &v["partitions"]["0"];
                (p["owner"] == id2.as_str() && p["workflows"] == 2).then_some(v)
            }
        },
    )
    .await;
    let epoch = v["partitions"]["0"]["epoch"].as_u64().expect("an epoch");
    assert!(
        epoch > first_epoch,
        "the new tenure's epoch {epoch} must be above {first_epoch}: {v}"
    );
    drop(c2);
}
