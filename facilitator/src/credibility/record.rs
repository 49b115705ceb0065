//! One tracked outcome of an agent's past position, with the context it was
//! taken in.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer, Serialize};

use super::CredibilityError;

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

impl TrackRecord {
    /// Checks the record can be scored.
    pub fn validate(&self) -> Result<(), CredibilityError> {
        let bad = |reason: String| {
            Err(CredibilityError::InvalidRecord {
                agent: self.agent.clone(),
                reason,
            })
        };
        if self.agent.trim().is_empty() {
            return bad("agent must not be empty".into());
        }
        if !(0.0..=1.0).contains(&self.outcome) {
            return bad(format!(
                "outcome must be within 0..=1, got {}",
                self.outcome
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_match_counts_only_asked_dimensions() {
        let rec = Context {
            sector: Some("Technology".into()),
            metric: Some("operating_margin".into()),
            size: Some("large_cap".into()),
            ..Default::default()
        };
        assert_eq!(rec.match_score(&Context::default()), 1.0);
        let q = Context {
            sector: Some("technology".into()),
            metric: Some("target_price".into()),
            ..Default::default()
        };
        assert_eq!(rec.match_score(&q), 0.5);
    }

    #[test]
    fn outcome_accepts_booleans_and_rejects_out_of_range() {
        let r: TrackRecord = serde_json::from_value(serde_json::json!({
            "agent": "a", "outcome": true, "at": "2025-01-01T00:00:00Z"
        }))
        .unwrap();
        assert_eq!(r.outcome, 1.0);
        let mut bad = r.clone();
        bad.outcome = 1.5;
        let e = bad.validate().unwrap_err().to_string();
        assert!(e.contains("outcome must be within 0..=1"), "{e}");
    }
}
