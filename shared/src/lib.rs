//! caucus-shared: everything two caucus processes must agree on.
//!
//! - [`envelope`], [`messages`], [`task`], [`inbound`]: the wire contract
//!   (JSON bodies).
//! - [`api`]: the control API's operations, request and reply types, and
//!   the typed client.
//! - [`pipeline`]: the pipeline spec's shape (TOML, or JSON inline in requests).
//! - [`subjects`]: subject builders and token encoding.
//! - [`nats`]: connecting, stream/consumer/KV topology, the DLQ, trace headers.
//! - [`redis`]: capacity semaphores, locks and bounded counters as Lua scripts.
//! - [`scrub`]: taking credentials out of error texts before they are stored.
//! - [`config`], [`telemetry`], [`clock`], [`service`]: the process scaffolding
//!   every binary shares.

pub mod api;
pub mod auth;
pub mod clock;
pub mod config;
pub mod envelope;
pub mod error;
pub mod health;
pub mod inbound;
pub mod messages;
pub mod nats;
pub mod outputs;
pub mod partition;
pub mod pipeline;
pub mod redis;
pub mod scrub;
pub mod service;
pub mod subjects;
pub mod task;
pub mod telemetry;

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::Config;
pub use error::{Error, Result};
