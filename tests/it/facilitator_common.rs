//! Helpers for the facilitator's cross-process tests: a facilitator with
//! shrunk time-outs, its API, simulated agents that answer flush requests,
//! and challenge envelopes in the seed's format.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream;
use caucus_harness::{Service, Stack};
use caucus_shared::nats::{api_request, ApiError};
use caucus_shared::subjects::Subjects;
use futures::StreamExt;
use serde_json::{json, Value};

/// Env that shrinks every facilitator duration; `extra` overrides.
pub fn facilitator(stack: &Stack, extra: &[(&str, &str)]) -> Service {
    let base = [
        ("CAUCUS_FACILITATOR_ACK_TIMEOUT", "300ms"),
        ("CAUCUS_FACILITATOR_EVIDENCE_TIMEOUT", "2s"),
        ("CAUCUS_FACILITATOR_VERDICT_GRACE", "2s"),
        ("CAUCUS_FACILITATOR_MEDIATION_TIMEOUT", "2s"),
        ("CAUCUS_FACILITATOR_HUMAN_TIMEOUT", "30s"),
        ("CAUCUS_FACILITATOR_EXPERT_SLOT_TTL", "60s"),
        ("CAUCUS_FACILITATOR_FLUSH_TIMEOUT", "300ms"),
        ("CAUCUS_FACILITATOR_TIMER_TICK", "50ms"),
        ("CAUCUS_FACILITATOR_EXPERTS", "expert"),
        ("CAUCUS_SHUTDOWN_GRACE", "5s"),
        // Streams reserve their cap up front; tests need little.
        ("CAUCUS_NATS_STREAM_MAX_BYTES", "67108864"),
        ("CAUCUS_TELEMETRY_LOG_LEVEL", "info"),
    ];
    let mut b = stack.service("caucus-facilitator");
    for (k, v) in base {
        if !extra.iter().any(|(x, _)| *x == k) {
            b = b.env(k, v);
        }
    }
    for (k, v) in extra {
        b = b.env(*k, *v);
    }
    // Its buckets and consumers come from the coordinator or `caucus init`.
    let env: Vec<(&str, &str)> = base
        .iter()
        .copied()
        .filter(|(k, _)| !extra.iter().any(|(x, _)| x == k))
        .chain(extra.iter().copied())
        .collect();
    crate::topology_admin::init(stack, &[], &env);
    b.start()
}

/// The test's own NATS client.
#[derive(Clone)]
pub struct Client {
    pub nats: async_nats::Client,
    pub js: jetstream::Context,
    pub subjects: Subjects,
}

impl Client {
    pub async fn connect(stack: &Stack) -> Client {
        let nats = async_nats::connect(stack.nats.url())
            .await
            .expect("connect");
        Client {
            js: jetstream::new(nats.clone()),
            nats,
            subjects: Subjects::default(),
        }
    }

    /// `facilitator.<op>`.
    pub async fn call(&self, op: &str, body: Value) -> Result<Value, ApiError> {
        api_request(
            &self.nats,
            &self.subjects,
            "facilitator",
            op,
            &body,
            Duration::from_secs(10),
        )
        .await
    }

    /// The stored debate.
    pub async fn debate(&self, id: &str) -> Value {
        self.call("debate", json!({ "debate_id": id }))
            .await
            .expect("debate")
    }

