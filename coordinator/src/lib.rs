//! caucus coordinator.
