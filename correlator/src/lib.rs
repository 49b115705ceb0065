//! caucus correlator: failure signatures, time-window correlation, root
//! cause (the pure library: [`engine`] and friends), and the
//! `caucus-correlator` service around it ([`service`]: consume failures,
//! store correlation records, publish detections, batch triggers and alert
//! cards, replay on start).

pub mod alerts;
pub mod effects;
pub mod engine;
pub mod event;
pub mod metrics;
pub mod normalize;
pub mod outbox;
pub mod processor;
pub mod root_cause;
pub mod service;
pub mod signature;
pub mod spans;
pub mod store;
pub mod trace_links;
pub mod window;
pub mod wire;
