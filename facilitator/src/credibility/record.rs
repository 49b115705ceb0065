//! One tracked outcome of an agent's past position, with the context it was
//! taken in.

use super::CredibilityError;

pub use caucus_shared::api::facilitator::{Context, TrackRecord};

/// Checks `record` can be scored.
pub fn validate(record: &TrackRecord) -> Result<(), CredibilityError> {
    let bad = |reason: String| {
        Err(CredibilityError::InvalidRecord {
            agent: record.agent.clone(),
            reason,
        })
    };
    if record.agent.trim().is_empty() {
        return bad("agent must not be empty".into());
    }
    if !(0.0..=1.0).contains(&record.outcome) {
        return bad(format!(
            "outcome must be within 0..=1, got {}",
            record.outcome
        ));
    }
    Ok(())
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
        let e = validate(&bad).unwrap_err().to_string();
        assert!(e.contains("outcome must be within 0..=1"), "{e}");
    }
}
