//! caucus built-in agents: the deterministic agents the worker's `builtin`
//! handler runs. Pure functions of a [`TaskDispatch`] (and, for the
//! analysts, a [`Dataset`]): no NATS, no Redis, no clock. The worker crate
//! is the runtime around them (leases, consumers, handlers).
//!
//! - [`BuiltinAgents`]: the entry point; [`BuiltinAgents::run`] dispatches a
//!   task by agent type (and `params.kind`) to the agent below that answers
//!   it and returns an [`AgentOutput`].
//! - [`analysts`]: the stock-analysis analysts and their data set.
//! - [`research`]: the deep-research agents.
//! - [`macro_agent`]: the `macro` agent that broadcasts regime changes.
//! - [`reviewer`]: the level reviewer (any `level_review` task).
//!
//! [`TaskDispatch`]: caucus_shared::task::TaskDispatch

pub mod analysts;
mod builtin;
pub mod macro_agent;
mod output;
pub mod research;
pub mod reviewer;

pub use analysts::{Dataset, DatasetError, Settings};
pub use builtin::{load_dataset, BuiltinAgents};
pub use output::{AgentMessage, AgentOutput, MessageTarget};

use caucus_shared::task::{ErrorClass, TaskError};

/// A permanent [`TaskError`] of kind `error_type`.
pub(crate) fn permanent(error_type: &str, message: String) -> TaskError {
    TaskError {
        class: ErrorClass::Permanent,
        error_type: error_type.into(),
        message,
        data_source: None,
    }
}
