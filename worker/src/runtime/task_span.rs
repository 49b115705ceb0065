//! The `task` span: one per attempt this worker runs, a child of the
//! coordinator's `dispatch` span (whose context the dispatch message
//! carries in its `traceparent` header), so the attempt lands in its
//! workflow's trace. Everything the slot publishes for the attempt is sent
//! inside it and carries its context; handlers hand it on to agents.

use async_nats::HeaderMap;

use caucus_shared::nats::trace;
use caucus_shared::task::TaskDispatch;

/// The span of running `task` on `worker_id`, parented on the dispatch
/// message's `headers` when they carry a trace context.
pub(crate) fn task_span(
    task: &TaskDispatch,
    worker_id: &str,
    headers: Option<&HeaderMap>,
) -> tracing::Span {
    let span = tracing::info_span!(
        target: trace::SPAN_TARGET,
        "task",
        otel.kind = "consumer",
        caucus.task_id = task.task_id.as_str(),
        caucus.workflow_id = task.workflow_id.as_str(),
        caucus.item = task.item.as_str(),
        caucus.stage = task.stage.as_str(),
        caucus.agent_type = task.agent_type.as_str(),
        caucus.attempt = i64::from(task.attempt),
        caucus.worker_id = worker_id,
    );
    trace::set_remote_parent(&span, headers);
    span
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::TraceContextExt;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    fn task() -> TaskDispatch {
        serde_json::from_value(serde_json::json!({
            "task_id": "wf/valuation", "workflow_id": "wf", "item": "AAPL", "pipeline": "p",
            "stage": "valuation", "agent_type": "valuation", "attempt": 2,
            "dispatched_at": "2025-11-16T10:30:00Z"
        }))
        .unwrap()
    }

    #[test]
    fn the_task_span_joins_the_dispatch_trace() {
        crate::test_trace::init();
        let mut h = HeaderMap::new();
        h.insert(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        );
        let span = task_span(&task(), "w1", Some(&h));
        let cx = span.context();
        let sc = cx.span().span_context().clone();
        assert_eq!(
            sc.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_ne!(sc.span_id().to_string(), "00f067aa0ba902b7", "its own span");
        // What the slot publishes inside it carries its context.
        let sent = span.in_scope(trace::headers);
        let tp = sent.get("traceparent").map(|v| v.as_str().to_string());
        assert_eq!(
            tp,
            Some(format!(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01",
                sc.span_id()
            ))
        );
    }

    #[test]
    fn without_a_dispatch_context_the_task_starts_a_trace() {
        crate::test_trace::init();
        let span = task_span(&task(), "w1", None);
        assert!(span.context().span().span_context().is_valid());
    }
}
