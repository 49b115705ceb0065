//! The numbers of the credibility model, taken from `[facilitator]` config.

use std::time::Duration;

use caucus_shared::config::FacilitatorConfig;
use serde::{Deserialize, Serialize};

use super::CredibilityError;

const YEAR_SECS: f64 = 31_557_600.0;

fn years(d: Duration) -> f64 {
    d.as_secs_f64() / YEAR_SECS
}

/// Parameters of [`super::score`] and [`super::assess_pair`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CredibilityParams {
    /// Temporal decay half-life in years (seed: 2).
    pub half_life_years: f64,
    /// Wilson z (seed: 1.96).
    pub z: f64,
    /// Regime samples for the 70/30 weighting (seed: 50).
    pub regime_min_samples: u32,
    /// Minimum R² for a trend to count (seed: 0.3).
    pub trend_min_r2: f64,
    /// Extrapolation horizon in years (seed: 0.5).
    pub trend_horizon_years: f64,
    /// Records per rolling-accuracy window.
    pub trend_window: u32,
    /// Share of the asked context a record must match to be "similar".
    pub context_match_threshold: f64,
    /// Weight of context-specific accuracy when the context has enough data.
    pub context_weight: f64,
    /// Data points per agent in similar context for L2 (seed: 15).
    pub min_data_points: u32,
    /// Floor of the L2 differential (seed: 0.25).
    pub min_differential: f64,
}

impl Default for CredibilityParams {
    fn default() -> Self {
        CredibilityParams::from_config(&FacilitatorConfig::default())
    }
}

impl CredibilityParams {
    /// The parameters `cfg` configures.
    pub fn from_config(cfg: &FacilitatorConfig) -> Self {
        CredibilityParams {
            half_life_years: years(cfg.credibility_half_life),
            z: cfg.wilson_z,
            regime_min_samples: cfg.regime_min_samples,
            trend_min_r2: cfg.trend_min_r2,
            trend_horizon_years: years(cfg.trend_horizon),
            trend_window: cfg.trend_window,
            context_match_threshold: cfg.context_match_threshold,
            context_weight: cfg.context_weight,
            min_data_points: cfg.min_data_points,
            min_differential: cfg.min_differential,
        }
    }

    /// Rejects values the formulas cannot use.
    pub fn validate(&self) -> Result<(), CredibilityError> {
        let bad = |field: &str, reason: &str| {
            Err(CredibilityError::InvalidParams(format!("{field} {reason}")))
        };
        if !(self.half_life_years.is_finite() && self.half_life_years > 0.0) {
            return bad("credibility_half_life", "must be > 0");
        }
        if !(self.z.is_finite() && self.z > 0.0) {
            return bad("wilson_z", "must be > 0");
        }
        for (field, v) in [
            ("trend_min_r2", self.trend_min_r2),
            ("context_match_threshold", self.context_match_threshold),
            ("context_weight", self.context_weight),
            ("min_differential", self.min_differential),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return bad(field, "must be within 0..=1");
            }
        }
        if !(self.trend_horizon_years.is_finite() && self.trend_horizon_years >= 0.0) {
            return bad("trend_horizon", "must be >= 0");
        }
        if self.trend_window == 0 {
            return bad("trend_window", "must be > 0");
        }
        Ok(())
    }
}
