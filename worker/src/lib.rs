//! caucus worker.
