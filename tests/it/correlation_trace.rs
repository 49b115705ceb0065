//! The correlator's `correlation` span (#12), from a real process to a
//! real OTLP receiver: failures published with the `traceparent` of the
//! task spans that failed make one incident, whose span is a new root
//! linked to each of those task spans, carrying the root cause and count.

use std::time::Duration;

use async_nats::HeaderMap;
use caucus_harness::Stack;
use caucus_shared::envelope::Envelope;
use caucus_shared::messages::AgentFailureEvent;
use caucus_shared::subjects::Subjects;
use chrono::{TimeDelta, Utc};
use fake_opentelemetry_collector::{ExportedSpan, FakeCollectorServer};

use crate::spans_common::spans_until;

const TICKERS: [&str; 3] = ["AAPL", "MSFT", "GOOGL"];
const TIMEOUT: Duration = Duration::from_secs(30);

/// (trace id, span id) of the task span that failed on `TICKERS[i]`.
fn task_span(i: usize) -> (String, String) {
    (format!("{:032x}", 0xabc0 + i), format!("{:016x}", 0x10 + i))
}

fn attr<'a>(s: &'a ExportedSpan, key: &str) -> &'a str {
    let v = s
        .attributes
        .get(key)
        .map(String::as_str)
        .unwrap_or_else(|| panic!("span {} has no {key}: {:?}", s.name, s.attributes));
    v.split('"').nth(1).unwrap_or(v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correlation_is_a_root_span_linked_to_each_failed_task() {
    let mut collector = FakeCollectorServer::start().await.expect("collector");
    let endpoint = collector.endpoint();
    let stack = Stack::start();
    let env = [
        ("CAUCUS_TELEMETRY_OTLP_ENDPOINT", endpoint.as_str()),
        ("CAUCUS_TELEMETRY_SAMPLE_RATIO", "1.0"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    crate::topology_admin::init(&stack, &[], &env);
    let mut b = stack
        .service("caucus-correlator")
        .env("CAUCUS_CORRELATOR_LEADER_LEASE", "1s")
        .env("CAUCUS_SHUTDOWN_GRACE", "5s");
    for (k, v) in env {
        b = b.env(k, v);
    }
    let correlator = b.start();
    correlator.wait_for_output("consuming failures", TIMEOUT);

    let js = async_nats::jetstream::new(async_nats::connect(stack.nats.url()).await.unwrap());
    let subjects = Subjects::default();
    let base = Utc::now();
    for (i, ticker) in TICKERS.iter().enumerate() {
        let content = AgentFailureEvent {
            stock_ticker: ticker.to_string(),
            agent_type: "valuation".into(),
            error_type: "QuotaError".into(),
            error_message: "Koyfin API error 429: quota exceeded (1000/1000 calls used)".into(),
            data_source: Some("koyfin".into()),
            timestamp: Some(base + TimeDelta::seconds(i as i64)),
            workflow_id: Some(format!("wf-{ticker}")),
            task_id: Some(format!("wf-{ticker}/valuation")),
        };
        let env = Envelope::with_content("valuation_agent", &content).unwrap();
        let (trace, span) = task_span(i);
        let mut h = HeaderMap::new();
        h.insert("traceparent", format!("00-{trace}-{span}-01").as_str());
        js.publish_with_headers(subjects.failures("valuation"), h, env.to_bytes())
            .await
            .expect("publish")
            .await
            .expect("stream ack");
    }

    let mut all: Vec<ExportedSpan> = Vec::new();
    let span = spans_until(&mut collector, &mut all, TIMEOUT, |all| {
        all.iter().find(|s| s.name == "correlation").cloned()
    })
    .await;
    assert!(span.parent_span_id.is_empty(), "a new root: {span:?}");
    let linked: Vec<(String, String)> = span
        .links
        .iter()
        .map(|l| (l.trace_id.clone(), l.span_id.clone()))
        .collect();
    assert_eq!(
        linked,
        (0..TICKERS.len()).map(task_span).collect::<Vec<_>>()
    );
    assert!(
        (0..TICKERS.len()).all(|i| span.trace_id != task_span(i).0),
        "not in any failed task's trace"
    );
    assert!(
        attr(&span, "caucus.root_cause").contains("Koyfin"),
        "{span:?}"
    );
    assert_eq!(attr(&span, "caucus.root_cause_kind"), "quota");
    assert!(attr(&span, "caucus.count").contains('3'), "{span:?}");
    assert_eq!(attr(&span, "caucus.correlation_id").len(), 36);
}
