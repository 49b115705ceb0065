//! Simple and comprehensive credibility of one agent.
//!
//! Simple (seed phase 2): `overall accuracy × temporal weight`, where the
//! temporal weight is the mean of `0.5^(age / half-life)` over the records:
//! an agent whose record is two half-lives old keeps a quarter of its
//! credibility, and making the same outcomes more recent never lowers it.
//!
//! Comprehensive (seed phase 4):
//! `base × temporal × regime factor × trend factor × override penalty`,
//! clamped to 0..=1, where
//! - base = context accuracy × 0.3 + overall × 0.7 when at least
//!   `min_data_points` records match the debate's context, else overall;
//! - the regime adjustment is `regime accuracy × 0.7 + overall × 0.3` with
//!   ≥ 50 samples in the current regime, else `× 0.3 + × 0.7`;
//! - the trend adjustment (only when the rolling-accuracy fit has R² above
//!   0.3) is `base × 0.7 + extrapolated × 0.3`, extrapolated 6 months on;
//! - the override penalty is 0.70 above a 40 % override rate, 0.85 above 20 %.
//!
//! The seed multiplies the regime and trend *adjustments* (accuracies) into
//! the score, which would cube an agent's accuracy. We apply them as ratios
//! to the accuracy they adjust (`adjustment / overall`, `trend / base`), so
//! the comprehensive score equals the simple one (times the override
//! penalty, with context) when regime and trend carry no information. See
//! docs/DEBATES.md.

use chrono::{DateTime, Utc};

use super::record::TrackRecord;
use super::trend;
use super::wilson::wilson;
use super::{CredibilityError, CredibilityParams};

const YEAR_MS: f64 = 31_557_600_000.0;

pub use caucus_shared::api::facilitator::{
    CredibilityQuery, CredibilityScore, RegimeFactor, TrendFactor,
};

fn mean(it: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = it.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    (n > 0).then(|| sum / n as f64)
}

fn ratio(num: f64, den: f64) -> f64 {
    if den > f64::EPSILON {
        num / den
    } else {
        1.0
    }
}

