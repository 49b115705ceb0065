//! The log layer: human-readable lines or one JSON object per line, on
//! stderr.
//!
//! JSON lines emitted inside a span carry the OpenTelemetry ids of that
//! span as top-level `trace_id` (32 hex) and `span_id` (16 hex), so a log
//! search can jump to the trace and back. Lines outside any span have
//! neither field.

use std::fmt;
use std::io::IsTerminal;
use std::sync::{Arc, OnceLock};

use opentelemetry::trace::TraceContextExt;
use tracing::dispatcher::WeakDispatch;
use tracing::{Dispatch, Event, Subscriber};
use tracing_subscriber::fmt::format::{Format, Json, JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, MakeWriter};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::config::LogFormat;

/// The formatting layer for `format`.
pub(super) fn layer<S>(format: LogFormat) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    match format {
        LogFormat::Pretty => tracing_subscriber::fmt::layer()
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .boxed(),
        LogFormat::Json => json_layer(std::io::stderr),
    }
}

/// JSON lines to `writer`, with `trace_id` / `span_id` inside spans.
fn json_layer<S, W>(writer: W) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let dispatch = Arc::new(OnceLock::new());
    let inner = tracing_subscriber::fmt::format()
        .json()
        .with_current_span(true)
        .with_span_list(false);
    tracing_subscriber::fmt::layer()
        .json()
        .with_writer(writer)
        .event_format(WithTraceIds {
            inner,
            dispatch: dispatch.clone(),
        })
        .and_then(DispatchGrabber(dispatch))
        .boxed()
}

/// Remembers the dispatcher the layers were registered with: the
/// OpenTelemetry span data is read through it, and inside an event the
/// thread's current dispatcher is not reachable (tracing hands nested
/// look-ups a no-op dispatcher while one is being dispatched to).
struct DispatchGrabber(Arc<OnceLock<WeakDispatch>>);

impl<S: Subscriber> Layer<S> for DispatchGrabber {
    fn on_register_dispatch(&self, subscriber: &Dispatch) {
        // A layer is registered with exactly one dispatcher.
        let _ = self.0.set(subscriber.downgrade());
    }
}

/// The JSON event format, with the OpenTelemetry ids of the event's span
/// added at the top level.
struct WithTraceIds {
    inner: Format<Json>,
    dispatch: Arc<OnceLock<WeakDispatch>>,
}

impl WithTraceIds {
    /// (trace_id, span_id) in hex of the span the event belongs to, when
    /// it has a valid OpenTelemetry span. The span is looked up in the
    /// registry itself, not through this layer's filtered view: spans the
    /// log layer leaves out (`nats::trace::SPAN_TARGET`) still name the
    /// trace of what is logged inside them.
    fn ids(&self, event: &Event<'_>) -> Option<(String, String)> {
        let dispatch = self.dispatch.get()?.upgrade()?;
        let id = match event.parent() {
            Some(parent) => parent.clone(),
            None if event.is_contextual() => dispatch.current_span().id()?.clone(),
            None => return None,
        };
        let cx = tracing_opentelemetry::get_otel_context(&id, &dispatch)?;
        let otel = cx.span();
        let sc = otel.span_context();
        sc.is_valid()
            .then(|| (sc.trace_id().to_string(), sc.span_id().to_string()))
    }
}

