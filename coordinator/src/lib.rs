//! caucus coordinator: pipelines → DAGs, planning, dispatch, workflow state.
//!
//! - [`pipeline`]: declarative specs, validation, built-ins.
//! - [`planner`]: critical path and capacity-aware schedule (dry run).
//! - [`workflow`]: the stored record of one item through one pipeline.
//! - [`engine`]: scheduling many workflows within capacity.
//! - [`runtime`]: the process: KV state, events, dispatch, control API.
//! - [`patterns`]: the six coordination patterns over real workers.
//! - [`research`]: the deep-research phases, gates, isolation and audit.

pub mod engine;
mod hooks;
pub mod patterns;
pub mod pipeline;
pub mod planner;
pub mod research;
pub mod runtime;
pub mod workflow;
