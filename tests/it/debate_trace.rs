//! Debates in the trace of the task that opened them (#12): the challenge
//! a worker task publishes (with its `traceparent`) opens a `debate` span
//! in that trace; a time-out fired later by the facilitator's timer is a
//! `debate.step` under it, and the escalations it publishes carry the
//! trace on. Real facilitator process, real OTLP receiver.

use std::time::Duration;

use async_nats::HeaderMap;
use caucus_harness::Stack;
use fake_opentelemetry_collector::{ExportedSpan, FakeCollectorServer};

use crate::facilitator_common::*;
use crate::spans_common::spans_until;

const S: &str = "strategy_analyst";
const F: &str = "financial_analyst";
const WAIT: Duration = Duration::from_secs(20);
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
/// The worker `task` span that sent the challenge.
const TASK_SPAN: &str = "00f067aa0ba902b7";

fn attr<'a>(s: &'a ExportedSpan, key: &str) -> &'a str {
    let v = s
        .attributes
        .get(key)
        .map(String::as_str)
        .unwrap_or_else(|| panic!("span {} has no {key}: {:?}", s.name, s.attributes));
    v.split('"').nth(1).unwrap_or(v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_debate_and_its_time_outs_stay_in_the_opening_tasks_trace() {
    let mut collector = FakeCollectorServer::start().await.expect("collector");
    let endpoint = collector.endpoint();
    let stack = Stack::start();
    let _f = facilitator(
        &stack,
        &[
            ("CAUCUS_TELEMETRY_OTLP_ENDPOINT", endpoint.as_str()),
            ("CAUCUS_TELEMETRY_SAMPLE_RATIO", "1.0"),
            // Export within 100 ms of a span ending.
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    let c = Client::connect(&stack).await;
    let _s = Agent::start(&c, S, Flush::Now).await;
    let _a = Agent::start(&c, F, Flush::Now).await;

    let mut h = HeaderMap::new();
    h.insert(
        "traceparent",
        format!("00-{TRACE_ID}-{TASK_SPAN}-01").as_str(),
    );
    let body = serde_json::to_vec(&challenge("CH-T1", "valuation", S, F)).unwrap();
    c.js.publish_with_headers(c.subjects.debates("CH-T1", "challenge"), h, body.into())
        .await
        .expect("publish")
        .await
        .expect("stream ack");
    // Nobody acknowledges: the ack time-out (300 ms) escalates to level 2,
    // which without track records hands it to the expert.
    c.wait_debate("CH-T1", "level 3", WAIT, |d| d["level"] == 3)
        .await;

    let escalations = poll("both escalation events", WAIT, || async {
        let e = c
            .read_stream("CAUCUS_DEBATES", &c.subjects.debates("CH-T1", "escalation"))
            .await;
        (e.len() >= 2).then_some(e)
    })
    .await;
    for m in &escalations {
        let tp = m
            .headers
            .as_ref()
            .and_then(|h| h.get("traceparent"))
            .map(|v| v.as_str().to_string())
            .unwrap_or_default();
        assert!(
            tp.contains(TRACE_ID),
            "escalation without the trace: {tp:?}"
        );
    }

    // The spans: drained while waiting (the collector's channel is small).
    let mut all: Vec<ExportedSpan> = Vec::new();
    spans_until(&mut collector, &mut all, WAIT, |all| {
        let steps = all
            .iter()
            .filter(|s| s.name == "debate.step" && s.trace_id == TRACE_ID)
            .count();
        (all.iter().any(|s| s.name == "debate") && steps >= 2).then_some(())
    })
    .await;
    let consume = all
        .iter()
        .find(|s| s.name == "consume" && s.parent_span_id == TASK_SPAN)
        .expect("the challenge's consume span, a child of the task span");
    assert_eq!(consume.trace_id, TRACE_ID);
    let debates: Vec<&ExportedSpan> = all.iter().filter(|s| s.name == "debate").collect();
    assert_eq!(debates.len(), 1, "one debate span per debate");
    let debate = debates[0];
    assert_eq!(debate.trace_id, TRACE_ID);
    assert_eq!(debate.parent_span_id, consume.span_id);
    assert_eq!(attr(debate, "caucus.debate_id"), "CH-T1");
    assert!(!attr(debate, "caucus.topic").is_empty());

    let steps: Vec<&ExportedSpan> = all.iter().filter(|s| s.name == "debate.step").collect();
    for s in &steps {
        assert_eq!(s.trace_id, TRACE_ID, "every step is in the task's trace");
        assert_eq!(s.parent_span_id, debate.span_id, "and under the debate");
    }
    let timed_out = steps
        .iter()
        .find(|s| {
            s.attributes
                .get("caucus.outcome")
                .is_some_and(|o| o.contains("timed_out"))
        })
        .expect("the ack time-out step");
    assert!(
        timed_out
            .events
            .iter()
            .any(|e| e.name == "debate escalated"),
        "{:?}",
        timed_out.events
    );
}
