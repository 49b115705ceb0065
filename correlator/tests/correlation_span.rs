//! The `correlation` span of an incident: a new root whose context the
//! detection and its trigger carry, linked to the spans of the failed
//! tasks; announced (and counted) once, even when a second processor
//! re-detects the incident from the same failures. Real NATS server.

use std::sync::Arc;

use async_nats::jetstream::{self, consumer};
use async_nats::HeaderMap;
use caucus_correlator::effects::Effects;
use caucus_correlator::engine::{Correlator, CorrelatorSettings};
use caucus_correlator::event::FailureEvent;
use caucus_correlator::processor::Processor;
use caucus_correlator::service::open_store;
use caucus_harness::Stack;
use caucus_shared::clock::SystemClock;
use caucus_shared::config::{Config, TelemetryConfig};
use caucus_shared::nats::trace;
use caucus_shared::subjects::{StreamKind, Subjects};
use chrono::{TimeDelta, Utc};
use futures::StreamExt;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tokio_util::sync::CancellationToken;

const TICKERS: [&str; 3] = ["AAPL", "MSFT", "GOOGL"];

/// The span context of the worker task that failed on `i`'s item.
fn task_span(i: usize) -> SpanContext {
    SpanContext::new(
        TraceId::from(0x1000 + i as u128),
        SpanId::from(0x20 + i as u64),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    )
}

fn failures() -> Vec<FailureEvent> {
    let base = Utc::now();
    TICKERS
        .iter()
        .enumerate()
        .map(|(i, t)| FailureEvent {
            schema_version: 1,
            event_id: format!("ev-{t}"),
            workflow_id: Some(format!("wf-{t}")),
            stock_ticker: t.to_string(),
            agent_type: "valuation".into(),
            error_type: "QuotaError".into(),
            error_message: "quota exceeded (1000/1000)".into(),
            data_source: "koyfin".into(),
            timestamp: base + TimeDelta::seconds(i as i64),
        })
        .collect()
}

/// Headers of every message on `filter` of the CONTROL stream.
async fn headers(js: &jetstream::Context, filter: &str) -> Vec<HeaderMap> {
    let stream = js
        .get_stream(Subjects::default().stream(StreamKind::Control))
        .await
        .unwrap();
    let c = stream
        .create_consumer(consumer::pull::Config {
            filter_subject: filter.to_string(),
            ack_policy: consumer::AckPolicy::None,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut batch = c.fetch().max_messages(1000).messages().await.unwrap();
    let mut out = Vec::new();
    while let Some(m) = batch.next().await {
        out.push(m.unwrap().headers.clone().unwrap_or_default());
    }
    out
}

fn processor(
    js: &jetstream::Context,
    store: &caucus_correlator::store::CorrelationStore,
    n: usize,
) -> Processor {
    let effects = Effects::new(
        js.clone(),
        Subjects::default(),
        store.clone(),
        "high",
        &format!("writer-{n}"),
        Arc::new(SystemClock),
    );
    let engine = Correlator::new(CorrelatorSettings::default()).unwrap();
    Processor::new(engine, effects, 10_000, CancellationToken::new())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detection_is_one_linked_root_span_announced_once() {
    // Every span sampled, nothing exported; metrics into the Prometheus
    // registry (no listener is needed to read it).
    let cfg = TelemetryConfig {
        sample_ratio: 1.0,
        metrics_addr: Some("127.0.0.1:0".into()),
        ..Default::default()
    };
    let provider = caucus_shared::telemetry::tracer_provider(&cfg, "correlator-test").unwrap();
    let _guard =
        caucus_shared::telemetry::init_with_provider(&cfg, "correlator-test", provider).unwrap();

    let stack = Stack::start();
    let js = jetstream::new(async_nats::connect(stack.nats.url()).await.unwrap());
    let subjects = Subjects::default();
    let config = Config::default();
    caucus_shared::nats::admin::fixed(&js, &subjects, &config)
        .await
        .unwrap();
    let store = open_store(&js, &subjects, &config).await.unwrap();

    let evs = failures();
    let mut first = processor(&js, &store, 0);
    for (i, ev) in evs.iter().cloned().enumerate() {
        first.handle_traced(ev, Some(task_span(i))).await.unwrap();
    }
    let open = first.engine().open_correlations();
    assert_eq!(open.len(), 1, "one incident");
    let c = open[0].clone();
    assert_eq!(
        first.links(&c),
        (0..TICKERS.len()).map(task_span).collect::<Vec<_>>(),
        "the correlation links every failed task's span"
    );

    let detected = headers(&js, &subjects.correlations()).await;
    assert_eq!(detected.len(), 1);
    let cx = trace::extract(&detected[0]);
    let sc = cx.span().span_context().clone();
    assert!(sc.is_valid(), "the detection carries the correlation span");
    assert!(
        (0..TICKERS.len()).all(|i| sc.trace_id() != task_span(i).trace_id()),
        "the correlation span is a new root, not in a failed task's trace"
    );
    let triggers = headers(&js, &subjects.control("batch_trigger")).await;
    assert_eq!(triggers.len(), 1);
    assert_eq!(
        trace::extract(&triggers[0]).span().span_context().span_id(),
        sc.span_id(),
        "the trigger goes out inside the same span"
    );

    // A second processor over the same store (a replay, a new leader)
    // re-detects the incident: nothing is announced or counted again.
    let mut second = processor(&js, &store, 1);
    for (i, ev) in evs.into_iter().enumerate() {
        second.handle_traced(ev, Some(task_span(i))).await.unwrap();
    }
    assert_eq!(second.stats().detected, 1, "the engine re-detects it");
    assert_eq!(headers(&js, &subjects.correlations()).await.len(), 1);
    let metrics = caucus_shared::telemetry::metrics::encode();
    assert!(
        metrics.lines().any(|l| l == "caucus_correlations_total 1"),
        "{metrics}"
    );
}
