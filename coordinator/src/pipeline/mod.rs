//! Declarative pipelines: the spec format, its validation, and the built-in
//! pipelines. A pipeline is data (TOML, or JSON inline in API requests); the
//! [`crate::planner`] turns it plus a list of items into a schedule.

mod builtin;
mod error;
mod graph;
mod level_review;
mod spec;
mod validate;

pub use builtin::{builtin, builtin_names};
pub use error::PipelineError;
pub use graph::StageGraph;
pub use level_review::{LevelReviewSpec, LEVEL_REVIEW_INPUT};
pub use spec::{PipelineSpec, RetryPolicy, StageKind, StageSpec, SPEC_SCHEMA_VERSION};
pub use validate::{check_capacity_overrides, is_valid_token, validate, validate_graph};
