//! What a stored JetStream message says about itself: when it was stored,
//! and a stable id for an envelope sent without one.

use async_nats::jetstream;
use chrono::{DateTime, Utc};

use crate::envelope::{DecodeError, Envelope};

/// When JetStream stored `msg` (now, when the message carries no info).
pub fn stored_at(msg: &jetstream::Message) -> DateTime<Utc> {
    msg.info()
        .ok()
        .map(|i| crate::clock::to_chrono(i.published))
        .unwrap_or_else(Utc::now)
}

/// A stable id for `msg`: its `Nats-Msg-Id` when the publisher set one,
/// else `<stream>:<sequence>`; every reader of the stored message derives
/// the same one.
pub fn stored_id(msg: &jetstream::Message) -> String {
    if let Some(id) = msg.headers.as_ref().and_then(|h| h.get("Nats-Msg-Id")) {
        return id.as_str().to_string();
    }
    match msg.info() {
        Ok(i) => format!("{}:{}", i.stream, i.stream_sequence),
        Err(_) => crate::envelope::new_message_id(),
    }
}

/// Decodes a stored envelope; one sent without an `id` gets [`stored_id`].
pub fn decode_stored(msg: &jetstream::Message, max_bytes: usize) -> Result<Envelope, DecodeError> {
    Envelope::decode_with_id(&msg.payload, max_bytes, || stored_id(msg))
}
