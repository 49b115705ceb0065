//! Credibility data: track records and their context, scores with every
//! factor, and the level-2 assessment of a debate's two agents.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};

use super::side::Side;

/// The analysis context of a record or of a debate (seed: sector, metric
/// type, time horizon, company size, growth stage). Unset dimensions do not
/// count when matching.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Context {
    /// Sector, e.g. `Technology`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sector: Option<String>,
    /// Metric type, e.g. `operating_margin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// Time horizon, e.g. `1y`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizon: Option<String>,
    /// Company size, e.g. `large_cap`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// Growth stage, e.g. `mature`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
}

impl Context {
    fn dims(&self) -> [&Option<String>; 5] {
        [
            &self.sector,
            &self.metric,
            &self.horizon,
            &self.size,
            &self.stage,
        ]
    }

    /// Number of dimensions set.
    pub fn len(&self) -> usize {
        self.dims().iter().filter(|d| d.is_some()).count()
    }

    /// True when no dimension is set (every record matches).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Share of `query`'s set dimensions this context matches (case-insensitive);
    /// 1.0 when `query` sets none.
    pub fn match_score(&self, query: &Context) -> f64 {
        let asked = query.len();
        if asked == 0 {
            return 1.0;
        }
        let hit = self
            .dims()
            .iter()
            .zip(query.dims())
            .filter(|(mine, want)| match (mine, want) {
                (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                _ => false,
            })
            .count();
        hit as f64 / asked as f64
    }
}

/// One outcome in an agent's track record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrackRecord {
    /// The agent.
    pub agent: String,
    /// How right the agent turned out to be, 0..=1 (1 = correct, 0 = wrong;
    /// `true`/`false` are accepted on input).
    #[serde(deserialize_with = "outcome")]
    pub outcome: f64,
    /// When the outcome was recorded.
    pub at: DateTime<Utc>,
    /// Analysis context of the position.
    #[serde(default)]
    pub context: Context,
    /// Market regime at the time, e.g. `BULL_LOW_RATES`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regime: Option<String>,
    /// True when a human overrode the agent's position.
    #[serde(default)]
    pub overridden: bool,
}

fn outcome<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Bool(bool),
        Num(f64),
    }
    Ok(match Raw::deserialize(d)? {
        Raw::Bool(b) => f64::from(u8::from(b)),
        Raw::Num(n) => n,
    })
}

/// What a score is computed for.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CredibilityQuery {
    /// The debate's context; records matching it are "similar".
    #[serde(default)]
    pub context: Context,
    /// The current market regime (none: no regime adjustment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regime: Option<String>,
}

/// Regime-specific part of a score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegimeFactor {
    /// The regime.
    pub regime: String,
    /// Records taken in that regime.
    pub samples: u64,
    /// Accuracy in that regime (none without samples).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<f64>,
    /// `70/30` (enough samples) or `30/70`.
    pub weighting: String,
    /// The regime-adjusted accuracy.
    pub adjustment: f64,
    /// Multiplier applied to the score (`adjustment / overall`).
    pub factor: f64,
}

/// Trend part of a score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrendFactor {
    /// The fitted trend.
    pub trend: Trend,
    /// True when R² is above the threshold, so the trend was applied.
    pub significant: bool,
    /// Accuracy extrapolated over the horizon (0..=1).
    pub extrapolated: f64,
    /// Multiplier applied to the score (1 when not significant).
    pub factor: f64,
}

/// One agent's credibility with every factor, for documentation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CredibilityScore {
    /// The agent.
    pub agent: String,
    /// Comprehensive credibility, 0..=1.
    pub score: f64,
    /// Wilson interval of `score` over `sample_size`.
    pub interval: Interval,
    /// Simple credibility (overall accuracy × temporal weight), 0..=1.
    pub simple: f64,
    /// Wilson interval of `simple` over `sample_size`.
    pub simple_interval: Interval,
    /// Records in similar context (the L2 data-point count).
    pub sample_size: u64,
    /// All records of the agent.
    pub total_records: u64,
    /// Mean outcome over all records.
    pub overall_accuracy: f64,
    /// Mean outcome over similar-context records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_accuracy: Option<f64>,
    /// Mean context match of all records (context match quality), 0..=1.
    pub context_match: f64,
    /// Weight given to the context accuracy (0 without enough data).
    pub context_weight: f64,
    /// Context-weighted base accuracy.
    pub base_accuracy: f64,
    /// Mean temporal decay weight, 0..=1.
    pub temporal_weight: f64,
    /// Regime adjustment, when a regime was asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub regime: Option<RegimeFactor>,
    /// Trend, when there are enough records to fit one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trend: Option<TrendFactor>,
    /// Share of records a human overrode.
    pub override_rate: f64,
    /// 1.00, 0.85 (> 20 %) or 0.70 (> 40 %).
    pub override_penalty: f64,
}

/// A Wilson score interval around a proportion.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Lower bound, 0..=1.
    pub lower: f64,
    /// Upper bound, 0..=1.
    pub upper: f64,
    /// Half the width: the "confidence interval" the L2 threshold adds up
    /// (`max(0.25, CI_A + CI_B)`).
    pub half_width: f64,
}

/// A fitted trend.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Trend {
    /// Accuracy change per year.
    pub slope_per_year: f64,
    /// Coefficient of determination of the fit, 0..=1.
    pub r2: f64,
    /// Rolling-accuracy points the line was fitted to.
    pub points: usize,
}

/// Both agents' credibility and the verdict of the numbers. Whether the
/// debate may be auto-resolved also depends on its priority (never for
/// critical-path debates, except on expert-queue overflow); that rule lives
/// in the debate state machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct L2Assessment {
    /// The challenger's score (none when it could not be computed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub challenger: Option<CredibilityScore>,
    /// The challenged agent's score.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub challenged: Option<CredibilityScore>,
    /// `|A − B|`.
    pub differential: f64,
    /// `max(min_differential, CI_A + CI_B)`.
    pub required: f64,
    /// Both agents have at least `min_data_points` records in similar context.
    pub sufficient_data: bool,
    /// Sufficient data and `differential > required`.
    pub clear: bool,
    /// The more credible side (ties: none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub favoured: Option<Side>,
    /// The reasoning in one sentence.
    pub reason: String,
}

impl L2Assessment {
    /// An assessment that cannot resolve anything (e.g. the track records
    /// could not be read before the mediation deadline).
    pub fn unavailable(reason: impl Into<String>) -> Self {
        L2Assessment {
            challenger: None,
            challenged: None,
            differential: 0.0,
            required: 1.0,
            sufficient_data: false,
            clear: false,
            favoured: None,
            reason: reason.into(),
        }
    }

    /// The favoured side's score.
    pub fn favoured_score(&self) -> Option<&CredibilityScore> {
        match self.favoured? {
            Side::Challenger => self.challenger.as_ref(),
            Side::Challenged => self.challenged.as_ref(),
        }
    }
}
