//! A submission step's workflows are indexed under one group key of
//! `workflows_active` (coordinator/src/runtime/index_groups.rs): a
//! takeover still finds every unfinished member after others of the group
//! finished, and the key goes once the last one finished.

use std::time::Duration;

use crate::common::{coordinator, eventually, index_keys, pipeline, worker, Api};
use caucus_harness::Stack;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn a_takeover_finds_the_unfinished_members_of_a_group_and_the_key_goes_after_the_last() {
    let stack = Stack::start();
    let mut c1 = coordinator(&stack, &[]);
    // SLOW's task runs until the test creates the file; the others end at
    // once.
    let dir = tempfile::tempdir().unwrap();
    let go = dir.path().join("go");
    let handler = format!(
        "exec:t=$(cat); case \"$t\" in *SLOW*) while [ ! -e {go} ]; do sleep 0.1; done;; esac; echo '{{}}'",
        go = go.display()
    );
    let _w = worker(&stack, "alpha", 4, &handler, &[]);
    let api = Api::connect(&stack).await;
    let p = pipeline(
        "grouped",
        json!([{"name": "x", "agent": "alpha", "expected_duration": 60.0}]),
    );
    let ids = api.submit(&["F1", "F2", "SLOW", "F3"], p, 1000).await;
    let fast: Vec<String> = ids
        .iter()
        .zip(["F1", "F2", "SLOW", "F3"])
        .filter(|(_, item)| *item != "SLOW")
        .map(|(id, _)| id.clone())
        .collect();
    let slow = vec![ids[2].clone()];
    api.wait_completed(&fast, Duration::from_secs(30)).await;
    // The step's one key, no key per workflow.
    let keys = index_keys(&api.nats).await;
    assert_eq!(keys, vec![format!("_grp.{}", ids[0])], "index keys");
    // The fast ones' finishing writes are stored before the kill.
    let js = async_nats::jetstream::new(api.nats.clone());
    let records = js.get_key_value("caucus_workflows").await.unwrap();
    for id in &fast {
        eventually(
            &format!("{id}'s finishing write"),
            Duration::from_secs(10),
            || async {
                let body = records.get(id).await.unwrap()?;
                let rec: serde_json::Value = serde_json::from_slice(&body).unwrap();
                (rec["state"] == "completed").then_some(())
            },
        )
        .await;
    }
    c1.kill();
    // The group outlived three of its four members: the new coordinator
    // loads SLOW through it and finishes it.
    assert_eq!(index_keys(&api.nats).await.len(), 1);
    let _c2 = coordinator(&stack, &[]);
    std::fs::write(&go, b"").unwrap();
    let wfs = api.wait_completed(&slow, Duration::from_secs(60)).await;
    assert_eq!(wfs[0]["tasks"]["x"]["state"], "completed");
    eventually(
        "the group's key to go after its last member finished",
        Duration::from_secs(20),
        || async { index_keys(&api.nats).await.is_empty().then_some(()) },
    )
    .await;
}
