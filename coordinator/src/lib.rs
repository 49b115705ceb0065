//! caucus coordinator.

pub mod pipeline;
pub mod planner;
