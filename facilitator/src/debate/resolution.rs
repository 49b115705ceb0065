//! Resolution records: what every resolved debate documents (seed 001,
//! "Documentation Requirements"): final position, evidence considered,
//! level and method, confidence, impact on the analysis, override-window
//! status; for provisional resolutions also the conservative rationale,
//! alternatives, review deadline and downstream dependencies.

pub use caucus_shared::api::facilitator::{
    OverrideImpact, OverrideStatus, OverrideWindow, ProvisionalDetails, ResolutionRecord,
};

/// Confidence of a level-1 resolution when the surviving position states none.
pub const AGENT_DIRECT_CONFIDENCE: f64 = 0.8;
/// Confidence of a human decision when the chosen position states none.
pub const HUMAN_CONFIDENCE: f64 = 0.9;
/// Confidence of a provisional conservative default: a fallback, not a finding.
pub const PROVISIONAL_CONFIDENCE: f64 = 0.5;
