//! Declarative pipelines: the spec format (its shape is in
//! [`caucus_shared::pipeline`], the wire contract), its validation, and the built-in
//! pipelines. A pipeline is data (TOML, or JSON inline in API requests); the
//! [`crate::planner`] turns it plus a list of items into a schedule.

mod builtin;
mod graph;
mod level_review;
mod token;
mod validate;

pub use builtin::{builtin, builtin_names};
pub use caucus_shared::pipeline::{
    LevelReviewSpec, PipelineError, PipelineSpec, RetryPolicy, StageKind, StageSpec,
    SPEC_SCHEMA_VERSION,
};
pub use graph::StageGraph;
pub use level_review::LEVEL_REVIEW_INPUT;
pub use token::is_valid_token;
pub use validate::{check_capacity_overrides, validate, validate_graph};
