//! What the outside-message tests share: the outside service (a plain NATS
//! client), the recording exec agent, the pipeline, and waits that say
//! what was missing.

use std::path::Path;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use caucus_harness::Stack;
use caucus_shared::inbound::InputFinding;
use caucus_shared::task::TaskDispatch;
use futures::StreamExt;
use serde_json::{json, Value};

use crate::common::{call, eventually, pipeline, Api};

/// Seed 001's finding, byte for byte as its outside service sends it (no
/// `id`: the coordinator names it).
pub(super) const SEED_FINDING: &str = r#"{"message_type":"finding","from_agent":"financial_analyst","to_agent":"valuation_agent","priority":"high","content":{"finding":"Abnormal capex increase","confidence":0.85,"evidence":["10-K p.47"],"impact":"Adjust FCF projections"},"requires_response":true}"#;

/// The seed's finding text, to pick it out of lists.
pub(super) const SEED_TEXT: &str = "Abnormal capex increase";

/// An exec agent that records each dispatch it gets as
/// `<dir>/<task id>-<attempt>.json` (written whole, then renamed into
/// place, so a reader never sees half a file), answers every finding that
/// asks for a response as used, and returns a small valuation.
const RECORDER: &str = r##"
import json, os, sys
raw = sys.stdin.read()
t = json.loads(raw)
d = sys.argv[1]
name = t["task_id"].replace("/", "_").replace("#", "_") + "-" + str(t["attempt"])
tmp = os.path.join(d, name + ".tmp")
with open(tmp, "w") as f:
    f.write(raw)
os.rename(tmp, os.path.join(d, name + ".json"))
out = {"fair_value": 123.4, "confidence": 0.7}
found = (t.get("inputs") or {}).get("findings") or []
answers = [{"finding_id": f["id"], "used": True, "note": "raised capex in the FCF projection"}
           for f in found if f.get("requires_response")]
if answers:
    out["responses"] = answers
print(json.dumps(out))
"##;

/// Where the recorder writes, and the worker handler that runs it.
pub(super) struct Recorder {
    dir: tempfile::TempDir,
}

impl Recorder {
    /// A fresh directory holding the agent script.
    pub(super) fn new() -> Recorder {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("agent.py"), RECORDER).expect("write agent.py");
        Recorder { dir }
    }

    /// `exec:` handler running the recorder.
    pub(super) fn handler(&self) -> String {
        let d = self.dir.path();
        format!(
            "exec:python3 {} {}",
            d.join("agent.py").display(),
            d.display()
        )
    }

    /// Every dispatch recorded so far.
    pub(super) fn dispatches(&self) -> Vec<TaskDispatch> {
        read_dispatches(self.dir.path())
    }

    /// Waits for the dispatch of `stage` of `workflow_id` for `attempt`.
    pub(super) async fn dispatch_of_attempt(
        &self,
        workflow_id: &str,
        stage: &str,
        attempt: u32,
    ) -> TaskDispatch {
        eventually(
            &format!("the recorded dispatch of {workflow_id}/{stage}, attempt {attempt}"),
            Duration::from_secs(20),
            || async {
                self.dispatches().into_iter().find(|d| {
                    d.workflow_id == workflow_id && d.stage == stage && d.attempt == attempt
                })
            },
        )
        .await
    }

    /// Waits for the dispatch of `stage` of `workflow_id`.
    pub(super) async fn dispatch_of(&self, workflow_id: &str, stage: &str) -> TaskDispatch {
        eventually(
            &format!("the recorded dispatch of {workflow_id}/{stage}"),
            Duration::from_secs(20),
            || async {
                self.dispatches()
                    .into_iter()
                    .find(|d| d.workflow_id == workflow_id && d.stage == stage)
            },
        )
        .await
    }
}

/// The dispatches recorded in `dir` (a file that does not parse fails the
/// test: the recorder writes whole files only).
fn read_dispatches(dir: &Path) -> Vec<TaskDispatch> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read a recorded dispatch");
            serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{} is not a TaskDispatch ({e}): {text}", p.display()))
        })
        .collect()
}

