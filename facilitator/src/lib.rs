//! caucus facilitator: structured debates between agents.
//!
//! - [`credibility`]: pure credibility engine (track records → scores).
//! - [`debate`]: pure debate state machine (5-level escalation, routing,
//!   conservative default, resolution records).
//! - [`impact`]: downstream impact of overriding a provisional decision.
//! - [`metrics`]: the facilitator's Prometheus / OTLP instruments.
//! - [`service`]: the NATS/Redis process around them (`caucus-facilitator`).
pub mod credibility;
pub mod debate;
pub mod impact;
pub mod metrics;
pub mod service;
pub mod side;

pub use side::Side;