    /// Polls the debate until `pred` holds.
    pub async fn wait_debate(
        &self,
        id: &str,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(d) = self.call("debate", json!({ "debate_id": id })).await {
                if pred(&d) {
                    return d;
                }
                if Instant::now() > deadline {
                    panic!(
                        "timed out waiting for {what}; debate {id} is level {} {}: {}",
                        d["level"], d["state"], d["history"]
                    );
                }
            } else if Instant::now() > deadline {
                panic!("timed out waiting for {what}; debate {id} does not exist");
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Publishes an envelope on the DEBATES stream (`caucus.debates.<id>.<event>`).
    pub async fn publish_debate(&self, id: &str, event: &str, env: Value) {
        self.js
            .publish(
                self.subjects.debates(id, event),
                serde_json::to_vec(&env).unwrap().into(),
            )
            .await
            .expect("publish")
            .await
            .expect("stream ack");
    }

    /// Every message on `subject_filter` in `stream`, in order.
    pub async fn read_stream(
        &self,
        stream: &str,
        subject_filter: &str,
    ) -> Vec<async_nats::jetstream::Message> {
        use async_nats::jetstream::consumer::{pull, AckPolicy};
        let s = self.js.get_stream(stream).await.expect("stream");
        let mut c = s
            .create_consumer(pull::Config {
                filter_subject: subject_filter.into(),
                ack_policy: AckPolicy::None,
                ..Default::default()
            })
            .await
            .expect("consumer");
        let total = c.info().await.expect("info").num_pending as usize;
        let mut out = Vec::with_capacity(total);
        let mut msgs = c.messages().await.expect("messages");
        while out.len() < total {
            out.push(msgs.next().await.expect("message").expect("ok"));
        }
        out
    }

    /// Bodies of the events of one debate (`escalation`, `resolution`).
    pub async fn events(&self, id: &str, event: &str) -> Vec<Value> {
        self.read_stream("CAUCUS_DEBATES", &self.subjects.debates(id, event))
            .await
            .iter()
            .map(|m| serde_json::from_slice(&m.payload).unwrap())
            .collect()
    }
}

/// The seed's challenge format with comparable positions; `id` is the
/// challenge id (and so the debate id).
pub fn challenge(id: &str, priority: &str, challenger: &str, challenged: &str) -> Value {
    json!({
        "from_agent": challenger,
        "to_agent": "facilitator",
        "message_type": "challenge",
        "priority": "high",
        "content": {
            "challenge_id": id,
            "challenger": challenger,
            "challenged": challenged,
            "disputed_finding": "Operating margin assumption",
            "challenge_basis": "Management guidance implies higher margins",
            "required_evidence": ["Historical margin data", "Peer comparison"],
            "escalation_timer": 3600,
            "priority": priority,
            "provisional_resolution": null,
            "challenger_position": {"statement": "30% operating margin", "metric": "operating_margin", "value": 0.30},
            "challenged_position": {"statement": "25% operating margin", "metric": "operating_margin", "value": 0.25},
            "workflow_id": "wf-1",
            "item": "AAPL",
            "downstream_dependencies": ["dcf_valuation", "sensitivity_analysis", "risk_assessment", "peer_comparison"]
        },
        "timestamp": "2025-11-16T10:30:00Z",
        "requires_response": true
    })
}

/// A debate message envelope (`debate_ack`, `debate_evidence`, `debate_verdict`).
pub fn message(kind: &str, from: &str, content: Value) -> Value {
    json!({ "from_agent": from, "message_type": kind, "content": content })
}

/// How a simulated agent answers flush requests.
#[derive(Clone, Copy, Debug)]
pub enum Flush {
    /// Confirm at once.
    Now,
    /// Publish a finding, wait, then confirm.
    PublishThenConfirm(Duration),
    /// Never answer.
    Silent,
}

/// A simulated agent on `caucus.msg.<name>`: answers flush requests and
/// records everything it receives.
pub struct Agent {
    pub received: Arc<Mutex<Vec<Value>>>,
    /// Stream sequences of findings it published while flushing.
    pub flushed_seqs: Arc<Mutex<Vec<u64>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Agent {
    pub async fn start(client: &Client, name: &str, flush: Flush) -> Agent {
        let mut sub = client
            .nats
            .subscribe(client.subjects.msg(name))
            .await
            .expect("subscribe");
        client.nats.flush().await.expect("flush");
        let received = Arc::new(Mutex::new(Vec::new()));
        let flushed_seqs = Arc::new(Mutex::new(Vec::new()));
        let (r, f, c, n) = (
            received.clone(),
            flushed_seqs.clone(),
            client.clone(),
            name.to_string(),
        );
        let task = tokio::spawn(async move {
            while let Some(msg) = sub.next().await {
                let Ok(env) = serde_json::from_slice::<Value>(&msg.payload) else {
                    continue;
                };
                r.lock().unwrap().push(env.clone());
                let is_flush = env["message_type"] == "request"
                    && env["content"]["query"] == "flush_working_memory";
                if !is_flush {
                    continue;
                }
                let reply_to = env["content"]["parameters"]["reply_to"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let corr = env["correlation_id"].clone();
                match flush {
                    Flush::Silent => continue,
                    Flush::Now => {}
                    Flush::PublishThenConfirm(delay) => {
                        let finding = json!({
                            "from_agent": n, "message_type": "finding",
                            "content": {"finding": "working memory", "confidence": 0.8, "evidence": ["cache"], "impact": "none"}
                        });
                        let ack =
                            c.js.publish(
                                c.subjects.findings("AAPL"),
                                serde_json::to_vec(&finding).unwrap().into(),
                            )
                            .await
                            .expect("publish")
                            .await
                            .expect("ack");
                        f.lock().unwrap().push(ack.sequence);
                        tokio::time::sleep(delay).await;
                    }
                }
                let answer = json!({
                    "from_agent": n, "to_agent": "facilitator", "message_type": "confirmation",
                    "correlation_id": corr,
                    "content": {"finding": "flush_working_memory", "agrees": true}
                });
                let _ = c
                    .nats
                    .publish(reply_to, serde_json::to_vec(&answer).unwrap().into())
                    .await;
            }
        });
        Agent {
            received,
            flushed_seqs,
            task,
        }
    }

    /// The challenge the facilitator handed this agent (with the snapshot id).
    pub async fn wait_challenge(&self, debate_id: &str) -> Value {
        poll("the stamped challenge", Duration::from_secs(10), || async {
            self.received
                .lock()
                .unwrap()
                .iter()
                .find(|e| {
                    e["message_type"] == "challenge" && e["content"]["debate_id"] == debate_id
                })
                .cloned()
        })
        .await
    }
}

/// Polls `f` every 20 ms until it returns `Some` or `timeout` passes.
pub async fn poll<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Track records: `right` correct and `wrong` wrong outcomes for `agent`.
pub fn records(agent: &str, right: usize, wrong: usize) -> Value {
    let now = chrono::Utc::now();
    let v: Vec<Value> = (0..right + wrong)
        .map(|i| json!({ "agent": agent, "outcome": i < right, "at": now - chrono::Duration::days(i as i64), "context": {"metric": "operating_margin"} }))
        .collect();
    json!({ "records": v })
}

/// Opens a debate through the stream and waits until it exists.
pub async fn open(
    client: &Client,
    id: &str,
    priority: &str,
    challenger: &str,
    challenged: &str,
) -> Value {
    client
        .publish_debate(
            id,
            "challenge",
            challenge(id, priority, challenger, challenged),
        )
        .await;
    client
        .wait_debate(id, "the debate to open", Duration::from_secs(15), |_| true)
        .await
}
