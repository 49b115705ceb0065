//! The credibility engine: pure functions from track records to scores.
//!
//! - [`TrackRecord`]: one outcome with its context (sector, metric, horizon,
//!   size, stage), market regime and whether a human overrode it.
//! - [`score`]: simple credibility (base accuracy × temporal weight, Wilson
//!   interval) and the comprehensive score (context match, regime, trend,
//!   override penalty), each factor kept for the resolution record.
//! - [`assess_pair`]: the level-2 decision input: both scores, the
//!   differential, the dynamic threshold `max(0.25, CI_A + CI_B)`, and
//!   whether the data suffices (≥ 15 points per agent in similar context).
//!
//! No clock reads: every function takes `now`.

mod differential;
mod params;
mod record;
mod score;
pub mod trend;
mod wilson;

pub use differential::{assess_pair, L2Assessment};
pub use params::CredibilityParams;
pub use record::{validate, Context, TrackRecord};
pub use score::{score, CredibilityQuery, CredibilityScore, RegimeFactor, TrendFactor};
pub use wilson::{wilson, Interval};

/// Errors of the credibility engine.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CredibilityError {
    /// A track record cannot be scored.
    #[error("track record of `{agent}`: {reason}")]
    InvalidRecord {
        /// The agent of the record.
        agent: String,
        /// What is wrong.
        reason: String,
    },
    /// A parameter is out of range.
    #[error("credibility parameters: {0}")]
    InvalidParams(String),
}
