//! A facilitator killed mid-debate: the restarted process resumes every
//! debate at the level it had reached, from the deadlines stored in KV.

use std::time::Duration;

use crate::facilitator_common::*;
use caucus_harness::Stack;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_facilitator_resumes_each_debate_at_its_level() {
    let stack = Stack::start();
    let env = [
        ("CAUCUS_FACILITATOR_ACK_TIMEOUT", "300ms"),
        ("CAUCUS_FACILITATOR_EVIDENCE_TIMEOUT", "3s"),
        ("CAUCUS_FACILITATOR_HUMAN_TIMEOUT", "3s"),
    ];
    let mut fac = facilitator(&stack, &env);
    let c = Client::connect(&stack).await;
    let _s = Agent::start(&c, "strategy_analyst", Flush::Now).await;
    let _a = Agent::start(&c, "financial_analyst", Flush::Now).await;

    // One debate waits for evidence (level 1), one for a person (level 3).
    let d = open(
        &c,
        "R-L1",
        "valuation",
        "strategy_analyst",
        "financial_analyst",
    )
    .await;
    let snapshot = d["snapshot"]["snapshot_id"].as_str().unwrap().to_string();
    c.call(
        "message",
        message(
            "debate_ack",
            "financial_analyst",
            json!({"debate_id": "R-L1", "snapshot_id": snapshot}),
        ),
    )
    .await
    .unwrap();
    open(
        &c,
        "R-L3",
        "critical-path",
        "strategy_analyst",
        "financial_analyst",
    )
    .await;
    c.wait_debate("R-L3", "level 3", WAIT, |d| d["level"] == 3)
        .await;
    assert_eq!(c.debate("R-L1").await["state"], "awaiting_evidence");

    fac.kill();
    let mut fac = facilitator(&stack, &env);

    // Before the deadlines nothing moved; the stored state is served.
    let d = c.debate("R-L1").await;
    assert_eq!(
        (d["level"].as_u64(), d["state"].as_str()),
        (Some(1), Some("awaiting_evidence"))
    );
    assert_eq!(
        c.call("expert_load", json!({})).await.unwrap(),
        json!({"expert": "1/3"})
    );
    // The evidence deadline passes: level 2 (no track records) → level 3.
    let d = c
        .wait_debate("R-L1", "level 3 after restart", WAIT, |d| d["level"] == 3)
        .await;
    let events: Vec<String> = d["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["event"].as_str().unwrap().to_string())
        .collect();
    assert!(
        events.contains(&"evidence_timeout".to_string()),
        "{events:?}"
    );
    // The human deadline passes for the other: level 4, slot freed.
    let d = c
        .wait_debate("R-L3", "level 4 after restart", WAIT, |d| d["level"] == 4)
        .await;
    assert_eq!(
        d["resolution"]["provisional_details"]["trigger"],
        "human_timeout"
    );
    assert_eq!(c.debate("R-L3").await["expert"], serde_json::Value::Null);
    fac.sigterm();
    fac.wait_exit(Duration::from_secs(10));
}
