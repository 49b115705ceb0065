//! caucus correlator: failure signatures, time-window correlation, root cause.

pub mod engine;
pub mod event;
pub mod normalize;
pub mod root_cause;
pub mod signature;
pub mod window;
