//! caucus worker.
pub mod analysts;
