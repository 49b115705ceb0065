//! Trace context crosses NATS: a span on one connection is the parent of
//! the span that processes the message on another connection.

use std::time::Duration;

use caucus_harness::Nats;
use caucus_shared::config::TelemetryConfig;
use caucus_shared::nats::{self, trace};
use caucus_shared::{telemetry, Config};
use futures::StreamExt;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};

fn span<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span `{name}` among {:?}", names(spans)))
}

fn names(spans: &[SpanData]) -> Vec<String> {
    spans.iter().map(|s| s.name.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_consumer_span_is_a_child_of_the_publisher_span() -> anyhow::Result<()> {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let guard = telemetry::init_with_provider(&TelemetryConfig::default(), "trace-test", provider)?;

    let server = Nats::start();
    let mut cfg = Config::default();
    cfg.nats.url = server.url();
    let a = nats::connect(&cfg.nats, "publisher").await?;
    let b = nats::connect(&cfg.nats, "consumer").await?;
    let mut sub = b.subscribe("caucus.trace.test").await?;
    nats::round_trip(&b, Duration::from_secs(2)).await;

    {
        let publish = tracing::info_span!("publish");
        let _entered = publish.enter();
        let headers = trace::headers();
        assert!(
            headers.get("traceparent").is_some(),
            "no traceparent injected"
        );
        a.publish_with_headers("caucus.trace.test", headers, "hello".into())
            .await?;
        a.flush().await?;
    }

    let msg = tokio::time::timeout(Duration::from_secs(10), sub.next())
        .await?
        .ok_or_else(|| anyhow::anyhow!("subscription closed"))?;
    {
        let process = tracing::info_span!("process");
        trace::set_remote_parent(&process, msg.headers.as_ref());
        process.in_scope(|| tracing::info!(payload = ?msg.payload, "processing"));
    }
    {
        let consume = trace::consumer_span(&msg.subject, msg.headers.as_ref());
        consume.in_scope(|| tracing::info!("consuming"));
    }
    guard.flush();

    let spans = exporter.get_finished_spans()?;
    let publish = span(&spans, "publish");
    let process = span(&spans, "process");
    let consume = span(&spans, "consume");
    assert_eq!(
        process.span_context.trace_id(),
        publish.span_context.trace_id()
    );
    assert_eq!(process.parent_span_id, publish.span_context.span_id());
    assert!(process.parent_span_is_remote);
    assert_eq!(consume.parent_span_id, publish.span_context.span_id());
    assert_ne!(
        process.span_context.span_id(),
        publish.span_context.span_id()
    );
    Ok(())
}
