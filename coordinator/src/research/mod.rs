//! The deep-research pipeline runtime (seed 004, "Research Coordination
//! Rules"; DESIGN.md §4): phases, quality gates, stream isolation, time
//! limits, checkpoints, per-stream signals and the audit trail, on the
//! same engine as every other pipeline. See docs/RESEARCH.md.
//!
//! - [`phase`]: the state machine.
//! - [`gates`]: the quality gates and their thresholds.
//! - [`streams`]: what the discovery gate counts per stream.
//! - [`isolation`]: key spaces and refused writes.
//! - [`audit`]: `timestamp | agent | action | result`.
//! - [`state`]: what a run keeps on its workflow record.
//! - [`spec`]: recognising a research pipeline, attaching the state.
//! - `hook`: the rules applied on task events and ticks (pure).
//! - [`runtime`]: the coordinator side: research bucket, alerts,
//!   checkpoints, the `audit` API.

pub mod audit;
pub mod gates;
mod hook;
mod record_hook;
pub(crate) use record_hook::ResearchHook;
pub mod isolation;
pub mod phase;
pub mod runtime;
pub mod spec;
pub mod state;
pub mod streams;

pub use audit::AuditEntry;
pub use gates::{GateDecision, Verdict};
pub use phase::{IllegalPhaseTransition, Phase};
pub use spec::{attach, ResearchSpecError};
pub use state::{ResearchSettings, ResearchState, StreamState, StreamStatus};

#[cfg(test)]
mod gates_tests;
#[cfg(test)]
mod hook_tests;
