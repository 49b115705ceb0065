//! Helpers shared by the cross-process tests.

#![allow(dead_code)]

use std::time::{Duration, Instant};

use caucus_harness::{Service, Stack};
use caucus_shared::nats::{api_request, ApiError};
use caucus_shared::subjects::Subjects;
use serde_json::{json, Value};

/// Env that shrinks every duration the runtime uses.
pub fn fast_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("CAUCUS_COORDINATOR_TICK", "50ms"),
        ("CAUCUS_COORDINATOR_LEADER_LEASE", "2s"),
        ("CAUCUS_WORKER_HEARTBEAT_INTERVAL", "200ms"),
        ("CAUCUS_WORKER_LEASE_TTL", "1s"),
        ("CAUCUS_WORKER_FETCH_WAIT", "200ms"),
        ("CAUCUS_WORKER_ACK_WAIT", "2s"),
        ("CAUCUS_SHUTDOWN_GRACE", "10s"),
        ("CAUCUS_TELEMETRY_LOG_LEVEL", "info"),
    ]
}

/// Starts a coordinator on `stack` with `extra` env.
pub fn coordinator(stack: &Stack, extra: &[(&str, &str)]) -> Service {
    let mut b = stack.service("caucus-coordinator");
    for (k, v) in fast_env().into_iter().chain(extra.iter().copied()) {
        b = b.env(k, v);
    }
    b.start()
}

/// Starts a worker for `agents` with `slots` and `handler`.
pub fn worker(
    stack: &Stack,
    agents: &str,
    slots: u32,
    handler: &str,
    extra: &[(&str, &str)],
) -> Service {
    let mut b = stack.service("caucus-worker").args([
        "--agent",
        agents,
        "--slots",
        &slots.to_string(),
        "--handler",
        handler,
    ]);
    for (k, v) in fast_env().into_iter().chain(extra.iter().copied()) {
        b = b.env(k, v);
    }
    b.start()
}

/// A NATS client for the test itself.
pub struct Api {
    pub nats: async_nats::Client,
    pub subjects: Subjects,
}

impl Api {
    pub async fn connect(stack: &Stack) -> Api {
        Api {
            nats: async_nats::connect(stack.nats.url())
                .await
                .expect("connect"),
            subjects: Subjects::default(),
        }
    }

    pub async fn call(&self, service: &str, op: &str, body: Value) -> Result<Value, ApiError> {
        api_request(
            &self.nats,
            &self.subjects,
            service,
            op,
            &body,
            Duration::from_secs(10),
        )
        .await
    }

    /// Submits and returns the workflow ids.
    pub async fn submit(&self, items: &[&str], pipeline: Value, unit_ms: u64) -> Vec<String> {
        let r = self
            .call(
                "coordinator",
                "submit",
                json!({"items": items, "pipeline": pipeline, "time_unit_ms": unit_ms}),
            )
            .await
            .expect("submit");
        r["workflow_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    }

    /// Status of `ids`; while a restarted coordinator waits for the old
    /// leader's lock to lapse it answers `standby`, so that is retried.
    pub async fn status(&self, ids: &[String]) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self
                .call("coordinator", "status", json!({"ids": ids, "tasks": true}))
                .await
            {
                Ok(r) => return r["workflows"].as_array().cloned().unwrap_or_default(),
                Err(e) if e.code == "standby" && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("status: {e:?}"),
            }
        }
    }

    /// Polls until every workflow is completed (panics on failed or timeout).
    pub async fn wait_completed(&self, ids: &[String], timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let wfs = self.status(ids).await;
            if let Some(f) = wfs.iter().find(|w| w["state"] == "failed") {
                panic!("workflow failed: {f}");
            }
            if wfs.len() == ids.len() && wfs.iter().all(|w| w["state"] == "completed") {
                return wfs;
            }
            if Instant::now() > deadline {
                let states: Vec<String> = wfs
                    .iter()
                    .map(|w| format!("{}:{}", w["item"], w["state"]))
                    .collect();
                panic!("timed out waiting for completion: {states:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// An inline pipeline; every agent type it uses gets a planning capacity
/// of 1 (the runtime capacity comes from the registered workers).
pub fn pipeline(name: &str, stages: Value) -> Value {
    let mut caps = serde_json::Map::new();
    for s in stages.as_array().into_iter().flatten() {
        if let Some(a) = s["agent"].as_str() {
            caps.insert(a.to_string(), json!(1));
        }
    }
    json!({"name": name, "stages": stages, "capacities": caps})
}

/// Every task event published so far, read back from the EVENTS stream.
pub async fn task_events(nats: &async_nats::Client) -> Vec<Value> {
    use async_nats::jetstream::consumer::{pull, AckPolicy};
    use futures::StreamExt;
    let js = async_nats::jetstream::new(nats.clone());
    let stream = js.get_stream("CAUCUS_EVENTS").await.expect("events stream");
    let mut consumer = stream
        .create_consumer(pull::Config {
            filter_subject: "caucus.events.task.>".into(),
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
        out.push(serde_json::from_slice(&m.payload).expect("event json"));
    }
    out
}