/// The findings a dispatch carries in `inputs.findings` (empty when the
/// key is absent; a key that does not parse fails the test).
pub(super) fn findings_of(d: &TaskDispatch) -> Vec<InputFinding> {
    match d.inputs.get(caucus_shared::inbound::INPUT_FINDINGS) {
        None => Vec::new(),
        Some(v) => serde_json::from_value(v.clone()).unwrap_or_else(|e| {
            panic!("inputs.findings of {} does not parse ({e}): {v}", d.task_id)
        }),
    }
}

/// An outside service: a plain NATS client, nothing of caucus.
pub(super) struct Outside {
    js: jetstream::Context,
}

impl Outside {
    /// Connects to the stack's NATS server.
    pub(super) async fn connect(stack: &Stack) -> Outside {
        let nats = async_nats::connect(stack.nats.url())
            .await
            .expect("outside service connects");
        Outside {
            js: jetstream::new(nats),
        }
    }

    /// Publishes `body` on `subject` through JetStream and waits for the
    /// ack, so it is stored before the test goes on.
    pub(super) async fn publish(&self, subject: &str, body: impl Into<Vec<u8>>) {
        self.js
            .publish(subject.to_string(), body.into().into())
            .await
            .unwrap_or_else(|e| panic!("publish on {subject}: {e}"))
            .await
            .unwrap_or_else(|e| panic!("no JetStream ack on {subject}: {e}"));
    }
}

/// The stage `valuation` (agent `valuation`), the human gate `review`
/// after it and a `publish` stage behind the gate (no worker runs it: the
/// tests never approve).
pub(super) fn valuation_pipeline() -> Value {
    pipeline(
        "outside-findings",
        json!([
            {"name": "valuation", "agent": "valuation"},
            {"name": "review", "kind": "gate", "depends_on": ["valuation"]},
            {"name": "publish", "agent": "publisher", "depends_on": ["review"]}
        ]),
    )
}

/// Submits `pipeline` for `item` with its gate held for a person; returns
/// the workflow id.
pub(super) async fn submit_held(api: &Api, item: &str, pipeline: Value) -> String {
    let r = call(
        api,
        "submit",
        json!({"items": [item], "pipeline": pipeline, "time_unit_ms": 20}),
    )
    .await
    .expect("submit");
    r["workflow_ids"][0]
        .as_str()
        .unwrap_or_else(|| panic!("submit answered no workflow id: {r}"))
        .to_string()
}

/// Waits until `gate` of `wf` is open.
pub(super) async fn wait_gate(api: &Api, wf: &str, gate: &str) {
    let ids = vec![wf.to_string()];
    eventually(
        &format!("gate {gate} of {wf} to open"),
        Duration::from_secs(20),
        || async {
            let w = api.status(&ids).await.pop()?;
            w["open_gates"]
                .as_array()
                .is_some_and(|g| g.iter().any(|x| x == gate))
                .then_some(())
        },
    )
    .await;
}

/// Waits until the coordinator reads `caucus.findings.>` and `caucus.msg.>`
/// (its durable consumers exist): what is published from then on is read
/// as it comes. Messages stored before are the subject of
/// `messages_stored_before_the_coordinator_leads_are_still_served`.
pub(super) async fn coordinator_reading(api: &Api) {
    let js = jetstream::new(api.nats.clone());
    for (consumer, stream) in [
        ("coordinator-findings", "CAUCUS_FINDINGS"),
        ("coordinator-messages", "CAUCUS_MESSAGES"),
    ] {
        eventually(
            &format!("the coordinator's consumer {consumer} on {stream}"),
            Duration::from_secs(15),
            || async {
                js.get_consumer_from_stream::<jetstream::consumer::pull::Config, _, _>(
                    consumer, stream,
                )
                .await
                .ok()
                .map(|_| ())
            },
        )
        .await;
    }
}

