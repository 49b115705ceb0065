//! Issue #17's acceptance, across real processes (nats-server -js,
//! redis-server, caucus-coordinator, caucus-worker): messages from any
//! service reach the agents and people they are for.
//!
//! The outside service here is a plain async_nats client publishing raw
//! JSON text, as a service that knows nothing of caucus would: no caucus
//! type or helper builds what it sends.
//!
//! 1. the seed's finding, published before the workflow exists, reaches
//!    the valuation task in `inputs.findings`, is confirmed to its sender
//!    and is listed in the gate's decision package;
//! 2. a finding nobody answers raises a `response_overdue` alert card;
//! 3. a `request` becomes work and is answered with a finding and a
//!    confirmation;
//! 4. a critical finding after the valuation completed flags the workflow
//!    waiting at its gate and is listed as late in the package (a normal
//!    one after it is late but flags nothing);
//! 5. malformed, oversize and unaddressable findings are dead-lettered with
//!    their reason and do not stall the valid finding behind them;
//! 6. a coordinator that takes over hands a finding it never saw to the
//!    next task, once;
//! 7. an outside service's alert becomes an alert card by its priority;
//! 8. messages stored before any coordinator ran are still served;
//! 9. the built-in valuation applies the seed's finding, says how in its
//!    confirmation and output, and the package shows it used;
//! 10. a task gets the newest findings addressed to its type (any
//!     spelling, or `all`) about its item, oldest first, at most
//!     `coordinator.findings_per_task`;
//! 11. and at most `coordinator.findings_bytes_per_task` of them, the
//!     oldest left out first;
//! 12. a response awaited by a coordinator that dies is still awaited (and
//!     alerted once) by the one that takes over.

use std::path::Path;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use caucus_harness::Stack;
use caucus_shared::inbound::InputFinding;
use caucus_shared::task::TaskDispatch;
use futures::StreamExt;
use serde_json::{json, Value};

use crate::common::{call, coordinator, eventually, pipeline, stream_messages, worker, Api};

/// Seed 001's finding, byte for byte as its outside service sends it (no
/// `id`: the coordinator names it).
const SEED_FINDING: &str = r#"{"message_type":"finding","from_agent":"financial_analyst","to_agent":"valuation_agent","priority":"high","content":{"finding":"Abnormal capex increase","confidence":0.85,"evidence":["10-K p.47"],"impact":"Adjust FCF projections"},"requires_response":true}"#;

/// The seed's finding text, to pick it out of lists.
const SEED_TEXT: &str = "Abnormal capex increase";

/// An exec agent that records each dispatch it gets as
/// `<dir>/<task id>.json` (written whole, then renamed into place, so a
/// reader never sees half a file), answers every finding that asks for a
/// response as used, and returns a small valuation.
const RECORDER: &str = r##"
import json, os, sys
raw = sys.stdin.read()
t = json.loads(raw)
d = sys.argv[1]
name = t["task_id"].replace("/", "_").replace("#", "_")
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
struct Recorder {
    dir: tempfile::TempDir,
}

