//! Dead letters: anything that cannot be processed goes to
//! `caucus.dlq.<original subject>` with the reason in headers, and the
//! original is acked so one bad message never blocks a consumer.

use std::fmt::Display;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, AckKind};
use async_nats::HeaderMap;
use bytes::Bytes;

use crate::subjects::Subjects;
use crate::Error;

/// Header naming the machine-readable reason, e.g. `too_large`.
pub const HEADER_CODE: &str = "Caucus-Dlq-Code";
/// Header with the specific, human-readable reason.
pub const HEADER_ERROR: &str = "Caucus-Dlq-Error";
/// Header with the subject the message was first published on.
pub const HEADER_SUBJECT: &str = "Caucus-Dlq-Subject";

/// Code of a body larger than the configured limit.
pub const CODE_TOO_LARGE: &str = "too_large";
/// Code of a body that is not valid JSON for the expected type.
pub const CODE_INVALID_JSON: &str = "invalid_json";

/// Longest reason kept in a header (headers are not a place for essays).
const MAX_REASON: usize = 1024;

/// When dead-lettering itself fails, the original is redelivered after this.
const RETRY_DELAY: Duration = Duration::from_secs(5);

/// `caucus_dlq_messages_total{subject}`: dead letters published, by the
/// family of the subject they arrived on.
fn dead_letters() -> &'static opentelemetry::metrics::Counter<u64> {
    static C: std::sync::OnceLock<opentelemetry::metrics::Counter<u64>> =
        std::sync::OnceLock::new();
    C.get_or_init(|| {
        crate::telemetry::metrics::meter()
            .u64_counter("caucus_dlq_messages")
            .with_description("Messages dead-lettered, by the subject family they arrived on")
            .build()
    })
}

/// The prefix and first token of `subject` (`caucus.findings.AAPL.x` →
/// `caucus.findings`): a label with a bounded number of values, where the
/// whole subject would carry item names.
fn subject_family(subject: &str) -> String {
    subject.splitn(3, '.').take(2).collect::<Vec<_>>().join(".")
}

/// A decode failure that can be dead-lettered: a short code plus the
/// specific message (its `Display`).
pub trait DlqReason: Display {
    /// Machine-readable reason, one token such as `invalid_json`.
    fn code(&self) -> &str;
}

impl DlqReason for serde_json::Error {
    fn code(&self) -> &str {
        CODE_INVALID_JSON
    }
}

/// Publishes dead letters to the DLQ stream and counts them.
#[derive(Clone)]
pub struct Dlq {
    js: jetstream::Context,
    subjects: Subjects,
    count: Arc<AtomicU64>,
}

impl std::fmt::Debug for Dlq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dlq")
            .field("prefix", &self.subjects.prefix())
            .field("count", &self.count())
            .finish()
    }
}

impl Dlq {
    /// A DLQ publisher under the subjects' prefix.
    pub fn new(js: jetstream::Context, subjects: Subjects) -> Self {
        Dlq {
            js,
            subjects,
            count: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Dead letters published by this process (all clones share it).
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Publishes `payload` unchanged to `caucus.dlq.<original_subject>` with
    /// the reason headers, and waits for the stream's ack.
    pub async fn dead_letter(
        &self,
        original_subject: &str,
        payload: Bytes,
        code: &str,
        reason: &str,
    ) -> Result<(), Error> {
        self.publish(original_subject, payload, code, reason, HeaderMap::new())
            .await
    }

    /// Dead-letters a JetStream message. Its `Nats-Msg-Id` is derived from
    /// the original stream and sequence, so a redelivered original is not
    /// dead-lettered twice; its trace headers are kept.
    pub async fn dead_letter_message(
        &self,
        msg: &jetstream::Message,
        code: &str,
        reason: &str,
    ) -> Result<(), Error> {
        let mut headers = HeaderMap::new();
        if let Ok(info) = msg.info() {
            headers.insert(
                "Nats-Msg-Id",
                format!("dlq:{}:{}", info.stream, info.stream_sequence),
            );
        }
        if let Some(orig) = &msg.headers {
            for key in ["traceparent", "tracestate"] {
                if let Some(v) = orig.get(key) {
                    headers.insert(key, v.as_str());
                }
            }
        }
        self.publish(&msg.subject, msg.payload.clone(), code, reason, headers)
            .await
    }

    async fn publish(
        &self,
        original_subject: &str,
        payload: Bytes,
        code: &str,
        reason: &str,
        mut headers: HeaderMap,
    ) -> Result<(), Error> {
        let reason = header_safe(reason);
        headers.insert(HEADER_CODE, header_safe(code).as_str());
        headers.insert(HEADER_ERROR, reason.as_str());
        headers.insert(HEADER_SUBJECT, original_subject);
        let subject = self.subjects.dlq(original_subject);
        self.js
            .publish_with_headers(subject.clone(), headers, payload)
            .await
            .map_err(|e| Error::nats(format!("dead letter to {subject}: {e}")))?
            .await
            .map_err(|e| Error::nats(format!("dead letter to {subject}: {e}")))?;
        self.count.fetch_add(1, Ordering::Relaxed);
        dead_letters().add(
            1,
            &[opentelemetry::KeyValue::new(
                "subject",
                subject_family(original_subject),
            )],
        );
        tracing::warn!(subject = original_subject, code, reason = %reason, "dead-lettered a message");
        Ok(())
    }
}

/// Header values may not hold line breaks; long reasons are cut.
fn header_safe(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if out.len() > MAX_REASON {
        let mut cut = MAX_REASON;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('…');
    }
    out
}

/// Decodes a consumed message, or dead-letters it and acks the original.
///
/// Bodies over `max_bytes` are dead-lettered with [`CODE_TOO_LARGE`] before
/// `decode` sees them; `decode` gets the body and the limit. Returns `None`
/// when the message was dead-lettered (the loop just carries on). If the
/// DLQ publish itself fails, the original is not acked but `nak`ed with a
/// delay, so it comes back later instead of being lost.
pub async fn decode_or_dead_letter<T, E, F>(
    dlq: &Dlq,
    msg: &jetstream::Message,
    max_bytes: usize,
    decode: F,
) -> Option<T>
where
    E: DlqReason,
    F: FnOnce(&[u8], usize) -> Result<T, E>,
{
    let body = msg.payload.as_ref();
    let (code, reason) = if body.len() > max_bytes {
        (
            CODE_TOO_LARGE.to_string(),
            format!("body is {} bytes, the limit is {max_bytes}", body.len()),
        )
    } else {
        match decode(body, max_bytes) {
            Ok(v) => return Some(v),
            Err(e) => (e.code().to_string(), e.to_string()),
        }
    };
    match dlq.dead_letter_message(msg, &code, &reason).await {
        Ok(()) => {
            if let Err(e) = msg.ack().await {
                tracing::warn!(subject = %msg.subject, error = %e, "ack after dead-lettering failed; it will be redelivered and de-duplicated");
            }
        }
        Err(e) => {
            tracing::error!(subject = %msg.subject, error = %e, "cannot dead-letter; will retry");
            let _ = msg.ack_with(AckKind::Nak(Some(RETRY_DELAY))).await;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_made_header_safe() {
        assert_eq!(header_safe("a\r\nb"), "a  b");
        let long = "é".repeat(2000);
        let cut = header_safe(&long);
        assert!(cut.len() <= MAX_REASON + '…'.len_utf8());
        assert!(cut.ends_with('…'));
    }
}
