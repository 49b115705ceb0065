//! Nothing stays silent forever: a task whose worker went quiet is retried,
//! a task whose event was dead-lettered fails with that reason, and a task
//! JetStream gave up delivering fails permanently.

use std::time::Duration;

use crate::common::{coordinator, eventually, pipeline, worker, Api};
use async_nats::HeaderMap;
use caucus_harness::Stack;
use serde_json::{json, Value};

fn one_stage() -> Value {
    pipeline(
        "one",
        json!([{"name": "x", "agent": "alpha", "expected_duration": 1.0,
                "retry": {"max_attempts": 3, "backoff_initial_ms": 10, "backoff_max_ms": 10}}]),
    )
}

async fn task_x(api: &Api, id: &str) -> Value {
    api.status(&[id.to_string()]).await[0]["tasks"]["x"].clone()
}

async fn wait_running(api: &Api, id: &str) {
    eventually("task x running", Duration::from_secs(20), || async {
        (task_x(api, id).await["state"] == "running").then_some(())
    })
    .await;
}

/// The only worker of a type freezes mid-task (SIGSTOP): nobody reports on
/// the attempt, so after `ack_wait + lease_ttl` the coordinator fails it
/// and dispatches attempt 2, which a new worker completes.
#[tokio::test(flavor = "multi_thread")]
async fn silent_task_is_retried_as_the_next_attempt() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let api = Api::connect(&stack).await;
    let frozen = worker(&stack, "alpha", 1, "sleep:60000", &[]);
    let ids = api.submit(&["Q"], one_stage(), 10).await;
    wait_running(&api, &ids[0]).await;
    frozen.pause();
    eventually("attempt 2", Duration::from_secs(30), || async {
        (task_x(&api, &ids[0]).await["attempt"].as_u64() >= Some(2)).then_some(())
    })
    .await;
    let _rescuer = worker(&stack, "alpha", 1, "noop", &[]);
    let wfs = api.wait_completed(&ids, Duration::from_secs(30)).await;
    assert!(wfs[0]["tasks"]["x"]["attempt"].as_u64() >= Some(2));
    frozen.resume();
}

/// A worker's event that cannot be read goes to the DLQ, and the task it
/// was about fails with that reason instead of waiting forever.
#[tokio::test(flavor = "multi_thread")]
async fn dead_lettered_event_fails_its_task() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let api = Api::connect(&stack).await;
    let _w = worker(&stack, "alpha", 1, "sleep:60000", &[]);
    let ids = api.submit(&["D"], one_stage(), 10).await;
    wait_running(&api, &ids[0]).await;
    let js = async_nats::jetstream::new(api.nats.clone());
    let mut headers = HeaderMap::new();
    headers.insert("Nats-Msg-Id", format!("{}/x@1:completed", ids[0]).as_str());
    js.publish_with_headers(
        "caucus.events.task.alpha.completed",
        headers,
        "{not json".into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    let t = eventually("task x failed", Duration::from_secs(20), || async {
        let t = task_x(&api, &ids[0]).await;
        (t["state"] == "failed").then_some(t)
    })
    .await;
    assert_eq!(t["error"]["error_type"], "event_dead_lettered", "{t}");
    assert_eq!(t["error"]["class"], "permanent", "{t}");
}

/// With `max_deliver = 2`, a task whose workers die twice mid-run is given
/// up by JetStream; the advisory fails it permanently with that reason.
#[tokio::test(flavor = "multi_thread")]
async fn max_deliveries_fail_the_task() {
    let stack = Stack::start();
    // A long silence window for the coordinator, so the advisory (not the
    // silence check) is what fails the task.
    let _c = coordinator(&stack, &[("CAUCUS_WORKER_LEASE_TTL", "30s")]);
    let api = Api::connect(&stack).await;
    let few = [("CAUCUS_WORKER_MAX_DELIVER", "2")];
    let mut w1 = worker(&stack, "alpha", 1, "sleep:60000", &few);
    let ids = api.submit(&["M"], one_stage(), 10).await;
    wait_running(&api, &ids[0]).await;
    w1.kill();
    let mut w2 = worker(&stack, "alpha", 1, "sleep:60000", &few);
    // The second worker's `started` has the first one's Nats-Msg-Id and is
    // dropped as a duplicate: watch the consumer for the redelivery.
    let js = async_nats::jetstream::new(api.nats.clone());
    eventually("second delivery", Duration::from_secs(20), || async {
        let mut c: async_nats::jetstream::consumer::PullConsumer = js
            .get_consumer_from_stream("workers-alpha", "CAUCUS_TASKS")
            .await
            .ok()?;
        let i = c.info().await.ok()?;
        (i.num_redelivered >= 1 && i.num_ack_pending == 1).then_some(())
    })
    .await;
    w2.kill();
    // The server gives up (and says so) when it would deliver a third time,
    // which takes a worker asking for work.
    let _w3 = worker(&stack, "alpha", 1, "noop", &few);
    let t = eventually("task x failed", Duration::from_secs(20), || async {
        let t = task_x(&api, &ids[0]).await;
        (t["state"] == "failed").then_some(t)
    })
    .await;
    assert_eq!(t["error"]["error_type"], "max_deliveries", "{t}");
    assert_eq!(t["attempt"], 1, "{t}");
}

/// An event that names another agent type than its task's is refused: it
/// goes to the DLQ (it would free capacity of the wrong type) and the task
/// goes on to complete from its real worker.
#[tokio::test(flavor = "multi_thread")]
async fn event_with_the_wrong_agent_type_is_dead_lettered() {
    forged_completion_is_dead_lettered("W", "beta", json!({}), "agent_type_mismatch").await;
}

/// A task event of another `schema_version` is dead-lettered with the
/// documented code, not applied as if it were version 1.
#[tokio::test(flavor = "multi_thread")]
async fn an_event_of_another_schema_version_is_dead_lettered_not_applied() {
    forged_completion_is_dead_lettered(
        "V",
        "alpha",
        json!({"schema_version": 2}),
        "unsupported_schema_version",
    )
    .await;
}

/// Publishes a forged `completed` event (as agent type `agent`, with the
/// `extra` fields) for the running task of a one-stage workflow of `item`,
/// then checks it is dead-lettered with `code` and never applied.
async fn forged_completion_is_dead_lettered(item: &str, agent: &str, extra: Value, code: &str) {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let api = Api::connect(&stack).await;
    let _w = worker(&stack, "alpha", 1, "sleep:1500", &[]);
    let ids = api.submit(&[item], one_stage(), 10).await;
    wait_running(&api, &ids[0]).await;
    let mut forged = json!({
        "task_id": format!("{}/x", ids[0]), "workflow_id": ids[0], "stage": "x",
        "agent_type": agent, "attempt": 1, "status": "completed",
        "worker_id": "forger", "output": {"forged": true}, "at": chrono::Utc::now(),
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        forged[k] = v.clone();
    }
    let js = async_nats::jetstream::new(api.nats.clone());
    js.publish(
        format!("caucus.events.task.{agent}.completed"),
        forged.to_string().into(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    let dead = eventually("dead letter", Duration::from_secs(20), || async {
        let dl = crate::common::stream_messages(&api.nats, "CAUCUS_DLQ", ">").await;
        dl.into_iter().find(|m| m.dlq_code.as_deref() == Some(code))
    })
    .await;
    assert_eq!(dead.body["worker_id"], "forger");
    let wfs = api.wait_completed(&ids, Duration::from_secs(30)).await;
    assert_ne!(wfs[0]["tasks"]["x"]["output"], json!({"forged": true}));
}