/// Waits until the coordinator has handled every message on
/// `caucus.findings.>` (its durable consumer has nothing pending or
/// unacknowledged): a finding is acknowledged once the coordinator holds
/// it for the tasks it is addressed to.
pub(super) async fn findings_handled(api: &Api) {
    handled(api, "coordinator-findings", "CAUCUS_FINDINGS").await;
}

/// Waits until the coordinator's durable `consumer` on `stream` has
/// nothing pending or unacknowledged (a message it keeps redelivering
/// shows as `ack_pending`/`redelivered` in the failure).
pub(super) async fn handled(api: &Api, consumer: &str, stream: &str) {
    let js = jetstream::new(api.nats.clone());
    poll(
        &format!("the coordinator's consumer {consumer} on {stream} to handle every message"),
        Duration::from_secs(15),
        || async {
            let mut c: jetstream::consumer::PullConsumer = js
                .get_consumer_from_stream(consumer, stream)
                .await
                .map_err(|e| format!("no consumer: {e}"))?;
            let i = c.info().await.map_err(|e| format!("no info: {e}"))?;
            if i.num_pending == 0 && i.num_ack_pending == 0 {
                Ok(())
            } else {
                Err(format!(
                    "pending {}, ack_pending {}, redelivered {}",
                    i.num_pending, i.num_ack_pending, i.num_redelivered
                ))
            }
        },
    )
    .await;
}

/// Polls `f` until it returns `Ok`, or panics naming `what` and the last
/// thing `f` saw (its `Err`), so a failure says what was missing.
pub(super) async fn poll<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match f().await {
            Ok(v) => return v,
            Err(last) if Instant::now() >= deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last seen: {last}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// The last `n` lines `svc` printed, for failure messages.
pub(super) fn log_tail(svc: &caucus_harness::Service, n: usize) -> String {
    let out = svc.output();
    let lines: Vec<&str> = out.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// One dead letter: where it came from and why.
#[derive(Debug)]
pub(super) struct DeadLetter {
    pub(super) subject: String,
    pub(super) code: Option<String>,
    pub(super) error: Option<String>,
    pub(super) payload: String,
}

/// Every dead letter so far.
pub(super) async fn dead_letters(nats: &async_nats::Client) -> Vec<DeadLetter> {
    use jetstream::consumer::{pull, AckPolicy};
    let js = jetstream::new(nats.clone());
    let Ok(stream) = js.get_stream("CAUCUS_DLQ").await else {
        return Vec::new();
    };
    let mut consumer = stream
        .create_consumer(pull::Config {
            ack_policy: AckPolicy::None,
            ..Default::default()
        })
        .await
        .expect("DLQ consumer");
    let total = consumer
        .info()
        .await
        .expect("DLQ consumer info")
        .num_pending as usize;
    let mut out = Vec::with_capacity(total);
    if total == 0 {
        return out;
    }
    let mut msgs = consumer.messages().await.expect("DLQ messages");
    while out.len() < total {
        let m = msgs.next().await.expect("a dead letter").expect("ok");
        let header = |k: &str| {
            m.headers
                .as_ref()
                .and_then(|h| h.get(k))
                .map(|v| v.as_str().to_string())
        };
        out.push(DeadLetter {
            subject: m.subject.to_string(),
            code: header("Caucus-Dlq-Code"),
            error: header("Caucus-Dlq-Error"),
            payload: String::from_utf8_lossy(&m.payload)
                .chars()
                .take(300)
                .collect(),
        });
    }
    out
}

/// Fails listing the dead letters when there are any.
pub(super) async fn assert_no_dead_letters(api: &Api, when: &str) {
    let dl = dead_letters(&api.nats).await;
    assert!(
        dl.is_empty(),
        "nothing should be dead-lettered {when}: {dl:#?}"
    );
}

/// The gate's decision package of `wf`.
pub(super) async fn package(api: &Api, wf: &str) -> Value {
    call(api, "gate", json!({"workflow_id": wf}))
        .await
        .unwrap_or_else(|e| panic!("gate package of {wf}: {e:?}"))
}
