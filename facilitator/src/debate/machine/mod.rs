//! The transitions of [`Debate`](super::Debate). Each checks who may send
//! what in which state, updates the record and returns the effects to carry
//! out.

mod decisions;
mod guard;
mod level1;
mod level2;
mod level3;
mod level4;
mod level5;
mod open;
mod resolve;
mod step;
mod tick;

pub use super::resolution::OverrideImpact;
pub use decisions::{GateAction, HumanDecision};
