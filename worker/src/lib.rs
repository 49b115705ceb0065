//! caucus worker: runs the tasks of one or more agent types under
//! cluster-wide capacity leases. The built-in agents themselves live in
//! the `caucus-agents` crate; this crate is their runtime.
//!
//! - [`handler`]: what runs a task (built-in agents, `exec:`, `http:`, no-op).
//! - [`builtin`]: plugs [`caucus_agents::BuiltinAgents`] into the handler.
//! - [`confirmations`]: the answers a completed task owes the senders of the
//!   findings it received.
//! - [`runtime`]: registration, leases, pulling, reporting.
//! - [`messages`]: broadcasts (market regime) and built-in agents' inboxes
//!   (flush requests, debates).
//! - `metrics`: the worker's slot, task and handler figures.

pub mod builtin;
pub mod confirmations;
pub mod handler;
pub mod messages;
mod metrics;
pub mod runtime;
#[cfg(test)]
mod test_trace;
