//! The level-2 decision input: is one agent clearly more credible than the
//! other in this context?

use super::{CredibilityParams, CredibilityScore};
use crate::side::Side;

pub use caucus_shared::api::facilitator::L2Assessment;

/// Compares the two agents' scores.
pub fn assess_pair(
    challenger: CredibilityScore,
    challenged: CredibilityScore,
    params: &CredibilityParams,
) -> L2Assessment {
    let differential = (challenger.score - challenged.score).abs();
    let required = params
        .min_differential
        .max(challenger.interval.half_width + challenged.interval.half_width);
    let min = u64::from(params.min_data_points);
    let short: Vec<String> = [&challenger, &challenged]
        .iter()
        .filter(|s| s.sample_size < min)
        .map(|s| format!("`{}` has {} data points in context", s.agent, s.sample_size))
        .collect();
    let sufficient_data = short.is_empty();
    let favoured = if challenger.score > challenged.score {
        Some(Side::Challenger)
    } else if challenged.score > challenger.score {
        Some(Side::Challenged)
    } else {
        None
    };
    let clear = sufficient_data && differential > required && favoured.is_some();
    let reason = if !sufficient_data {
        format!(
            "insufficient track record: {} ({min} needed)",
            short.join(", ")
        )
    } else if clear {
        let (w, l) = match favoured {
            Some(Side::Challenger) => (&challenger, &challenged),
            _ => (&challenged, &challenger),
        };
        format!(
            "`{}` credibility {:.3} ±{:.3} exceeds `{}` {:.3} ±{:.3} by {:.3} > required {:.3}",
            w.agent,
            w.score,
            w.interval.half_width,
            l.agent,
            l.score,
            l.interval.half_width,
            differential,
            required
        )
    } else {
        format!(
            "credibility differential {differential:.3} does not exceed required {required:.3} (max({:.2}, CI sum {:.3}))",
            params.min_differential,
            challenger.interval.half_width + challenged.interval.half_width
        )
    };
    L2Assessment {
        challenger: Some(challenger),
        challenged: Some(challenged),
        differential,
        required,
        sufficient_data,
        clear,
        favoured,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::credibility::{score, CredibilityQuery, TrackRecord};
    use chrono::{TimeZone, Utc};

    fn agent(name: &str, right: usize, wrong: usize) -> Vec<TrackRecord> {
        let at = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
        (0..right + wrong)
            .map(|i| TrackRecord {
                agent: name.into(),
                outcome: if i < right { 1.0 } else { 0.0 },
                at,
                context: Default::default(),
                regime: None,
                overridden: false,
            })
            .collect()
    }

    fn scored(name: &str, right: usize, wrong: usize) -> CredibilityScore {
        let now = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
        score(
            name,
            &agent(name, right, wrong),
            &CredibilityQuery::default(),
            now,
            &CredibilityParams::default(),
        )
        .unwrap()
    }

    #[test]
    fn clear_gap_with_enough_data_resolves() {
        let a = assess_pair(
            scored("s", 95, 5),
            scored("f", 30, 70),
            &CredibilityParams::default(),
        );
        assert!(a.sufficient_data && a.clear, "{a:?}");
        assert_eq!(a.favoured, Some(Side::Challenger));
        assert!(a.required >= 0.25);
    }

    #[test]
    fn small_samples_widen_the_threshold() {
        // 15 points each: intervals are wide, so the required gap exceeds 0.25.
        let a = assess_pair(
            scored("s", 12, 3),
            scored("f", 8, 7),
            &CredibilityParams::default(),
        );
        assert!(a.required > 0.25, "{a:?}");
        assert!(!a.clear);
        assert!(a.reason.contains("does not exceed"), "{}", a.reason);
    }

    #[test]
    fn fourteen_points_is_not_enough() {
        let a = assess_pair(
            scored("s", 14, 0),
            scored("f", 0, 100),
            &CredibilityParams::default(),
        );
        assert!(!a.sufficient_data && !a.clear);
        assert!(a.reason.contains("`s` has 14 data points"), "{}", a.reason);
    }
}
