//! Requests become work (issue #17 point 5), across real processes
//! (nats-server -js, redis-server, caucus-coordinator, caucus-worker). The
//! requester is a plain async_nats client publishing raw JSON text.
//!
//! 1. a request on `caucus.msg.valuation` runs once as a one-stage
//!    workflow whose task carries the request in `params.request` (the
//!    same request delivered twice creates one workflow), and is answered
//!    with a finding on `caucus.findings.AAPL` carrying the task's output
//!    and a confirmation on `caucus.msg.<requester>`, both correlated by
//!    the request id;
//! 2. a request whose deadline already passed is answered at once with a
//!    failure confirmation and runs nothing; one whose deadline passes
//!    while it waits (no worker for its agent type) is ended as failed and
//!    answered with "deadline <ts> missed";
//! 3. a request naming a running workflow (no item) runs on that
//!    workflow's item, linked to it; when its task fails for good the
//!    request workflow ends failed and the requester gets the failure.

use std::time::Duration;

use async_nats::jetstream;
use caucus_harness::Stack;
use serde_json::{json, Value};

use crate::common::{call, coordinator, eventually, stream_messages, worker, Api, Stored};

/// An exec agent that records each dispatch as `<dir>/<n>.json` (written
/// whole, then renamed) and answers with a small valuation.
const AGENT: &str = r##"
import json, os, sys, uuid
raw = sys.stdin.read()
d = sys.argv[1]
tmp = os.path.join(d, uuid.uuid4().hex + ".tmp")
with open(tmp, "w") as f:
    f.write(raw)
os.rename(tmp, tmp[:-4] + ".json")
print(json.dumps({"fair_value": 123.4, "confidence": 0.7}))
"##;

/// Records its dispatch like [`AGENT`], then fails for good (exit 1).
const FAILING_AGENT: &str = r##"
import json, os, sys, uuid
raw = sys.stdin.read()
d = sys.argv[1]
tmp = os.path.join(d, uuid.uuid4().hex + ".tmp")
with open(tmp, "w") as f:
    f.write(raw)
os.rename(tmp, tmp[:-4] + ".json")
sys.stderr.write("no appraisal data for this item")
sys.exit(1)
"##;

struct Agent {
    dir: tempfile::TempDir,
}

impl Agent {
    fn new(script: &str) -> Agent {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("agent.py"), script).expect("write agent.py");
        Agent { dir }
    }

    fn handler(&self) -> String {
        let d = self.dir.path();
        format!(
            "exec:python3 {} {}",
            d.join("agent.py").display(),
            d.display()
        )
    }

    /// Every dispatch recorded so far (as JSON).
    fn dispatches(&self) -> Vec<Value> {
        let Ok(entries) = std::fs::read_dir(self.dir.path()) else {
            return Vec::new();
        };
        entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .map(|p| {
                let text = std::fs::read_to_string(&p).expect("read a dispatch");
                serde_json::from_str(&text).expect("a dispatch is JSON")
            })
            .collect()
    }
}

/// Publishes raw `body` on `subject` and waits for JetStream's ack.
async fn publish_raw(nats: &async_nats::Client, subject: &str, body: String) {
    jetstream::new(nats.clone())
        .publish(subject.to_string(), body.into())
        .await
        .unwrap_or_else(|e| panic!("publish on {subject}: {e}"))
        .await
        .unwrap_or_else(|e| panic!("no JetStream ack on {subject}: {e}"));
}

/// A request envelope as an outside service writes it.
fn request_body(id: &str, to: &str, priority: &str, query: &str, deadline: &str) -> String {
    format!(
        r#"{{"id":"{id}","message_type":"request","from_agent":"risk_service","to_agent":"{to}","priority":"{priority}","content":{{"query":"{query}","item":"AAPL","deadline":"{deadline}"}}}}"#
    )
}

fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Messages on `filter` of `stream` correlated to `request_id`.
async fn correlated(api: &Api, stream: &str, filter: &str, request_id: &str) -> Vec<Stored> {
    stream_messages(&api.nats, stream, filter)
        .await
        .into_iter()
        .filter(|m| m.body["correlation_id"] == request_id)
        .collect()
}

/// Waits for the confirmation answering `request_id` on the requester's
/// subject.
async fn confirmation(api: &Api, request_id: &str) -> Stored {
    eventually(
        &format!("a confirmation on caucus.msg.risk_service for {request_id}"),
        Duration::from_secs(20),
        || async {
            correlated(
                api,
                "CAUCUS_MESSAGES",
                "caucus.msg.risk_service",
                request_id,
            )
            .await
            .into_iter()
            .find(|m| m.body["message_type"] == "confirmation")
        },
    )
    .await
}

/// Waits until the coordinator's messages consumer handled everything.
async fn messages_handled(api: &Api) {
    let js = jetstream::new(api.nats.clone());
    eventually(
        "the coordinator's messages consumer to handle every message",
        Duration::from_secs(15),
        || async {
            let mut c: jetstream::consumer::PullConsumer = js
                .get_consumer_from_stream("coordinator-messages", "CAUCUS_MESSAGES")
                .await
                .ok()?;
            let i = c.info().await.ok()?;
            (i.num_pending == 0 && i.num_ack_pending == 0).then_some(())
        },
    )
    .await;
}

