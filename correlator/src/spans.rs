//! The `correlation` span: one per incident, when its detection goes out.
//!
//! A new root (see [`crate::trace_links`] for why), otel.kind `internal`,
//! with one span link per failed task whose failure is in the incident's
//! window (the `task` spans of the workers, from the failure messages'
//! `traceparent`), up to [`crate::trace_links::MAX_LINKS`]. Attributes:
//! `caucus.correlation_id`, `caucus.root_cause` (the text for people),
//! `caucus.root_cause_kind`, `caucus.count` (items affected),
//! `caucus.failures` (failure events), `caucus.agent_type`,
//! `caucus.error_type`, `caucus.data_source`, `caucus.signature`,
//! `caucus.links`. The detection, first batch trigger and alert cards are
//! published inside it and carry its `traceparent`, so what the
//! coordinator does about the incident can join this trace.

use opentelemetry::trace::SpanContext;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::engine::Correlation;

/// The root cause kind as its wire name (e.g. `quota`).
fn kind_name(c: &Correlation) -> String {
    serde_json::to_value(c.root_cause.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// The `correlation` span of `c`, a root linked to `links`.
pub fn correlation_span(c: &Correlation, links: Vec<SpanContext>) -> Span {
    let span = tracing::info_span!(
        parent: None,
        "correlation",
        caucus.correlation_id = %c.correlation_id,
        caucus.root_cause = %c.root_cause.text,
        caucus.root_cause_kind = %kind_name(c),
        caucus.count = c.items.len() as u64,
        caucus.failures = c.failure_count,
        caucus.agent_type = %c.signature.agent_type,
        caucus.error_type = %c.signature.error_type,
        caucus.data_source = %c.signature.data_source,
        caucus.signature = %c.signature.hash,
        caucus.links = links.len() as u64,
    );
    // Links go on before the span starts (it starts when first entered).
    for l in links {
        span.add_link(l);
    }
    span
}
