//! The declarative pipeline spec: its shape and parse errors. A pipeline is
//! data (TOML, or JSON inline in `plan`/`submit` requests), so its shape is
//! part of the wire contract; the coordinator validates, plans and runs it,
//! and the `caucus` CLI checks a `--file` against it before sending.

mod error;
mod level_review;
mod spec;

pub use error::PipelineError;
pub use level_review::LevelReviewSpec;
pub use spec::{PipelineSpec, RetryPolicy, StageKind, StageSpec, SPEC_SCHEMA_VERSION};
