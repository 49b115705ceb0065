//! caucus facilitator: structured debates between agents.
//!
//! - [`credibility`]: pure credibility engine (track records → scores).
pub mod credibility;
pub mod side;

pub use side::Side;
