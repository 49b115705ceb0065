//! caucus coordinator.
pub mod engine;
pub mod workflow;
