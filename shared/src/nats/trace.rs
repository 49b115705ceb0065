//! W3C trace context (`traceparent`, `tracestate`) in NATS message headers,
//! so one trace runs coordinator → worker → facilitator across processes.
//!
//! The W3C format is part of the wire contract, so these functions use the
//! TraceContext propagator directly rather than whatever is global.

use async_nats::HeaderMap;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{TraceContextExt, TraceFlags};
use opentelemetry::Context;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The target of the spans that exist for traces alone: `workflow`,
/// `dispatch`, `task` and `gate`, one or more per task. The log layer
/// leaves this target out (`caucus_trace=off` joins the log filter unless
/// the filter names it), so a process that exports no traces builds none
/// of them, and one that does never formats their fields into log state.
/// What is logged inside them names its task itself (`task_id`); JSON lines
/// still carry the span's `trace_id` and `span_id` (docs/OBSERVABILITY.md).
pub const SPAN_TARGET: &str = "caucus_trace";

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

/// The W3C `traceparent` of `cx`'s span and its `tracestate` (`None` when
/// empty), or `None` when `cx` holds no valid span (no OpenTelemetry layer
/// installed). Stored in records so later spans can join the same trace.
pub fn traceparent_of(cx: &Context) -> Option<(String, Option<String>)> {
    let span = cx.span();
    let sc = span.span_context();
    if !sc.is_valid() {
        return None;
    }
    // Version 00; of the flags only `sampled` is defined by W3C.
    let flags = sc.trace_flags() & TraceFlags::SAMPLED;
    let parent = format!(
        "00-{}-{}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        flags.to_u8()
    );
    let state = sc.trace_state().header();
    Some((parent, (!state.is_empty()).then_some(state)))
}

/// The remote context a stored `traceparent` (and `tracestate`) names;
/// empty when `traceparent` does not parse, so a span parented on it
/// starts a trace of its own instead of failing.
pub fn context_from(traceparent: &str, tracestate: Option<&str>) -> Context {
    TraceContextPropagator::new().extract(&Pair(traceparent, tracestate))
}

/// Extractor over a stored traceparent/tracestate pair (no header map).
struct Pair<'a>(&'a str, Option<&'a str>);

impl Extractor for Pair<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        match key {
            "traceparent" => Some(self.0),
            "tracestate" => self.1,
            _ => None,
        }
    }

    fn keys(&self) -> Vec<&str> {
        vec!["traceparent", "tracestate"]
    }
}

/// Makes `span` a child of `cx` when `cx` holds a span; call it before
/// entering `span`.
pub fn set_parent(span: &tracing::Span, cx: Context) {
    if cx.has_active_span() {
        // Fails only when no OpenTelemetry layer is installed, in which case
        // there is no trace to join.
        let _ = span.set_parent(cx);
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
    set_parent(span, extract(h));
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

    #[test]
    fn stored_traceparent_round_trips() {
        let ts = TraceState::from_key_value([("vendor", "x1")]).unwrap();
        let sc = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::SAMPLED,
            false,
            ts,
        );
        let cx = Context::new().with_remote_span_context(sc.clone());
        let (tp, state) = traceparent_of(&cx).expect("a valid span");
        assert_eq!(
            tp,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        );
        assert_eq!(state.as_deref(), Some("vendor=x1"));
        let back = context_from(&tp, state.as_deref());
        let b = back.span().span_context().clone();
        assert_eq!(b.trace_id(), sc.trace_id());
        assert_eq!(b.span_id(), sc.span_id());
        assert!(b.is_sampled() && b.is_remote());
        assert_eq!(b.trace_state().get("vendor"), Some("x1"));
    }

    #[test]
    fn unsampled_and_empty_contexts() {
        let sc = SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap(),
            TraceFlags::default(),
            false,
            TraceState::default(),
        );
        let cx = Context::new().with_remote_span_context(sc);
        let (tp, state) = traceparent_of(&cx).unwrap();
        // Not sampled stays not sampled: the whole workflow follows the
        // root's sampling decision.
        assert!(tp.ends_with("-00"), "{tp}");
        assert_eq!(state, None);
        assert!(!context_from(&tp, None).span().span_context().is_sampled());
        assert_eq!(traceparent_of(&Context::new()), None);
        // Garbage or an all-zero id gives an empty context, not an error.
        assert!(!context_from("nonsense", None).has_active_span());
        assert!(!context_from(
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            None
        )
        .has_active_span());
    }

    #[test]
    fn spans_without_a_layer_have_no_traceparent() {
        // No OpenTelemetry layer in unit tests: nothing to store, and
        // parenting is a no-op rather than a failure.
        let span = tracing::info_span!("x");
        assert_eq!(traceparent_of(&span.context()), None);
        set_parent(&span, Context::new());
    }
}