impl<S> FormatEvent<S, JsonFields> for WithTraceIds
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let Some((trace_id, span_id)) = self.ids(event) else {
            return self.inner.format_event(ctx, writer, event);
        };
        let mut line = String::new();
        self.inner
            .format_event(ctx, Writer::new(&mut line), event)?;
        // The JSON format writes one object per event, so the ids go right
        // after its opening brace (hex ids need no escaping).
        match line.strip_prefix('{') {
            Some(rest) => write!(
                writer,
                "{{\"trace_id\":\"{trace_id}\",\"span_id\":\"{span_id}\",{rest}"
            ),
            None => writer.write_str(&line),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::sync::Mutex;

    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::SdkTracerProvider;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    use tracing_subscriber::layer::SubscriberExt;

    /// Collects everything written, for reading the lines back.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'w self) -> Self::Writer {
            self.clone()
        }
    }

    impl Buffer {
        fn lines(&self) -> Vec<serde_json::Value> {
            let bytes = self.0.lock().unwrap().clone();
            String::from_utf8(bytes)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
                .collect()
        }
    }

    #[test]
    fn json_lines_inside_spans_carry_the_otel_ids_and_others_do_not() {
        let buf = Buffer::default();
        let provider = SdkTracerProvider::builder().build();
        // Same layer order as `init`: formatting before OpenTelemetry.
        let subscriber = tracing_subscriber::registry()
            .with(json_layer(buf.clone()))
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        let (outer_ids, inner_ids) = tracing::subscriber::with_default(subscriber, || {
            tracing::info!("before any span");
            let outer = tracing::info_span!("outer", item = "AAPL");
            let inner = tracing::info_span!(parent: &outer, "inner");
            outer.in_scope(|| tracing::info!(n = 1, "in outer"));
            inner.in_scope(|| tracing::warn!("in inner"));
            tracing::info!(parent: &inner, "explicit parent");
            tracing::info!("after the spans");
            let ids = |s: &tracing::Span| {
                let cx = s.context();
                let sc = cx.span().span_context().clone();
                (sc.trace_id().to_string(), sc.span_id().to_string())
            };
            (ids(&outer), ids(&inner))
        });
        let lines = buf.lines();
        assert_eq!(lines.len(), 5, "{lines:?}");
        let ids = |l: &serde_json::Value| {
            (
                l.get("trace_id").map(|v| v.as_str().unwrap().to_string()),
                l.get("span_id").map(|v| v.as_str().unwrap().to_string()),
            )
        };
        for outside in [&lines[0], &lines[4]] {
            assert_eq!(ids(outside), (None, None), "{outside}");
        }
        assert_eq!(outer_ids.0.len(), 32);
        assert_eq!(outer_ids.1.len(), 16);
        assert_eq!(outer_ids.0, inner_ids.0, "one trace");
        assert_ne!(outer_ids.1, inner_ids.1);
        let some = |(t, s): &(String, String)| (Some(t.clone()), Some(s.clone()));
        assert_eq!(ids(&lines[1]), some(&outer_ids));
        assert_eq!(ids(&lines[2]), some(&inner_ids));
        assert_eq!(ids(&lines[3]), some(&inner_ids));
        // The rest of the JSON format is unchanged.
        assert_eq!(lines[1]["fields"]["message"], "in outer");
        assert_eq!(lines[1]["span"]["item"], "AAPL");
        assert_eq!(lines[2]["level"], "WARN");
    }

    /// A span the log filter leaves out (the trace-only target) is built
    /// for OpenTelemetry alone: a line logged inside it shows no span of
    /// its own, yet carries that span's ids.
    #[test]
    fn lines_inside_a_trace_only_span_carry_its_ids() {
        let buf = Buffer::default();
        let provider = SdkTracerProvider::builder().build();
        let log_filter = super::super::env_filter(&crate::config::TelemetryConfig::default())
            .expect("the default log filter parses");
        let subscriber = tracing_subscriber::registry()
            .with(json_layer(buf.clone()).with_filter(log_filter))
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
        let task_ids = tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(
                target: crate::nats::trace::SPAN_TARGET,
                "task",
                caucus.task_id = "wf/valuation"
            );
            // `error`: logged whatever level `RUST_LOG` may set for the run.
            span.in_scope(|| tracing::error!(task_id = "wf/valuation", "inside"));
            let cx = span.context();
            let sc = cx.span().span_context().clone();
            (sc.trace_id().to_string(), sc.span_id().to_string())
        });
        let lines = buf.lines();
        assert_eq!(lines.len(), 1, "{lines:?}");
        let line = &lines[0];
        assert_eq!(line["trace_id"], task_ids.0.as_str(), "{line}");
        assert_eq!(line["span_id"], task_ids.1.as_str(), "{line}");
        assert!(
            line.get("span").is_none(),
            "the log layer never saw the span: {line}"
        );
        assert_eq!(line["fields"]["task_id"], "wf/valuation");
    }
}
