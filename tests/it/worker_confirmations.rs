//! A worker answers the findings a task received (`inputs.findings`) with
//! `confirmation`s on `caucus.msg.<sender>`, on real servers and a real
//! worker process with an `exec:` agent: the handler's `responses` become
//! answers, an unanswered finding that asks for one gets a receipt, and a
//! re-run of the task does not confirm twice; the built-in valuation agent
//! answers from the findings it applied.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::common::{eventually, stream_messages, task_events, worker, Api, Stored};
use caucus_harness::Stack;

const WAIT: Duration = Duration::from_secs(30);

/// Reads its task, answers finding `f1` and returns a plain output.
const HANDLER: &str = r#"exec:cat >/dev/null; echo '{"ok":true,"responses":[{"finding_id":"f1","used":true,"note":"cut FCF by 5%"},{"bogus":1}]}'"#;

fn finding(id: &str, from: &str, to: &str, requires_response: bool) -> Value {
    json!({
        "id": id, "from_agent": from, "to_agent": to, "priority": "high",
        "requires_response": requires_response,
        "content": {"finding": format!("finding {id}"), "confidence": 0.85,
                    "impact": "Adjust FCF projections"},
        "stored_at": "2026-11-25T10:00:00Z"
    })
}

/// Publishes attempt `attempt` of the valuation task straight onto its
/// work queue (no coordinator: the worker runs whatever is dispatched).
async fn dispatch(api: &Api, attempt: u32) {
    dispatch_with(
        api,
        attempt,
        json!([
            finding("f1", "financial_analyst", "valuation_agent", true),
            finding("f2", "news_service", "all", true),
            finding("f3", "news_service", "valuation", false),
        ]),
    )
    .await;
}

async fn dispatch_with(api: &Api, attempt: u32, findings: Value) {
    let js = async_nats::jetstream::new(api.nats.clone());
    let d = json!({
        "task_id": "wf-conf/valuation", "workflow_id": "wf-conf", "item": "AAPL",
        "pipeline": "p", "stage": "valuation", "agent_type": "valuation",
        "attempt": attempt, "dispatched_at": Utc::now(),
        "inputs": {"findings": findings}
    });
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(
        "Nats-Msg-Id",
        format!("wf-conf/valuation@{attempt}").as_str(),
    );
    js.publish_with_headers(
        api.subjects.tasks("valuation"),
        headers,
        d.to_string().into(),
    )
    .await
    .expect("publish")
    .await
    .expect("stored");
}

async fn completions(api: &Api) -> Vec<Value> {
    task_events(&api.nats)
        .await
        .into_iter()
        .filter(|e| e["status"] == "completed" && e["task_id"] == "wf-conf/valuation")
        .collect()
}

async fn confirmations_to(api: &Api, sender: &str) -> Vec<Stored> {
    stream_messages(&api.nats, "CAUCUS_MESSAGES", &api.subjects.msg(sender)).await
}

fn ts(v: &Value) -> DateTime<Utc> {
    v.as_str().expect("timestamp").parse().expect("rfc3339")
}

#[tokio::test(flavor = "multi_thread")]
async fn exec_agent_findings_are_confirmed_once() {
    let stack = Stack::start();
    let _w = worker(&stack, "valuation", 1, HANDLER, &[]);
    let api = Api::connect(&stack).await;
    dispatch(&api, 1).await;

    let done = eventually("the task to complete", WAIT, || async {
        completions(&api).await.into_iter().next()
    })
    .await;
    assert_eq!(
        done["output"],
        json!({"ok": true}),
        "responses are lifted out of the output"
    );

    // Answered by the handler.
    let to_fin = confirmations_to(&api, "financial_analyst").await;
    assert_eq!(to_fin.len(), 1, "{to_fin:?}");
    let c = &to_fin[0];
    assert_eq!(c.msg_id.as_deref(), Some("confirm:f1:valuation"));
    assert_eq!(c.body["message_type"], "confirmation");
    assert_eq!(c.body["from_agent"], "valuation");
    assert_eq!(c.body["to_agent"], "financial_analyst");
    assert_eq!(c.body["correlation_id"], "f1");
    assert_eq!(c.body["priority"], "high");
    assert_eq!(c.body["content"]["finding"], "finding f1");
    assert_eq!(c.body["content"]["used"], true);
    assert_eq!(c.body["content"]["note"], "cut FCF by 5%");
    assert_eq!(c.body["content"]["in_reply_to"], "f1");
    // Sent before the completion was reported.
    assert!(ts(&c.body["timestamp"]) <= ts(&done["at"]));

    // Not answered: a receipt; f3 did not ask for an answer.
    let to_news = confirmations_to(&api, "news_service").await;
    assert_eq!(to_news.len(), 1, "only f2 asked: {to_news:?}");
    let r = &to_news[0];
    assert_eq!(r.msg_id.as_deref(), Some("confirm:f2:valuation"));
    assert_eq!(r.body["correlation_id"], "f2");
    assert!(r.body["content"].get("used").is_none(), "{:?}", r.body);
    assert_eq!(
        r.body["content"]["note"],
        "received by valuation; use not reported"
    );

    // A re-run (a new attempt of the same task) confirms with the same ids:
    // the stream keeps one of each.
    dispatch(&api, 2).await;
    eventually("the re-run to complete", WAIT, || async {
        (completions(&api).await.len() >= 2).then_some(())
    })
    .await;
    assert_eq!(confirmations_to(&api, "financial_analyst").await.len(), 1);
    assert_eq!(confirmations_to(&api, "news_service").await.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn builtin_valuation_confirms_what_it_applied() {
    let stack = Stack::start();
    let _w = worker(&stack, "valuation", 1, "builtin", &[]);
    let api = Api::connect(&stack).await;
    let mut capex = finding("f1", "financial_analyst", "valuation_agent", true);
    capex["content"]["finding"] = json!("Abnormal capex increase");
    let mut other = finding("f2", "news_service", "all", true);
    other["content"] = json!({"finding": "New CEO appointed", "impact": "Watch guidance"});
    dispatch_with(&api, 1, json!([capex, other])).await;

    let done = eventually("the task to complete", WAIT, || async {
        completions(&api).await.into_iter().next()
    })
    .await;
    let applied = &done["output"]["applied_findings"];
    assert_eq!(applied.as_array().map(Vec::len), Some(1), "{applied}");
    assert_eq!(applied[0]["finding_id"], "f1");

    let to_fin = confirmations_to(&api, "financial_analyst").await;
    assert_eq!(to_fin.len(), 1, "{to_fin:?}");
    let c = &to_fin[0].body;
    assert_eq!(c["correlation_id"], "f1");
    assert_eq!(c["content"]["used"], true);
    assert_eq!(c["content"]["note"], applied[0]["how"]);
    assert!(c["content"]["note"]
        .as_str()
        .unwrap()
        .starts_with("raised capex to "));

    let to_news = confirmations_to(&api, "news_service").await;
    assert_eq!(to_news.len(), 1, "{to_news:?}");
    let n = &to_news[0].body;
    assert_eq!(n["correlation_id"], "f2");
    assert_eq!(n["content"]["used"], false);
    assert_eq!(
        n["content"]["note"],
        "not applicable to the valuation analysis"
    );
}
