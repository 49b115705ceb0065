//! NATS plumbing: connecting, stream/consumer/KV topology, the dead-letter
//! queue, the request/reply control API and trace headers.

pub mod admin;
pub mod api;
pub mod bind;
pub mod buckets;
pub(crate) mod connect;
pub mod consume;
pub mod consumers;
pub mod dlq;
pub mod elections;
pub mod role;
pub mod stored;
pub mod topology;
pub mod trace;

pub use crate::api::server::{api_request, ApiError, ApiServer};
pub use admin::ensure_task_consumer;
pub use connect::{connect, redacted_urls, round_trip};
pub use dlq::{decode_or_dead_letter, Dlq, DlqReason};
pub use elections::through_elections;
pub use topology::{ensure_kv, ensure_streams};
