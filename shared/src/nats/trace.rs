//! W3C trace context (`traceparent`, `tracestate`) in NATS message headers,
//! so one trace runs coordinator → worker → facilitator across processes.
//!
//! The W3C format is part of the wire contract, so these functions use the
//! TraceContext propagator directly rather than whatever is global.

use async_nats::HeaderMap;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

struct HeaderInjector<'a>(&'a mut HeaderMap);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key, value.as_str());
    }
}

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|v| v.as_str())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|(k, _)| k.as_ref()).collect()
    }
}

/// Writes the context of the current `tracing` span into `headers`.
/// Writes nothing when there is no sampled or recorded span.
pub fn inject(headers: &mut HeaderMap) {
    inject_context(&tracing::Span::current().context(), headers);
}

/// Writes `cx` into `headers`.
pub fn inject_context(cx: &Context, headers: &mut HeaderMap) {
    TraceContextPropagator::new().inject_context(cx, &mut HeaderInjector(headers));
}

/// A fresh header map carrying the current span's context.
pub fn headers() -> HeaderMap {
    let mut h = HeaderMap::new();
    inject(&mut h);
    h
}

/// The remote context carried by `headers` (empty when there is none).
pub fn extract(headers: &HeaderMap) -> Context {
    TraceContextPropagator::new().extract(&HeaderExtractor(headers))
}

/// Like [`extract`] for the optional headers of a received message.
pub fn extract_opt(headers: Option<&HeaderMap>) -> Context {
    headers.map(extract).unwrap_or_default()
}

/// Makes `span` a child of the remote context in `headers`, if any.
/// Call it before entering the span.
pub fn set_remote_parent(span: &tracing::Span, headers: Option<&HeaderMap>) {
    let Some(h) = headers else { return };
    let cx = extract(h);
    if opentelemetry::trace::TraceContextExt::has_active_span(&cx) {
        // Fails only when no OpenTelemetry layer is installed, in which case
        // there is no trace to join.
        let _ = span.set_parent(cx);
    }
}

/// An `info` span named `consume` for processing one message of `subject`,
/// parented on the sender's span when the headers carry one.
pub fn consumer_span(subject: &str, headers: Option<&HeaderMap>) -> tracing::Span {
    let span = tracing::info_span!(
        "consume",
        otel.kind = "consumer",
        messaging.system = "nats",
        messaging.destination = subject
    );
    set_remote_parent(&span, headers);
    span
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanContext, TraceContextExt, TraceFlags, TraceState};
    use opentelemetry::trace::{SpanId, TraceId};

    #[test]
    fn round_trips_through_headers() {
        let sc = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let cx = Context::new().with_remote_span_context(sc.clone());
        let mut h = HeaderMap::new();
        inject_context(&cx, &mut h);
        assert_eq!(
            h.get("traceparent").map(|v| v.as_str()),
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        );
        let back = extract(&h);
        assert_eq!(back.span().span_context().trace_id(), sc.trace_id());
        assert_eq!(back.span().span_context().span_id(), sc.span_id());
        assert!(!extract(&HeaderMap::new()).has_active_span());
    }
}
