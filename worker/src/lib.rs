//! caucus worker: runs the tasks of one or more agent types under
//! cluster-wide capacity leases.
//!
//! - [`handler`]: what runs a task (built-in analysts, `exec:`, `http:`, no-op).
//! - [`analysts`]: the built-in deterministic analysts and their data set.
//! - [`research`]: the built-in deterministic research agents.
//! - [`reviewer`]: the built-in level reviewer (any `level_review` task).
//! - [`runtime`]: registration, leases, pulling, reporting.

pub mod analysts;
pub mod builtin;
pub mod handler;
pub mod research;
pub mod reviewer;
pub mod runtime;
