//! Publishing envelopes that must not duplicate (`Nats-Msg-Id`), and the
//! alert cards people see on `caucus.alerts.<severity>`.

use async_nats::jetstream;
use async_nats::HeaderMap;
use serde_json::{Map, Value};

use caucus_shared::envelope::{Envelope, Priority};
use caucus_shared::error::BoxError;
use caucus_shared::messages::Alert;
use caucus_shared::nats::trace;

/// Name the coordinator uses as `from_agent`.
pub const FROM: &str = "coordinator";

/// Publishes `env` on `subject` with `msg_id` and waits for the stream's
/// ack; the message carries the current span's trace context.
pub async fn publish(
    js: &jetstream::Context,
    subject: String,
    env: &Envelope,
    msg_id: &str,
) -> Result<(), PublishError> {
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let cx = tracing::Span::current().context();
    publish_in(js, subject, env, msg_id, &cx).await
}

/// Like [`publish`], in the trace of `cx` (e.g. a failed task's span, for
/// a failure event sent later from the outbox).
pub async fn publish_in(
    js: &jetstream::Context,
    subject: String,
    env: &Envelope,
    msg_id: &str,
    cx: &opentelemetry::Context,
) -> Result<(), PublishError> {
    let mut headers = HeaderMap::new();
    headers.insert("Nats-Msg-Id", msg_id);
    trace::inject_context(cx, &mut headers);
    let failed = |e: BoxError| PublishError {
        subject: subject.clone(),
        source: e,
    };
    js.publish_with_headers(subject.clone(), headers, env.to_bytes())
        .await
        .map_err(|e| failed(e.into()))?
        .await
        .map_err(|e| failed(e.into()))?;
    Ok(())
}

/// A publish JetStream did not confirm.
#[derive(Debug, thiserror::Error)]
#[error("publish {subject}: {source}")]
pub struct PublishError {
    /// Where it was published.
    pub subject: String,
    /// The JetStream error.
    #[source]
    pub source: BoxError,
}

/// An alert envelope: `event_type` plus free fields.
pub fn alert(event_type: &str, severity: &str, fields: Value) -> Envelope {
    let extra: Map<String, Value> = match fields {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let mut extra = extra;
    extra.insert("severity".into(), Value::String(severity.into()));
    let content = Alert {
        event_type: Some(event_type.into()),
        extra,
        ..Alert::default()
    };
    let priority = match severity {
        "critical" => Priority::Critical,
        "warning" => Priority::High,
        _ => Priority::Normal,
    };
    Envelope::with_content(FROM, &content)
        .expect("alert content without confidence is valid")
        .with_priority(priority)
}
