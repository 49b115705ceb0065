//! caucus worker: runs the tasks of one or more agent types under
//! cluster-wide capacity leases.
//!
//! - [`handler`]: what runs a task (built-in analysts, `exec:`, `http:`, no-op).
//! - [`analysts`]: the built-in deterministic analysts and their data set.
//! - [`research`]: the built-in deterministic research agents.
//! - [`reviewer`]: the built-in level reviewer (any `level_review` task).
//! - [`runtime`]: registration, leases, pulling, reporting.
//! - [`messages`]: broadcasts (market regime) and built-in agents' inboxes
//!   (flush requests, debates).
//! - [`macro_agent`]: the built-in `macro` agent that broadcasts regime changes.

pub mod analysts;
pub mod builtin;
pub mod handler;
pub mod macro_agent;
pub mod messages;
pub mod research;
pub mod reviewer;
pub mod runtime;
