//! Records stay small whatever tasks return: outputs over
//! `coordinator.inline_output_bytes` live in the `task_outputs` bucket, are
//! handed to downstream tasks and shown by `status` as before, and survive a
//! coordinator restart. Finished records leave the `workflows_active` index.

use std::time::Duration;

use crate::common::{coordinator, eventually, index_keys, pipeline, worker, Api};
use async_nats::jetstream;
use caucus_harness::Stack;
use serde_json::json;

/// An exec handler that answers with a ~20 KB output (and echoes the size
/// of its `x` input, so the test sees what the downstream task received).
fn big_output_handler() -> String {
    "t=$(cat); n=$(printf '%s' \"$t\" | wc -c); \
     pad=$(head -c 20000 /dev/zero | tr '\\0' 'a'); \
     printf '{\"pad\":\"%s\",\"input_bytes\":%s}' \"$pad\" \"$n\""
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn large_outputs_live_outside_the_record() {
    let stack = Stack::start();
    let small = [("CAUCUS_COORDINATOR_INLINE_OUTPUT_BYTES", "1024")];
    let mut c1 = coordinator(&stack, &small);
    let api = Api::connect(&stack).await;
    let handler = format!("exec:{}", big_output_handler());
    let _a = worker(&stack, "alpha", 2, &handler, &[]);
    let p = pipeline(
        "big",
        json!([
            {"name": "x", "agent": "alpha", "expected_duration": 1.0},
            {"name": "y", "agent": "alpha", "expected_duration": 1.0, "depends_on": ["x"]}
        ]),
    );
    let ids = api.submit(&["B1", "B2"], p, 10).await;
    let wfs = api.wait_completed(&ids, Duration::from_secs(60)).await;
    for w in &wfs {
        let x = &w["tasks"]["x"]["output"];
        assert_eq!(x["pad"].as_str().map(str::len), Some(20_000), "{w}");
        // y got x's whole output as its input.
        let y_in = w["tasks"]["y"]["output"]["input_bytes"].as_u64().unwrap();
        assert!(y_in > 20_000, "y's input was {y_in} bytes");
    }

    let js = jetstream::new(api.nats.clone());
    // Finished: out of the index of unfinished workflows. `status` answers
    // from memory, before the coordinator's next pump writes the finished
    // records; the index entry goes only after the record's finishing
    // write (and the large outputs before it), so once it is gone the
    // reads below see the final records.
    eventually(
        "the workflows to leave the index of unfinished workflows",
        Duration::from_secs(20),
        || async { index_keys(&api.nats).await.is_empty().then_some(()) },
    )
    .await;
    let records = js.get_key_value("caucus_workflows").await.unwrap();
    for id in &ids {
        let body = records.get(id).await.unwrap().expect("record");
        assert!(
            body.len() < 8 * 1024,
            "record {id} is {} bytes with two 20 KB outputs",
            body.len()
        );
    }
    let outputs = js.get_key_value("caucus_task_outputs").await.unwrap();
    let key = format!("{}/x.a1", ids[0]);
    assert!(outputs.get(&key).await.unwrap().is_some(), "no {key}");

    // A new coordinator reads the outputs back.
    c1.kill();
    let _c2 = coordinator(&stack, &small);
    let again = api.status(&ids).await;
    assert_eq!(
        again[0]["tasks"]["x"]["output"]["pad"]
            .as_str()
            .map(str::len),
        Some(20_000)
    );
}