/// Scores `agent` from `records` (records of other agents are ignored) as
/// of `now`. Every record is validated first; records dated after `now`
/// count as age zero.
pub fn score(
    agent: &str,
    records: &[TrackRecord],
    query: &CredibilityQuery,
    now: DateTime<Utc>,
    params: &CredibilityParams,
) -> Result<CredibilityScore, CredibilityError> {
    params.validate()?;
    let mut mine: Vec<&TrackRecord> = records.iter().filter(|r| r.agent == agent).collect();
    for r in &mine {
        super::record::validate(r)?;
    }
    mine.sort_by_key(|r| r.at);
    let total = mine.len() as u64;
    let overall = mean(mine.iter().map(|r| r.outcome)).unwrap_or(0.0);

    let similar: Vec<&&TrackRecord> = mine
        .iter()
        .filter(|r| r.context.match_score(&query.context) >= params.context_match_threshold)
        .collect();
    let sample_size = similar.len() as u64;
    let context_accuracy = mean(similar.iter().map(|r| r.outcome));
    let context_match =
        mean(mine.iter().map(|r| r.context.match_score(&query.context))).unwrap_or(0.0);
    let context_weight = match context_accuracy {
        Some(_)
            if !query.context.is_empty() && sample_size >= u64::from(params.min_data_points) =>
        {
            params.context_weight
        }
        _ => 0.0,
    };
    let base =
        context_accuracy.unwrap_or(overall) * context_weight + overall * (1.0 - context_weight);

    let temporal_weight = mean(mine.iter().map(|r| {
        let age_years = ((now - r.at).num_milliseconds().max(0) as f64) / YEAR_MS;
        0.5f64.powf(age_years / params.half_life_years)
    }))
    .unwrap_or(0.0);
    let simple = (overall * temporal_weight).clamp(0.0, 1.0);

    let regime = query
        .regime
        .as_deref()
        .filter(|r| !r.is_empty())
        .map(|name| {
            let in_regime: Vec<f64> = mine
                .iter()
                .filter(|r| {
                    r.regime
                        .as_deref()
                        .is_some_and(|x| x.eq_ignore_ascii_case(name))
                })
                .map(|r| r.outcome)
                .collect();
            let samples = in_regime.len() as u64;
            let accuracy = mean(in_regime.into_iter());
            let strong = samples >= u64::from(params.regime_min_samples);
            let adjustment = match accuracy {
                Some(a) if strong => a * 0.70 + overall * 0.30,
                Some(a) => a * 0.30 + overall * 0.70,
                None => overall,
            };
            RegimeFactor {
                regime: name.to_string(),
                samples,
                accuracy,
                weighting: if strong { "70/30" } else { "30/70" }.into(),
                adjustment,
                factor: ratio(adjustment, overall),
            }
        });

    let trend = {
        let first = mine.first().map(|r| r.at);
        let series: Vec<(f64, f64)> = mine
            .iter()
            .map(|r| {
                let t = first.map_or(0.0, |f| (r.at - f).num_milliseconds() as f64 / YEAR_MS);
                (t, r.outcome)
            })
            .collect();
        trend::fit(&trend::rolling(&series, params.trend_window as usize)).map(|t| {
            let significant = t.r2 > params.trend_min_r2;
            let extrapolated =
                (base + t.slope_per_year * params.trend_horizon_years).clamp(0.0, 1.0);
            let factor = if significant {
                ratio(base * 0.70 + extrapolated * 0.30, base)
            } else {
                1.0
            };
            TrendFactor {
                trend: t,
                significant,
                extrapolated,
                factor,
            }
        })
    };

    let overridden = mine.iter().filter(|r| r.overridden).count();
    let override_rate = if total == 0 {
        0.0
    } else {
        overridden as f64 / total as f64
    };
    let override_penalty = if override_rate > 0.40 {
        0.70
    } else if override_rate > 0.20 {
        0.85
    } else {
        1.00
    };

    let comprehensive = base
        * temporal_weight
        * regime.as_ref().map_or(1.0, |r| r.factor)
        * trend.as_ref().map_or(1.0, |t| t.factor)
        * override_penalty;
    let score = if comprehensive.is_finite() {
        comprehensive.clamp(0.0, 1.0)
    } else {
        0.0
    };
    Ok(CredibilityScore {
        agent: agent.to_string(),
        score,
        interval: wilson(score, sample_size, params.z),
        simple,
        simple_interval: wilson(simple, sample_size, params.z),
        sample_size,
        total_records: total,
        overall_accuracy: overall,
        context_accuracy,
        context_match,
        context_weight,
        base_accuracy: base,
        temporal_weight,
        regime,
        trend,
        override_rate,
        override_penalty,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credibility::Context;
    use chrono::{Duration, TimeZone};
    use proptest::prelude::*;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 6, 1, 0, 0, 0).unwrap()
    }

    fn rec(agent: &str, outcome: f64, days_ago: i64) -> TrackRecord {
        TrackRecord {
            agent: agent.into(),
            outcome,
            at: now() - Duration::days(days_ago),
            context: Context::default(),
            regime: None,
            overridden: false,
        }
    }

    fn p() -> CredibilityParams {
        CredibilityParams::default()
    }

    #[test]
    fn simple_credibility_decays_with_a_two_year_half_life() {
        let fresh: Vec<_> = (0..20).map(|_| rec("a", 1.0, 0)).collect();
        let s = score("a", &fresh, &CredibilityQuery::default(), now(), &p()).unwrap();
        assert!((s.simple - 1.0).abs() < 1e-9);
        // 730.5 days = 2 years of 365.25 days: half the weight.
        let old: Vec<_> = (0..20)
            .map(|_| TrackRecord {
                at: now() - Duration::milliseconds(2 * 31_557_600_000),
                ..rec("a", 0.8, 0)
            })
            .collect();
        let s = score("a", &old, &CredibilityQuery::default(), now(), &p()).unwrap();
        assert!((s.simple - 0.4).abs() < 1e-9, "{}", s.simple);
        assert_eq!(s.sample_size, 20);
    }

    #[test]
    fn no_records_scores_zero_with_the_widest_interval() {
        let s = score("a", &[], &CredibilityQuery::default(), now(), &p()).unwrap();
        assert_eq!(s.score, 0.0);
        assert_eq!(s.interval.half_width, 0.5);
    }

    #[test]
    fn override_penalties() {
        let mut rs: Vec<_> = (0..10).map(|_| rec("a", 1.0, 0)).collect();
        let q = CredibilityQuery::default();
        assert_eq!(
            score("a", &rs, &q, now(), &p()).unwrap().override_penalty,
            1.0
        );
        for r in rs.iter_mut().take(3) {
            r.overridden = true;
        }
        let s = score("a", &rs, &q, now(), &p()).unwrap();
        assert_eq!(s.override_penalty, 0.85);
        assert!((s.score - 0.85).abs() < 1e-9);
        for r in rs.iter_mut().take(5) {
            r.overridden = true;
        }
        assert_eq!(
            score("a", &rs, &q, now(), &p()).unwrap().override_penalty,
            0.70
        );
        // Exactly 20 % is not "above 20 %".
        for (i, r) in rs.iter_mut().enumerate() {
            r.overridden = i < 2;
        }
        assert_eq!(
            score("a", &rs, &q, now(), &p()).unwrap().override_penalty,
            1.0
        );
    }

    #[test]
    fn regime_weighting_switches_at_fifty_samples() {
        // 60 records: 50 in BEAR (all right), 10 elsewhere (all wrong).
        let mut rs: Vec<_> = (0..50)
            .map(|_| TrackRecord {
                regime: Some("BEAR_HIGH_RATES".into()),
                ..rec("a", 1.0, 0)
            })
            .collect();
        rs.extend((0..10).map(|_| rec("a", 0.0, 0)));
        let q = CredibilityQuery {
            regime: Some("BEAR_HIGH_RATES".into()),
            ..Default::default()
        };
        let s = score("a", &rs, &q, now(), &p()).unwrap();
        let r = s.regime.clone().unwrap();
        let overall = 50.0 / 60.0;
        assert_eq!(r.weighting, "70/30");
        assert!((r.adjustment - (0.7 + 0.3 * overall)).abs() < 1e-9);
        // With 49 samples the weighting flips to 30/70.
        rs.remove(0);
        let s = score("a", &rs, &q, now(), &p()).unwrap();
        let r = s.regime.unwrap();
        let overall = 49.0 / 59.0;
        assert_eq!(r.weighting, "30/70");
        assert!((r.adjustment - (0.3 + 0.7 * overall)).abs() < 1e-9);
    }

    #[test]
    fn context_weight_needs_enough_similar_records() {
        let ctx = Context {
            sector: Some("Technology".into()),
            metric: Some("operating_margin".into()),
            ..Default::default()
        };
        let mut rs: Vec<_> = (0..15)
            .map(|_| TrackRecord {
                context: ctx.clone(),
                ..rec("a", 1.0, 0)
            })
            .collect();
        rs.extend((0..15).map(|_| rec("a", 0.0, 0)));
        let q = CredibilityQuery {
            context: ctx,
            regime: None,
        };
        let s = score("a", &rs, &q, now(), &p()).unwrap();
        assert_eq!(s.sample_size, 15);
        assert_eq!(s.context_weight, 0.3);
        assert!((s.base_accuracy - (0.3 * 1.0 + 0.7 * 0.5)).abs() < 1e-9);
        rs.remove(0);
        let s = score("a", &rs, &q, now(), &p()).unwrap();
        assert_eq!(s.sample_size, 14);
        assert_eq!(s.context_weight, 0.0);
    }

    #[test]
    fn a_significant_improving_trend_raises_the_score() {
        // Wrong for the first year, right for the second: a clear upward trend.
        let rs: Vec<_> = (0..40)
            .map(|i| rec("a", if i < 20 { 0.0 } else { 1.0 }, 730 - i * 18))
            .collect();
        let s = score("a", &rs, &CredibilityQuery::default(), now(), &p()).unwrap();
        let t = s.trend.clone().unwrap();
        assert!(t.significant && t.trend.r2 > 0.3, "{t:?}");
        assert!(t.trend.slope_per_year > 0.0);
        assert!(t.factor > 1.0);
        // Alternating outcomes have no trend worth applying.
        let rs: Vec<_> = (0..40)
            .map(|i| rec("a", (i % 2) as f64, 730 - i * 18))
            .collect();
        let s = score("a", &rs, &CredibilityQuery::default(), now(), &p()).unwrap();
        assert_eq!(s.trend.map(|t| t.factor), Some(1.0));
    }

    #[test]
    fn invalid_records_are_named() {
        let e = score(
            "a",
            &[rec("a", 2.0, 0)],
            &CredibilityQuery::default(),
            now(),
            &p(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`a`") && e.contains("outcome"), "{e}");
    }

    fn arb_records() -> impl Strategy<Value = Vec<(f64, i64, bool, u8)>> {
        prop::collection::vec((0.0f64..=1.0, 1i64..3000, any::<bool>(), 0u8..4), 0..80)
    }

    fn build(raw: &[(f64, i64, bool, u8)]) -> Vec<TrackRecord> {
        raw.iter()
            .map(|&(o, days, overridden, k)| TrackRecord {
                overridden,
                regime: Some(["BULL", "BEAR", "FLAT", "BULL"][k as usize].into()),
                context: Context {
                    sector: Some(["Tech", "Energy", "Tech", "Health"][k as usize].into()),
                    ..Default::default()
                },
                ..rec("a", o, days)
            })
            .collect()
    }

    fn query() -> CredibilityQuery {
        CredibilityQuery {
            context: Context {
                sector: Some("Tech".into()),
                ..Default::default()
            },
            regime: Some("BULL".into()),
        }
    }

    proptest! {
        #[test]
        fn scores_stay_within_unit_interval(raw in arb_records()) {
            let s = score("a", &build(&raw), &query(), now(), &p()).unwrap();
            for v in [s.score, s.simple, s.temporal_weight, s.base_accuracy, s.interval.lower, s.interval.upper] {
                prop_assert!((0.0..=1.0).contains(&v), "{v} in {s:?}");
            }
        }

        #[test]
        fn more_recent_identical_outcomes_never_lower_simple(raw in arb_records(), idx in any::<prop::sample::Index>(), shift in 0i64..3000) {
            prop_assume!(!raw.is_empty());
            let before = build(&raw);
            let mut after = before.clone();
            let i = idx.index(after.len());
            let newer = (after[i].at + Duration::days(shift)).min(now());
            after[i].at = newer;
            let q = query();
            let a = score("a", &before, &q, now(), &p()).unwrap();
            let b = score("a", &after, &q, now(), &p()).unwrap();
            prop_assert!(b.simple >= a.simple - 1e-12, "{} < {}", b.simple, a.simple);
        }

        #[test]
        fn shifting_the_whole_record_later_never_lowers_comprehensive(raw in arb_records(), shift in 0i64..3000) {
            prop_assume!(!raw.is_empty());
            let before = build(&raw);
            let min_age = raw.iter().map(|r| r.1).min().unwrap_or(0);
            let shift = shift.min(min_age);
            let after: Vec<_> = before
                .iter()
                .map(|r| TrackRecord { at: r.at + Duration::days(shift), ..r.clone() })
                .collect();
            let q = query();
            let a = score("a", &before, &q, now(), &p()).unwrap();
            let b = score("a", &after, &q, now(), &p()).unwrap();
            prop_assert!(b.score >= a.score - 1e-9, "{} < {}", b.score, a.score);
        }
    }
}
