//! The trace context handlers hand on to agents: the current span's (the
//! `task` span's, as handlers run inside it) W3C `traceparent` and
//! `tracestate`, so an agent's own spans join the task's trace.

use caucus_shared::nats::trace;

/// The current span's W3C trace context; `None` fields when there is no
/// span with OpenTelemetry ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TraceContext {
    /// `00-<trace id>-<span id>-<flags>`.
    pub(crate) traceparent: Option<String>,
    /// Vendor entries, when the trace has any.
    pub(crate) tracestate: Option<String>,
}

/// The trace context of the current span.
pub(crate) fn current() -> TraceContext {
    let h = trace::headers();
    let get = |name: &str| {
        h.get(name)
            .map(|v| v.as_str().to_string())
            .filter(|v| !v.is_empty())
    };
    TraceContext {
        traceparent: get("traceparent"),
        tracestate: get("tracestate"),
    }
}
