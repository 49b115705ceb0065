//! The pre-debate sync lock on real servers: flushes land before the
//! snapshot, a write attempted while the lock is held waits and lands after
//! it, and a participant that does not answer is named.

mod facilitator_common;

use std::time::Duration;

use caucus_harness::Stack;
use facilitator_common::*;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

fn seq(snapshot_id: &str) -> u64 {
    snapshot_id.strip_prefix("snap_").unwrap().parse().unwrap()
}

/// The lock key an agent's writer watches (`<prefix>:{lock:debate-sync:<agent>}`).
fn lock_key(agent: &str) -> String {
    format!("caucus:{{lock:debate-sync:{agent}}}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_during_the_sync_lock_waits_and_lands_after_the_snapshot() {
    let stack = Stack::start();
    let _f = facilitator(
        &stack,
        &[
            ("CAUCUS_FACILITATOR_FLUSH_TIMEOUT", "2s"),
            ("CAUCUS_FACILITATOR_ACK_TIMEOUT", "30s"),
        ],
    );
    let c = Client::connect(&stack).await;
    // The challenged agent flushes a finding, then takes 400 ms to confirm:
    // the locks are held all that time.
    let _s = Agent::start(&c, "strategy_analyst", Flush::Now).await;
    let slow = Agent::start(
        &c,
        "financial_analyst",
        Flush::PublishThenConfirm(Duration::from_millis(400)),
    )
    .await;
    let redis = redis::Client::open(stack.redis.url()).unwrap();
    let conn = redis.get_multiplexed_async_connection().await.unwrap();

    c.publish_debate(
        "SYNC-1",
        "challenge",
        challenge(
            "SYNC-1",
            "valuation",
            "strategy_analyst",
            "financial_analyst",
        ),
    )
    .await;
    // The writer is the challenger: it sees its lock taken …
    poll("the challenger's sync lock", WAIT, || {
        let mut conn = conn.clone();
        async move {
            let owner: Option<String> = redis::cmd("GET")
                .arg(lock_key("strategy_analyst"))
                .query_async(&mut conn)
                .await
                .unwrap();
            owner.map(|_| ())
        }
    })
    .await;
    // … so its write waits until the lock is free, then publishes.
    let waited_from = std::time::Instant::now();
    poll("the lock to be released", WAIT, || {
        let mut conn = conn.clone();
        async move {
            let owner: Option<String> = redis::cmd("GET")
                .arg(lock_key("strategy_analyst"))
                .query_async(&mut conn)
                .await
                .unwrap();
            owner.is_none().then_some(())
        }
    })
    .await;
    let waited = waited_from.elapsed();
    let finding = json!({"from_agent": "strategy_analyst", "message_type": "finding",
        "content": {"finding": "new price data", "confidence": 0.9, "evidence": ["feed"], "impact": "none"}});
    let ack =
        c.js.publish(
            c.subjects.findings("AAPL"),
            serde_json::to_vec(&finding).unwrap().into(),
        )
        .await
        .unwrap()
        .await
        .unwrap();

    let d = c.wait_debate("SYNC-1", "the debate", WAIT, |_| true).await;
    let snapshot = seq(d["snapshot"]["snapshot_id"].as_str().unwrap());
    let flushed = slow.flushed_seqs.lock().unwrap().clone();
    assert_eq!(flushed.len(), 1);
    assert!(
        flushed[0] <= snapshot,
        "the flushed finding ({}) is inside the snapshot ({snapshot})",
        flushed[0]
    );
    assert!(
        ack.sequence > snapshot,
        "the held-back write ({}) lands after the snapshot ({snapshot})",
        ack.sequence
    );
    assert!(
        waited > Duration::from_millis(100),
        "the write really waited ({waited:?})"
    );
    assert_eq!(d["snapshot"]["unresponsive"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_participant_that_does_not_flush_is_named_and_the_debate_goes_on() {
    let stack = Stack::start();
    let _f = facilitator(
        &stack,
        &[
            ("CAUCUS_FACILITATOR_FLUSH_TIMEOUT", "300ms"),
            ("CAUCUS_FACILITATOR_ACK_TIMEOUT", "30s"),
        ],
    );
    let c = Client::connect(&stack).await;
    let _s = Agent::start(&c, "strategy_analyst", Flush::Now).await;
    let _silent = Agent::start(&c, "financial_analyst", Flush::Silent).await;
    let d = open(
        &c,
        "SYNC-2",
        "valuation",
        "strategy_analyst",
        "financial_analyst",
    )
    .await;
    assert_eq!(d["snapshot"]["unresponsive"], json!(["financial_analyst"]));
    assert_eq!(d["snapshot"]["flushed"], json!(["strategy_analyst"]));
    assert_eq!(d["state"], "awaiting_ack");
    // Locks are released after the cut.
    let redis = redis::Client::open(stack.redis.url()).unwrap();
    let mut conn = redis.get_multiplexed_async_connection().await.unwrap();
    for a in ["strategy_analyst", "financial_analyst"] {
        let owner: Option<String> = redis::cmd("GET")
            .arg(lock_key(a))
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(owner, None, "{a}'s lock is released");
    }
    let listed = c.call("debates", json!({})).await.unwrap();
    assert_eq!(
        listed["debates"][0]["unresponsive"],
        json!(["financial_analyst"])
    );
}
