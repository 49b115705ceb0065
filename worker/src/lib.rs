//! caucus worker.
pub mod handler;
