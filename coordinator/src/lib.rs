//! caucus coordinator.
pub mod workflow;
