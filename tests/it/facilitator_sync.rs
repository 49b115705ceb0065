//! The pre-debate sync lock on real servers: flushes land before the
//! snapshot, a worker's finding reported while the lock is held waits in
//! the worker and lands after it, and a participant that does not answer is
//! named.

use std::time::Duration;

use crate::facilitator_common::*;
use caucus_harness::Stack;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(20);

fn seq(snapshot_id: &str) -> u64 {
    snapshot_id.strip_prefix("snap_").unwrap().parse().unwrap()
}

/// The lock key an agent's writer watches (`<prefix>:{lock:debate-sync:<agent>}`).
fn lock_key(agent: &str) -> String {
    format!("caucus:{{lock:debate-sync:{agent}}}")
}

/// A coordinator and a worker running `agent` with `handler`.
fn coordinator_and_worker(
    stack: &Stack,
    agent: &str,
    handler: &str,
) -> (caucus_harness::Service, caucus_harness::Service) {
    let fast = [
        ("CAUCUS_COORDINATOR_TICK", "50ms"),
        ("CAUCUS_WORKER_HEARTBEAT_INTERVAL", "200ms"),
        ("CAUCUS_WORKER_LEASE_TTL", "1s"),
        ("CAUCUS_WORKER_FETCH_WAIT", "200ms"),
        ("CAUCUS_WORKER_ACK_WAIT", "2s"),
        ("CAUCUS_SHUTDOWN_GRACE", "5s"),
    ];
    let mut c = stack.service("caucus-coordinator");
    let mut w = stack.service("caucus-worker").args([
        "--agent",
        agent,
        "--slots",
        "1",
        "--handler",
        handler,
    ]);
    for (k, v) in fast {
        c = c.env(k, v);
        w = w.env(k, v);
    }
    (c.start(), w.start())
}

/// The writer is a real worker: while the facilitator holds the
/// challenger's sync lock, the finding of the challenger's task (an `exec:`
/// agent that has already answered) waits in the worker and lands after
/// the snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workers_finding_during_the_sync_lock_waits_and_lands_after_the_snapshot() {
    let stack = Stack::start();
    let _f = facilitator(
        &stack,
        &[
            ("CAUCUS_FACILITATOR_FLUSH_TIMEOUT", "8s"),
            ("CAUCUS_FACILITATOR_SYNC_LOCK_TTL", "20s"),
            ("CAUCUS_FACILITATOR_ACK_TIMEOUT", "30s"),
        ],
    );
    let dir = tempfile::tempdir().unwrap();
    let ran = dir.path().join("ran");
    let handler = format!(
        "exec:touch {}; echo '{{\"ok\": true, \"findings\": [{{\"finding\": \"new price data\", \"confidence\": 0.9, \"evidence\": [\"feed\"]}}]}}'",
        ran.display()
    );
    let (_coord, _worker) = coordinator_and_worker(&stack, "strategy_analyst", &handler);
    let c = Client::connect(&stack).await;
    // The challenged agent flushes a finding, then takes 4 s to confirm:
    // the locks are held all that time. (The exec: worker does not answer
    // flushes for its agent; the simulated agent does.)
    let _s = Agent::start(&c, "strategy_analyst", Flush::Now).await;
    let slow = Agent::start(
        &c,
        "financial_analyst",
        Flush::PublishThenConfirm(Duration::from_secs(4)),
    )
    .await;
    let redis = redis::Client::open(stack.redis.url()).unwrap();
    let conn = redis.get_multiplexed_async_connection().await.unwrap();
    let held = || {
        let mut conn = conn.clone();
        async move {
            let owner: Option<String> = redis::cmd("GET")
                .arg(lock_key("strategy_analyst"))
                .query_async(&mut conn)
                .await
                .unwrap();
            owner.is_some()
        }
    };

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
    poll("the challenger's sync lock", WAIT, || async {
        held().await.then_some(())
    })
    .await;
    // While it is held the challenger's task runs and reports a finding.
    let body = json!({"items": ["AAPL"], "time_unit_ms": 1000, "pipeline": {
        "name": "sync", "capacities": {"strategy_analyst": 1},
        "stages": [{"name": "strategy", "agent": "strategy_analyst", "expected_duration": 1.0}]}});
    // A coordinator that has only just started may still stand by.
    let submitted = poll("the coordinator to take the submission", WAIT, || async {
        caucus_shared::nats::api_request(
            &c.nats,
            &c.subjects,
            "coordinator",
            "submit",
            &body,
            Duration::from_secs(10),
        )
        .await
        .ok()
    })
    .await;
    assert_eq!(submitted["workflow_ids"].as_array().unwrap().len(), 1);
    poll("the exec agent to answer", WAIT, || async {
        ran.exists().then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        held().await,
        "the agent answered while the lock was held (widen the flush delay if not)"
    );
    let from_worker = |m: &async_nats::jetstream::Message| {
        serde_json::from_slice::<serde_json::Value>(&m.payload).unwrap()["content"]["finding"]
            == "new price data"
    };
    let early = c.read_stream("CAUCUS_FINDINGS", "caucus.findings.>").await;
    assert!(
        !early.iter().any(from_worker),
        "the worker's finding waits while the lock is held"
    );

    let d = c.wait_debate("SYNC-1", "the debate", WAIT, |_| true).await;
    let snapshot = seq(d["snapshot"]["snapshot_id"].as_str().unwrap());
    let found = poll("the worker's finding", WAIT, || async {
        let all = c.read_stream("CAUCUS_FINDINGS", "caucus.findings.>").await;
        all.into_iter().find(|m| from_worker(m))
    })
    .await;
    let flushed = slow.flushed_seqs.lock().unwrap().clone();
    assert_eq!(flushed.len(), 1);
    assert!(
        flushed[0] <= snapshot,
        "the flushed finding ({}) is inside the snapshot ({snapshot})",
        flushed[0]
    );
    let landed = found.info().unwrap().stream_sequence;
    assert!(
        landed > snapshot,
        "the held-back finding ({landed}) lands after the snapshot ({snapshot})"
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