impl Recorder {
    fn new() -> Recorder {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("agent.py"), RECORDER).expect("write agent.py");
        Recorder { dir }
    }

    /// `exec:` handler running the recorder.
    fn handler(&self) -> String {
        let d = self.dir.path();
        format!(
            "exec:python3 {} {}",
            d.join("agent.py").display(),
            d.display()
        )
    }

    /// Every dispatch recorded so far.
    fn dispatches(&self) -> Vec<TaskDispatch> {
        read_dispatches(self.dir.path())
    }

    /// Waits for the dispatch of `stage` of `workflow_id`.
    async fn dispatch_of(&self, workflow_id: &str, stage: &str) -> TaskDispatch {
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
fn findings_of(d: &TaskDispatch) -> Vec<InputFinding> {
    match d.inputs.get(caucus_shared::inbound::INPUT_FINDINGS) {
        None => Vec::new(),
        Some(v) => serde_json::from_value(v.clone()).unwrap_or_else(|e| {
            panic!("inputs.findings of {} does not parse ({e}): {v}", d.task_id)
        }),
    }
}

/// An outside service: a plain NATS client, nothing of caucus.
struct Outside {
    js: jetstream::Context,
}

impl Outside {
    async fn connect(stack: &Stack) -> Outside {
        let nats = async_nats::connect(stack.nats.url())
            .await
            .expect("outside service connects");
        Outside {
            js: jetstream::new(nats),
        }
    }

    /// Publishes `body` on `subject` through JetStream and waits for the
    /// ack, so it is stored before the test goes on.
    async fn publish(&self, subject: &str, body: impl Into<Vec<u8>>) {
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
fn valuation_pipeline() -> Value {
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
async fn submit_held(api: &Api, item: &str, pipeline: Value) -> String {
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
async fn wait_gate(api: &Api, wf: &str, gate: &str) {
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
async fn coordinator_reading(api: &Api) {
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
async fn findings_handled(api: &Api) {
    handled(api, "coordinator-findings", "CAUCUS_FINDINGS").await;
}

/// Waits until the coordinator's durable `consumer` on `stream` has
/// nothing pending or unacknowledged (a message it keeps redelivering
/// shows as `ack_pending`/`redelivered` in the failure).
async fn handled(api: &Api, consumer: &str, stream: &str) {
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
async fn poll<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
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
fn log_tail(svc: &caucus_harness::Service, n: usize) -> String {
    let out = svc.output();
    let lines: Vec<&str> = out.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// One dead letter: where it came from and why.
#[derive(Debug)]
struct DeadLetter {
    subject: String,
    code: Option<String>,
    error: Option<String>,
    payload: String,
}

/// Every dead letter so far.
async fn dead_letters(nats: &async_nats::Client) -> Vec<DeadLetter> {
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
async fn assert_no_dead_letters(api: &Api, when: &str) {
    let dl = dead_letters(&api.nats).await;
    assert!(
        dl.is_empty(),
        "nothing should be dead-lettered {when}: {dl:#?}"
    );
}

/// The gate's decision package of `wf`.
async fn package(api: &Api, wf: &str) -> Value {
    call(api, "gate", json!({"workflow_id": wf}))
        .await
        .unwrap_or_else(|e| panic!("gate package of {wf}: {e:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seeds_finding_reaches_the_valuation_task_its_sender_and_the_gate() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    // Published as soon as the coordinator says it is ready, while its
    // term may still be starting: the finding must be held once either way.
    outside
        .publish("caucus.findings.AAPL", SEED_FINDING.as_bytes())
        .await;
    let published = chrono::Utc::now();
    findings_handled(&api).await;
    let wf = submit_held(&api, "AAPL", valuation_pipeline()).await;

    // (a) The valuation task received it in inputs.findings.
    let d = rec.dispatch_of(&wf, "valuation").await;
    let got = findings_of(&d);
    let seed: Vec<&InputFinding> = got
        .iter()
        .filter(|f| f.from_agent == "financial_analyst")
        .collect();
    assert_eq!(
        seed.len(),
        1,
        "the valuation dispatch should carry the seed's finding once in inputs.findings; inputs: {:?}",
        d.inputs
    );
    let f = seed[0];
    assert!(!f.id.is_empty(), "the finding has an id: {f:?}");
    assert_eq!(f.to_agent, "valuation_agent", "to_agent as sent: {f:?}");
    assert_eq!(
        f.priority,
        caucus_shared::envelope::Priority::High,
        "priority: {f:?}"
    );
    assert!(f.requires_response, "requires_response: {f:?}");
    assert_eq!(f.text(), SEED_TEXT, "content.finding: {f:?}");
    assert_eq!(f.content["confidence"], 0.85, "content as sent: {f:?}");
    assert_eq!(
        f.content["evidence"],
        json!(["10-K p.47"]),
        "evidence: {f:?}"
    );
    assert_eq!(f.impact(), Some("Adjust FCF projections"), "impact: {f:?}");
    let skew = chrono::Duration::seconds(5);
    assert!(
        f.stored_at <= d.dispatched_at && f.stored_at > published - skew,
        "stored_at {} should be the JetStream time of the publish (~{published}) and before the dispatch at {}",
        f.stored_at,
        d.dispatched_at
    );

    // (b) Its sender gets a confirmation on caucus.msg.financial_analyst.
    let id = f.id.clone();
    let confirmation = eventually(
        "a confirmation of the seed's finding on caucus.msg.financial_analyst",
        Duration::from_secs(15),
        || async {
            stream_messages(&api.nats, "CAUCUS_MESSAGES", "caucus.msg.financial_analyst")
                .await
                .into_iter()
                .find(|m| {
                    m.body["message_type"] == "confirmation" && m.body["correlation_id"] == id
                })
        },
    )
    .await;
    let c = &confirmation.body;
    assert_eq!(
        c["from_agent"], "valuation",
        "confirmed by the agent type: {c}"
    );
    assert_eq!(c["content"]["in_reply_to"], json!(id), "in_reply_to: {c}");
    assert_eq!(
        c["content"]["used"], true,
        "the agent's `responses` said used: {c}"
    );
    assert_eq!(
        c["content"]["note"], "raised capex in the FCF projection",
        "the agent's note: {c}"
    );
    assert_eq!(
        confirmation.msg_id.as_deref(),
        Some(format!("confirm:{id}:valuation").as_str()),
        "the confirmation's Nats-Msg-Id de-duplicates re-runs"
    );
    let out = &api.status(std::slice::from_ref(&wf)).await[0]["tasks"]["valuation"]["output"];
    assert!(
        out.get("responses").is_none(),
        "the worker lifts `responses` out of the output: {out}"
    );

    // The coordinator reads the confirmation (it answers the awaited
    // response); nothing on the way was dead-lettered.
    handled(&api, "coordinator-messages", "CAUCUS_MESSAGES").await;
    assert_no_dead_letters(&api, "when the seed's finding is delivered and confirmed").await;

    // (c) The gate's package lists it as an outside finding for valuation,
    // answered and used.
    wait_gate(&api, &wf, "review").await;
    let listed = poll(
        "the seed's finding listed as answered in the decision package",
        Duration::from_secs(15),
        || async {
            let pkg = package(&api, &wf).await;
            let f = pkg["findings"]
                .as_array()
                .and_then(|fs| fs.iter().find(|f| f["finding"] == SEED_TEXT))
                .ok_or_else(|| format!("not listed; findings: {}", pkg["findings"]))?;
            if f["answered"] == true {
                Ok(f.clone())
            } else {
                Err(format!("listed but not answered: {f}"))
            }
        },
    )
    .await;
    assert_eq!(listed["source"], "outside", "{listed}");
    assert_eq!(listed["from_agent"], "financial_analyst", "{listed}");
    assert_eq!(listed["to_agent"], "valuation_agent", "{listed}");
    assert_eq!(listed["priority"], "high", "{listed}");
    assert_eq!(listed["confidence"], 0.85, "{listed}");
    assert_eq!(listed["evidence"], json!(["10-K p.47"]), "{listed}");
    assert_eq!(
        listed["late"], false,
        "it came before the analysis: {listed}"
    );
    assert_eq!(listed["requires_response"], true, "{listed}");
    assert_eq!(listed["used"], true, "{listed}");
    assert_eq!(
        listed["finding_id"],
        json!(id),
        "the package names the finding by the id the task and the confirmation used: {listed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finding_nobody_answers_raises_a_response_overdue_card() {
    let stack = Stack::start();
    let coord = coordinator(
        &stack,
        &[("CAUCUS_COORDINATOR_RESPONSE_TIMEOUT__HIGH", "3s")],
    );
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;

    // The seed's finding to valuation is answered in time: no card for it.
    outside
        .publish("caucus.findings.AAPL", SEED_FINDING.as_bytes())
        .await;
    findings_handled(&api).await;
    submit_held(&api, "AAPL", valuation_pipeline()).await;
    eventually(
        "valuation's confirmation of the seed's finding",
        Duration::from_secs(15),
        || async {
            stream_messages(&api.nats, "CAUCUS_MESSAGES", "caucus.msg.financial_analyst")
                .await
                .into_iter()
                .find(|m| m.body["message_type"] == "confirmation")
        },
    )
    .await;
    handled(&api, "coordinator-messages", "CAUCUS_MESSAGES").await;

    // The same to strategy, an agent type of the built-in stock-analysis
    // pipeline that no worker runs: nobody answers. Sent after the first
    // was answered, so its card comes after the first one's would have.
    let body = SEED_FINDING.replace("valuation_agent", "strategy_agent");
    let sent = Instant::now();
    outside.publish("caucus.findings.AAPL", body).await;

    let card = poll(
        "a response_overdue alert card on caucus.alerts.> for the finding to strategy_agent",
        Duration::from_secs(15),
        || async {
            let cards = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>").await;
            let seen: Vec<String> = cards.iter().map(|a| a.body.to_string()).collect();
            cards
                .into_iter()
                .find(|a| a.body["content"]["event_type"] == "response_overdue")
                .ok_or_else(|| {
                    format!("cards {seen:?}; coordinator log:\n{}", log_tail(&coord, 40))
                })
        },
    )
    .await;
    let waited = sent.elapsed();
    let c = &card.body["content"];
    assert_eq!(
        c["from_agent"], "financial_analyst",
        "names the sender: {c}"
    );
    assert_eq!(c["to_agent"], "strategy_agent", "names the addressee: {c}");
    assert_eq!(c["item"], "AAPL", "names the item: {c}");
    assert!(
        waited >= Duration::from_millis(2500),
        "the card came after {waited:?}, before the 3 s response time-out: {c}"
    );
    let cards: Vec<Value> = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>")
        .await
        .into_iter()
        .filter(|a| a.body["content"]["event_type"] == "response_overdue")
        .map(|a| a.body)
        .collect();
    assert_eq!(
        cards.len(),
        1,
        "one card, for the unanswered finding only (the answered one to valuation has none): {cards:#?}"
    );
    assert_no_dead_letters(&api, "for findings to known agent types").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_becomes_work_and_is_answered_with_a_finding_and_a_confirmation() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    let req_id = "risk-req-aapl-1";
    let query = "Fair value of AAPL if capex rises 10%?";
    let deadline = (chrono::Utc::now() + chrono::Duration::seconds(60))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let body = format!(
        r#"{{"id":"{req_id}","message_type":"request","from_agent":"risk_service","to_agent":"valuation","priority":"high","content":{{"query":"{query}","item":"AAPL","deadline":"{deadline}"}}}}"#
    );
    outside.publish("caucus.msg.valuation", body).await;

    // The work: a valuation task on AAPL about the query.
    let d = eventually(
        "a valuation task on AAPL for the request",
        Duration::from_secs(20),
        || async {
            rec.dispatches()
                .into_iter()
                .find(|d| d.item == "AAPL" && d.agent_type == "valuation")
        },
    )
    .await;
    let text = serde_json::to_string(&d).expect("dispatch serialises");
    assert!(
        text.contains(query),
        "the task should carry the request's query: {text}"
    );

    // The answer: a finding to the requester, correlated by the request id.
    let answer = eventually(
        "a finding on caucus.findings.AAPL with correlation_id = the request id",
        Duration::from_secs(20),
        || async {
            stream_messages(&api.nats, "CAUCUS_FINDINGS", "caucus.findings.AAPL")
                .await
                .into_iter()
                .find(|m| m.body["correlation_id"] == req_id)
        },
    )
    .await;
    let a = &answer.body;
    assert_eq!(a["message_type"], "finding", "{a}");
    assert_eq!(
        a["to_agent"], "risk_service",
        "addressed to the requester: {a}"
    );

    // And a confirmation on the requester's subject.
    let conf = eventually(
        "a confirmation on caucus.msg.risk_service with correlation_id = the request id",
        Duration::from_secs(20),
        || async {
            stream_messages(&api.nats, "CAUCUS_MESSAGES", "caucus.msg.risk_service")
                .await
                .into_iter()
                .find(|m| {
                    m.body["message_type"] == "confirmation" && m.body["correlation_id"] == req_id
                })
        },
    )
    .await;
    assert_eq!(conf.body["to_agent"], "risk_service", "{}", conf.body);
    // The answer is for an outside requester, not an agent type: it must
    // not be dead-lettered as unaddressable once the coordinator reads it.
    findings_handled(&api).await;
    assert_no_dead_letters(&api, "for a request and its answer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_critical_finding_after_the_valuation_flags_the_workflow_at_its_gate() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    let wf = submit_held(&api, "AAPL", valuation_pipeline()).await;
    wait_gate(&api, &wf, "review").await;

    // A normal-priority finding after the analysis is late too, but does
    // not flag the workflow; the critical one after it does.
    let minor = r#"{"id":"late-minor-1","message_type":"finding","from_agent":"financial_analyst","to_agent":"valuation","priority":"normal","content":{"finding":"Footnote wording changed","confidence":0.5,"evidence":["10-K p.80"]}}"#;
    outside
        .publish("caucus.findings.AAPL", minor.as_bytes())
        .await;
    let late = r#"{"id":"late-capex-1","message_type":"finding","from_agent":"financial_analyst","to_agent":"valuation_agent","priority":"critical","content":{"finding":"Capex guidance withdrawn","confidence":0.9,"evidence":["8-K item 7.01"],"impact":"Re-run the DCF"}}"#;
    outside
        .publish("caucus.findings.AAPL", late.as_bytes())
        .await;

    let ids = vec![wf.clone()];
    let flag = eventually(
        "a late_finding flag on the workflow waiting at its gate",
        Duration::from_secs(15),
        || async {
            let w = api.status(&ids).await.pop()?;
            w["flags"]
                .as_array()?
                .iter()
                .find(|f| f["kind"] == "late_finding")
                .cloned()
        },
    )
    .await;
    let detail = &flag["detail"];
    assert_eq!(detail["id"], "late-capex-1", "{flag}");
    assert_eq!(detail["from_agent"], "financial_analyst", "{flag}");
    assert_eq!(detail["to_agent"], "valuation_agent", "{flag}");
    assert_eq!(detail["priority"], "critical", "{flag}");
    assert_eq!(detail["finding"], "Capex guidance withdrawn", "{flag}");
    assert_eq!(detail["impact"], "Re-run the DCF", "{flag}");
    assert_eq!(
        detail["stages"],
        json!(["valuation"]),
        "it arrived after the valuation stage: {flag}"
    );
    findings_handled(&api).await;
    let w = api.status(&ids).await.pop().expect("status");
    assert_eq!(w["reevaluate"], true, "{w}");
    let late_flags: Vec<&Value> = w["flags"]
        .as_array()
        .map(|fs| fs.iter().filter(|f| f["kind"] == "late_finding").collect())
        .unwrap_or_default();
    assert_eq!(
        late_flags.len(),
        1,
        "only the critical finding flags the workflow (normal priority does not): {w}"
    );
    assert_eq!(w["state"], "running", "still waiting at its gate: {w}");

    let pkg = package(&api, &wf).await;
    let listed = pkg["late_findings"]
        .as_array()
        .unwrap_or_else(|| panic!("the package has no late_findings list: {pkg}"));
    let l = listed
        .iter()
        .find(|l| l["id"] == "late-capex-1")
        .unwrap_or_else(|| panic!("the late finding is not under late_findings: {pkg}"));
    assert_eq!(l["stages"], json!(["valuation"]), "{l}");
    assert!(
        l["rerun"].as_str().is_some_and(|r| r.contains(&wf)),
        "the package says how to re-run the stages from this gate: {l}"
    );
    let f = pkg["findings"]
        .as_array()
        .and_then(|fs| {
            fs.iter()
                .find(|f| f["finding"] == "Capex guidance withdrawn")
        })
        .unwrap_or_else(|| panic!("the late finding is not in the package's findings: {pkg}"));
    assert_eq!(f["late"], true, "{f}");
    assert_eq!(f["source"], "outside", "{f}");
    assert_eq!(
        f["rerun_stages"],
        json!(["valuation"]),
        "re-running valuation applies it: {f}"
    );
    let minor = pkg["findings"]
        .as_array()
        .and_then(|fs| {
            fs.iter()
                .find(|f| f["finding"] == "Footnote wording changed")
        })
        .unwrap_or_else(|| {
            panic!("the normal late finding is not in the package's findings: {pkg}")
        });
    assert_eq!(
        minor["late"], true,
        "it arrived after the analysis: {minor}"
    );
    assert!(
        !listed.iter().any(|l| l["id"] == "late-minor-1"),
        "late_findings holds only the findings that flagged the workflow: {pkg}"
    );
    assert_eq!(
        pkg["can_approve"], true,
        "a late finding does not block approval: {pkg}"
    );
    // People hear of it: an alert card naming the finding and the workflow.
    let card = eventually(
        "an alert card about the late finding",
        Duration::from_secs(10),
        || async {
            stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>")
                .await
                .into_iter()
                .find(|a| a.body["content"]["detail"]["id"] == "late-capex-1")
        },
    )
    .await;
    let c = &card.body["content"];
    assert_eq!(c["kind"], "late_finding", "{c}");
    assert!(
        c["workflows"]
            .as_array()
            .is_some_and(|ws| ws.iter().any(|w| w["workflow_id"] == json!(wf))),
        "the card names the flagged workflow {wf}: {c}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_findings_are_dead_lettered_and_do_not_stall_the_next() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[("CAUCUS_MAX_BODY_BYTES", "8192")]);
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;

    let subject = "caucus.findings.AAPL";
    outside
        .publish(subject, "finding: capex up, see 10-K".as_bytes())
        .await;
    let oversize = SEED_FINDING.replace("10-K p.47", &"x".repeat(10_000));
    outside.publish(subject, oversize).await;
    let nobody = SEED_FINDING.replace("valuation_agent", "nobody_agent");
    outside.publish(subject, nobody).await;
    let valid = r#"{"message_type":"finding","from_agent":"supply_chain_service","to_agent":"valuation","priority":"normal","content":{"finding":"Supplier lead times shortened","confidence":0.6,"evidence":["survey"]}}"#;
    outside.publish(subject, valid.as_bytes()).await;

    let dl = eventually(
        "three dead letters from caucus.findings.AAPL",
        Duration::from_secs(15),
        || async {
            let dl = dead_letters(&api.nats).await;
            (dl.len() >= 3).then_some(dl)
        },
    )
    .await;
    for code in ["malformed_json", "too_large", "unaddressable"] {
        let d = dl
            .iter()
            .find(|d| d.code.as_deref() == Some(code))
            .unwrap_or_else(|| panic!("no dead letter with Caucus-Dlq-Code {code}: {dl:#?}"));
        assert_eq!(d.subject, "caucus.dlq.caucus.findings.AAPL", "{d:#?}");
        assert!(
            d.error.as_deref().is_some_and(|e| !e.is_empty()),
            "a dead letter says why in Caucus-Dlq-Error: {d:#?}"
        );
    }
    let unaddressable = dl
        .iter()
        .find(|d| d.code.as_deref() == Some("unaddressable"))
        .expect("checked above");
    assert!(
        unaddressable.payload.contains("nobody_agent"),
        "the unaddressable dead letter is the nobody_agent finding: {unaddressable:#?}"
    );
    assert_eq!(dl.len(), 3, "only the three bad ones: {dl:#?}");

    // The valid finding behind them still reaches a task.
    findings_handled(&api).await;
    let wf = submit_held(&api, "AAPL", valuation_pipeline()).await;
    let d = rec.dispatch_of(&wf, "valuation").await;
    let got = findings_of(&d);
    assert_eq!(
        got.iter().map(InputFinding::text).collect::<Vec<_>>(),
        vec!["Supplier lead times shortened"],
        "only the valid finding reaches the valuation task: {:?}",
        d.inputs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_coordinator_that_takes_over_hands_out_the_finding_once() {
    let stack = Stack::start();
    let mut first = coordinator(&stack, &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    outside
        .publish("caucus.findings.AAPL", SEED_FINDING.as_bytes())
        .await;
    findings_handled(&api).await;
    // The finding was held in the first coordinator's memory only: the
    // next one reads it back from the stream when its term begins.
    first.kill();
    let _second = coordinator(&stack, &[]);
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let wf = submit_held(&api, "AAPL", valuation_pipeline()).await;
    let d = rec.dispatch_of(&wf, "valuation").await;
    let got = findings_of(&d);
    assert_eq!(
        got.iter().map(InputFinding::text).collect::<Vec<_>>(),
        vec![SEED_TEXT],
        "the new coordinator hands the seed's finding to the valuation task, once: {:?}",
        d.inputs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outside_services_alert_becomes_an_alert_card_by_priority() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    let halt = r#"{"message_type":"alert","from_agent":"exchange_feed","to_agent":"valuation","priority":"critical","content":{"event_type":"trading_halt","recommended_actions":["hold valuations of AAPL"]}}"#;
    outside
        .publish("caucus.msg.valuation", halt.as_bytes())
        .await;
    let guidance = r#"{"message_type":"alert","from_agent":"news_service","priority":"high","content":{"event_type":"guidance_cut"}}"#;
    outside
        .publish("caucus.findings.AAPL", guidance.as_bytes())
        .await;

    for (event, subject) in [
        ("trading_halt", "caucus.alerts.critical"),
        ("guidance_cut", "caucus.alerts.warning"),
    ] {
        let card = poll(
            &format!("an alert card for the outside {event} alert"),
            Duration::from_secs(15),
            || async {
                let cards = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>").await;
                let seen: Vec<String> = cards.iter().map(|a| a.body.to_string()).collect();
                cards
                    .into_iter()
                    .find(|a| a.body.to_string().contains(event))
                    .ok_or_else(|| format!("cards {seen:?}"))
            },
        )
        .await;
        assert_eq!(card.subject, subject, "severity by priority: {}", card.body);
    }
    assert_no_dead_letters(&api, "for outside alerts").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_stored_before_the_coordinator_leads_are_still_served() {
    let stack = Stack::start();
    // A worker sets up the streams; no coordinator runs yet (not deployed
    // yet, or between two leaders).
    let _w = worker(&stack, "valuation", 1, "noop", &[]);
    let outside = Outside::connect(&stack).await;
    let body = SEED_FINDING.replace("valuation_agent", "strategy_agent");
    outside.publish("caucus.findings.AAPL", body).await;
    let halt = r#"{"message_type":"alert","from_agent":"exchange_feed","to_agent":"valuation","priority":"critical","content":{"event_type":"trading_halt"}}"#;
    outside
        .publish("caucus.msg.valuation", halt.as_bytes())
        .await;

    let coord = coordinator(
        &stack,
        &[("CAUCUS_COORDINATOR_RESPONSE_TIMEOUT__HIGH", "2s")],
    );
    let api = Api::connect(&stack).await;
    for (what, event) in [
        (
            "the overdue card of the finding stored before",
            "response_overdue",
        ),
        ("the card of the alert stored before", "trading_halt"),
    ] {
        poll(what, Duration::from_secs(15), || async {
            let cards = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>").await;
            let seen: Vec<String> = cards.iter().map(|a| a.body.to_string()).collect();
            cards
                .into_iter()
                .find(|a| a.body["content"]["event_type"] == event)
                .map(|_| ())
                .ok_or_else(|| {
                    format!("cards {seen:?}; coordinator log:\n{}", log_tail(&coord, 15))
                })
        })
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtin_valuation_applies_the_seeds_finding_and_says_how() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let _w = worker(
        &stack,
        "screening,business,financial,strategy,valuation,report",
        2,
        "builtin",
        &[],
    );
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    outside
        .publish("caucus.findings.AAPL", SEED_FINDING.as_bytes())
        .await;
    findings_handled(&api).await;
    let wf = submit_held(&api, "AAPL", json!("stock-analysis")).await;

    let conf = poll(
        "valuation's confirmation of the seed's finding on caucus.msg.financial_analyst",
        Duration::from_secs(20),
        || async {
            let msgs =
                stream_messages(&api.nats, "CAUCUS_MESSAGES", "caucus.msg.financial_analyst").await;
            let seen: Vec<String> = msgs.iter().map(|m| m.body.to_string()).collect();
            msgs.into_iter()
                .find(|m| {
                    m.body["message_type"] == "confirmation" && m.body["from_agent"] == "valuation"
                })
                .ok_or_else(|| format!("messages {seen:?}"))
        },
    )
    .await;
    let c = &conf.body["content"];
    assert_eq!(c["used"], true, "the built-in valuation applied it: {c}");
    assert!(
        c["note"].as_str().is_some_and(|n| n.contains("capex")),
        "the note says how it was applied: {c}"
    );
    let id = conf.body["correlation_id"].clone();
    let ids = vec![wf.clone()];
    let out = api.status(&ids).await[0]["tasks"]["valuation"]["output"].clone();
    let applied = out["applied_findings"]
        .as_array()
        .unwrap_or_else(|| panic!("the valuation output lists applied_findings: {out}"));
    assert!(
        applied.iter().any(|a| a["finding_id"] == id),
        "applied_findings names the finding {id}: {out}"
    );

    wait_gate(&api, &wf, "review").await;
    let listed = poll(
        "the seed's finding listed as answered and used in the decision package",
        Duration::from_secs(15),
        || async {
            let pkg = package(&api, &wf).await;
            let f = pkg["findings"]
                .as_array()
                .and_then(|fs| fs.iter().find(|f| f["finding"] == SEED_TEXT))
                .ok_or_else(|| format!("not listed; findings: {}", pkg["findings"]))?;
            if f["answered"] == true {
                Ok(f.clone())
            } else {
                Err(format!("listed but not answered: {f}"))
            }
        },
    )
    .await;
    assert_eq!(listed["used"], true, "{listed}");
    assert_eq!(listed["source"], "outside", "{listed}");
    assert_eq!(listed["finding_id"], id, "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_gets_the_newest_findings_addressed_to_its_type_oldest_first() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[("CAUCUS_COORDINATOR_FINDINGS_PER_TASK", "3")]);
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    // Every spelling of valuation, and `all`, addresses the valuation task;
    // strategy's finding and the one without to_agent do not; the oldest
    // of the four for valuation is left out (three per task).
    for (to, text) in [
        (Some("valuation"), "first, left out"),
        (Some("VALUATION_AGENT"), "second"),
        (Some("strategy_agent"), "for strategy"),
        (None, "for whoever reads"),
        (Some("valuation_analyst"), "third"),
        (Some("all"), "fourth"),
    ] {
        let to = to
            .map(|t| format!(r#""to_agent":"{t}","#))
            .unwrap_or_default();
        let body = format!(
            r#"{{"message_type":"finding","from_agent":"desk",{to}"priority":"normal","content":{{"finding":"{text}","confidence":0.5,"evidence":[]}}}}"#
        );
        outside.publish("caucus.findings.AAPL", body).await;
    }
    outside
        .publish(
            "caucus.findings.MSFT",
            r#"{"message_type":"finding","from_agent":"desk","to_agent":"valuation","priority":"normal","content":{"finding":"about another item","confidence":0.5,"evidence":[]}}"#
                .as_bytes(),
        )
        .await;
    findings_handled(&api).await;
    let wf = submit_held(&api, "AAPL", valuation_pipeline()).await;
    let d = rec.dispatch_of(&wf, "valuation").await;
    assert_eq!(
        findings_of(&d)
            .iter()
            .map(InputFinding::text)
            .collect::<Vec<_>>(),
        vec!["second", "third", "fourth"],
        "the newest three addressed to valuation about AAPL, oldest first: {:?}",
        d.inputs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_findings_stay_within_the_byte_bound_newest_kept() {
    let stack = Stack::start();
    let limit = 1200;
    let _c = coordinator(
        &stack,
        &[(
            "CAUCUS_COORDINATOR_FINDINGS_BYTES_PER_TASK",
            &limit.to_string(),
        )],
    );
    let rec = Recorder::new();
    let _w = worker(&stack, "valuation", 1, &rec.handler(), &[]);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    // Four findings of about 450 bytes each: not all fit in 1200.
    let pad = "e".repeat(300);
    for n in 1..=4 {
        let body = format!(
            r#"{{"message_type":"finding","from_agent":"desk","to_agent":"valuation","priority":"normal","content":{{"finding":"number {n}","confidence":0.5,"evidence":["{pad}"]}}}}"#
        );
        outside.publish("caucus.findings.AAPL", body).await;
    }
    findings_handled(&api).await;
    let wf = submit_held(&api, "AAPL", valuation_pipeline()).await;
    let d = rec.dispatch_of(&wf, "valuation").await;
    let got = findings_of(&d);
    let size = serde_json::to_vec(&d.inputs["findings"])
        .expect("serialises")
        .len();
    let texts: Vec<&str> = got.iter().map(InputFinding::text).collect();
    assert!(
        size <= limit,
        "inputs.findings is {size} bytes, over the {limit} byte bound: {texts:?}"
    );
    assert!(
        !texts.is_empty() && texts.last() == Some(&"number 4"),
        "the newest finding is kept (older ones are left out first): {texts:?}"
    );
    assert!(
        !texts.contains(&"number 1"),
        "the oldest is left out: {texts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_awaited_response_is_still_awaited_after_a_takeover() {
    let stack = Stack::start();
    let env = [("CAUCUS_COORDINATOR_RESPONSE_TIMEOUT__HIGH", "3s")];
    let mut first = coordinator(&stack, &env);
    let api = Api::connect(&stack).await;
    let outside = Outside::connect(&stack).await;
    coordinator_reading(&api).await;
    let body = SEED_FINDING.replace("valuation_agent", "strategy_agent");
    outside.publish("caucus.findings.AAPL", body).await;
    findings_handled(&api).await;
    // The first coordinator registered the wait, then dies before it is due.
    first.kill();
    let second = coordinator(&stack, &env);
    let cards = poll(
        "the response_overdue card from the coordinator that took over",
        Duration::from_secs(20),
        || async {
            let cards: Vec<Value> = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.>")
                .await
                .into_iter()
                .filter(|a| a.body["content"]["event_type"] == "response_overdue")
                .map(|a| a.body)
                .collect();
            if cards.is_empty() {
                Err(format!(
                    "no card; coordinator log:\n{}",
                    log_tail(&second, 15)
                ))
            } else {
                Ok(cards)
            }
        },
    )
    .await;
    assert_eq!(cards.len(), 1, "one card: {cards:#?}");
    assert_eq!(
        cards[0]["content"]["to_agent"], "strategy_agent",
        "{}",
        cards[0]
    );
}