/// Waits until the coordinator reads requests: its messages consumer
/// starts at the stream's end, so a request published before it exists
/// would never reach it.
async fn coordinator_reading(api: &Api) {
    let js = jetstream::new(api.nats.clone());
    eventually(
        "the coordinator's messages consumer (coordinator-messages) to exist",
        Duration::from_secs(20),
        || async {
            js.get_consumer_from_stream::<jetstream::consumer::pull::Config, _, _>(
                "coordinator-messages",
                "CAUCUS_MESSAGES",
            )
            .await
            .ok()
            .map(|_| ())
        },
    )
    .await;
}

/// The workflow ids of the request's submission (key `request:<id>`).
async fn request_workflows(api: &Api, request_id: &str) -> Vec<String> {
    let r = call(
        api,
        "submission",
        json!({"idempotency_key": format!("request:{request_id}")}),
    )
    .await
    .unwrap_or_else(|e| panic!("submission of request {request_id}: {e:?}"));
    serde_json::from_value(r["workflow_ids"].clone()).expect("workflow ids")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_runs_once_and_is_answered_with_its_output() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let agent = Agent::new(AGENT);
    let api = Api::connect(&stack).await;
    let nats = async_nats::connect(stack.nats.url())
        .await
        .expect("the requester connects");
    coordinator_reading(&api).await;
    let id = "risk-req-once-1";
    let query = "Fair value of AAPL if capex rises 10%?";
    let deadline = rfc3339(chrono::Utc::now() + chrono::Duration::seconds(120));
    let body = request_body(id, "valuation_agent", "high", query, &deadline);
    // Delivered twice (a sender's retry): one workflow.
    publish_raw(&nats, "caucus.msg.valuation_agent", body.clone()).await;
    publish_raw(&nats, "caucus.msg.valuation_agent", body).await;
    messages_handled(&api).await;
    let wfs = request_workflows(&api, id).await;
    assert_eq!(wfs.len(), 1, "one workflow per request: {wfs:?}");
    let _w = worker(&stack, "valuation", 1, &agent.handler(), &[]);

    let conf = confirmation(&api, id).await;
    let findings = correlated(&api, "CAUCUS_FINDINGS", "caucus.findings.AAPL", id).await;
    assert_eq!(findings.len(), 1, "one answer finding: {findings:?}");
    let f = &findings[0];
    assert_eq!(f.msg_id.as_deref(), Some(&*format!("answer:{id}")));
    let fb = &f.body;
    assert_eq!(fb["message_type"], "finding", "{fb}");
    assert_eq!(fb["from_agent"], "valuation", "{fb}");
    assert_eq!(fb["to_agent"], "risk_service", "{fb}");
    assert_eq!(fb["priority"], "high", "{fb}");
    assert_eq!(fb["content"]["value"]["fair_value"], 123.4, "{fb}");
    assert_eq!(fb["content"]["confidence"], 0.7, "{fb}");
    assert_eq!(fb["content"]["item"], "AAPL", "{fb}");
    assert_eq!(fb["content"]["workflow_id"], wfs[0], "{fb}");
    assert!(
        fb["content"]["finding"]
            .as_str()
            .is_some_and(|s| s.contains(query)),
        "{fb}"
    );

    let cb = &conf.body;
    assert_eq!(
        conf.msg_id.as_deref(),
        Some(&*format!("answer-confirm:{id}"))
    );
    assert_eq!(cb["from_agent"], "valuation", "{cb}");
    assert_eq!(cb["to_agent"], "risk_service", "{cb}");
    assert_eq!(cb["content"]["agrees"], true, "{cb}");
    assert_eq!(cb["content"]["used"], true, "{cb}");
    assert_eq!(cb["content"]["in_reply_to"], id, "{cb}");
    let note = cb["content"]["note"].as_str().unwrap_or_default();
    assert!(
        note.contains(&*wfs[0]) && note.contains(fb["id"].as_str().unwrap()),
        "the note names the workflow and the finding: {cb}"
    );

    // The task ran once and carried the request.
    let ds = agent.dispatches();
    assert_eq!(ds.len(), 1, "one task: {ds:?}");
    let d = &ds[0];
    assert_eq!(d["item"], "AAPL");
    assert_eq!(d["pipeline"], "request");
    let p = &d["params"]["request"];
    assert_eq!(p["query"], query, "{d}");
    assert_eq!(p["request_id"], id, "{d}");
    assert_eq!(p["from_agent"], "risk_service", "{d}");
    assert_eq!(p["priority"], "high", "{d}");
    assert!(
        d["timeout_ms"]
            .as_u64()
            .is_some_and(|t| t > 0 && t <= 120_000),
        "the deadline bounds the attempt: {d}"
    );
    let ids = vec![wfs[0].clone()];
    let w = api.status(&ids).await.pop().expect("status of the request");
    assert_eq!(w["state"], "completed", "{w}");
    assert_eq!(
        correlated(&api, "CAUCUS_MESSAGES", "caucus.msg.risk_service", id)
            .await
            .len(),
        1,
        "one confirmation"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missed_deadline_is_answered_with_a_failure() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let api = Api::connect(&stack).await;
    let nats = async_nats::connect(stack.nats.url())
        .await
        .expect("the requester connects");
    coordinator_reading(&api).await;

    // Already past when read: a failure at once, and no work.
    let past = rfc3339(chrono::Utc::now() - chrono::Duration::seconds(5));
    let late_id = "risk-req-late-1";
    publish_raw(
        &nats,
        "caucus.msg.valuation",
        request_body(late_id, "valuation", "normal", "Too late?", &past),
    )
    .await;
    let conf = confirmation(&api, late_id).await;
    let c = &conf.body["content"];
    assert_eq!(c["agrees"], false, "{}", conf.body);
    assert_eq!(c["used"], false, "{}", conf.body);
    assert!(
        c["note"].as_str().is_some_and(|n| n.contains("missed")),
        "{}",
        conf.body
    );
    messages_handled(&api).await;
    let r = call(
        &api,
        "submission",
        json!({"idempotency_key": format!("request:{late_id}")}),
    )
    .await;
    assert!(r.is_err(), "no workflow for a request already late: {r:?}");

    // Passes while it waits (nobody runs `appraiser`): ended and answered.
    let soon = chrono::Utc::now() + chrono::Duration::seconds(2);
    let wait_id = "risk-req-wait-1";
    publish_raw(
        &nats,
        "caucus.msg.appraiser",
        request_body(
            wait_id,
            "appraiser",
            "critical",
            "Appraise AAPL",
            &rfc3339(soon),
        ),
    )
    .await;
    messages_handled(&api).await;
    let wfs = request_workflows(&api, wait_id).await;
    assert_eq!(wfs.len(), 1);
    let conf = confirmation(&api, wait_id).await;
    assert!(
        chrono::Utc::now() >= soon,
        "answered only once the deadline passed"
    );
    let c = &conf.body["content"];
    assert_eq!(c["agrees"], false, "{}", conf.body);
    assert_eq!(conf.body["priority"], "critical", "{}", conf.body);
    let note = c["note"].as_str().unwrap_or_default();
    assert!(
        note.starts_with("deadline ") && note.contains("missed"),
        "{}",
        conf.body
    );
    let w = api.status(&wfs).await.pop().expect("status");
    assert_eq!(w["state"], "failed", "{w}");
    assert!(
        correlated(&api, "CAUCUS_FINDINGS", "caucus.findings.AAPL", wait_id)
            .await
            .is_empty(),
        "a failure sends no finding"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_linked_to_a_running_workflow_answers_its_task_s_failure() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let api = Api::connect(&stack).await;
    // The item's running workflow: nobody runs `screener`, so it waits.
    let held = crate::common::pipeline("held", json!([{"name": "screen", "agent": "screener"}]));
    let r = call(
        &api,
        "submit",
        json!({"items": ["AAPL"], "pipeline": held, "time_unit_ms": 1000}),
    )
    .await
    .expect("submit");
    let parent = r["workflow_ids"][0]
        .as_str()
        .expect("a workflow id")
        .to_string();
    let agent = Agent::new(FAILING_AGENT);
    let _w = worker(&stack, "appraiser", 1, &agent.handler(), &[]);
    let nats = async_nats::connect(stack.nats.url())
        .await
        .expect("the requester connects");
    coordinator_reading(&api).await;
    let id = "risk-req-fail-1";
    let body = format!(
        r#"{{"id":"{id}","message_type":"request","from_agent":"risk_service","priority":"normal","content":{{"query":"Appraise it","workflow_id":"{parent}"}}}}"#
    );
    publish_raw(&nats, "caucus.msg.appraiser", body).await;

    let conf = confirmation(&api, id).await;
    let c = &conf.body["content"];
    assert_eq!(c["agrees"], false, "{}", conf.body);
    assert_eq!(c["used"], false, "{}", conf.body);
    let note = c["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("failed"),
        "the failure is named: {}",
        conf.body
    );
    assert!(
        note.contains(&*parent),
        "the linked workflow is named: {}",
        conf.body
    );
    let ds = agent.dispatches();
    assert_eq!(ds.len(), 1, "failed for good at once: {ds:?}");
    assert_eq!(ds[0]["item"], "AAPL", "the linked workflow's item");
    assert_eq!(
        ds[0]["params"]["request"]["parent_workflow_id"], parent,
        "{}",
        ds[0]
    );
    let wfs = request_workflows(&api, id).await;
    let w = api.status(&wfs).await.pop().expect("status");
    assert_eq!(w["state"], "failed", "{w}");
    let p = api
        .status(std::slice::from_ref(&parent))
        .await
        .pop()
        .expect("status");
    assert_ne!(
        p["state"], "failed",
        "the linked workflow is untouched: {p}"
    );
    assert!(
        correlated(&api, "CAUCUS_FINDINGS", "caucus.findings.AAPL", id)
            .await
            .is_empty(),
        "a failure sends no finding"
    );
}
