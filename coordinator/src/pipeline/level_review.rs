//! The optional `level_review` table of a pipeline spec: the review gate
//! between dependency levels (docs/LEVEL-REVIEW.md). Absent fields fall
//! back to the coordinator's configuration (`coordinator.level_review_mode`,
//! `coordinator.level_review_agent`) when a workflow is submitted.

use std::collections::BTreeSet;

pub use caucus_shared::config::LevelReviewMode;

use super::token::is_valid_token;
use super::{PipelineError, PipelineSpec};

/// Key under which next-level tasks find the review in their `inputs`.
/// Reserved: no stage may have this name.
pub const LEVEL_REVIEW_INPUT: &str = "level_review";

fn invalid(message: String) -> PipelineError {
    PipelineError::InvalidLevelReview { message }
}

/// Checks `spec.level_review` and the reserved input name. An agent named
/// by a pipeline that turns reviews on must be known like any stage's.
pub(super) fn check(
    spec: &PipelineSpec,
    known_agents: Option<&BTreeSet<String>>,
) -> Result<(), PipelineError> {
    if spec.stage(LEVEL_REVIEW_INPUT).is_some() {
        return Err(invalid(format!(
            "stage name `{LEVEL_REVIEW_INPUT}` is reserved: next-level tasks receive \
             the level review under inputs.{LEVEL_REVIEW_INPUT}"
        )));
    }
    let Some(lr) = &spec.level_review else {
        return Ok(());
    };
    if let Some(agent) = &lr.agent {
        if !is_valid_token(agent) {
            return Err(invalid(format!(
                "agent `{agent}` is not a valid agent type name ([a-z0-9_-]+)"
            )));
        }
        let on = lr.mode != Some(LevelReviewMode::Off);
        let known =
            spec.capacities.contains_key(agent) || known_agents.is_some_and(|k| k.contains(agent));
        if on && !known {
            return Err(invalid(format!(
                "review agent type `{agent}` has no entry in [capacities] and is not a known agent type"
            )));
        }
    }
    if let Some(d) = lr.expected_duration {
        if !d.is_finite() || d < 0.0 {
            return Err(invalid(format!(
                "expected_duration must be a finite number >= 0, got {d}"
            )));
        }
    }
    if let Some(t) = lr.timeout {
        if !t.is_finite() || t <= 0.0 {
            return Err(invalid(format!(
                "timeout must be a finite number > 0, got {t}"
            )));
        }
    }
    if let Some(r) = &lr.retry {
        if r.max_attempts == 0 {
            return Err(invalid("retry.max_attempts must be at least 1".into()));
        }
        if r.backoff_initial_ms > r.backoff_max_ms {
            return Err(invalid(format!(
                "retry.backoff_initial_ms ({}) exceeds retry.backoff_max_ms ({})",
                r.backoff_initial_ms, r.backoff_max_ms
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::pipeline::{validate, PipelineError, PipelineSpec};

    const BASE: &str = "name = \"p\"\ncapacities = { x = 1, reviewer = 1 }\n[[stages]]\nname = \"a\"\nagent = \"x\"\n";

    fn with(review: &str) -> Result<PipelineSpec, PipelineError> {
        let spec = PipelineSpec::from_toml(&format!("level_review = {review}\n{BASE}"))?;
        validate(&spec, None).map(|_| spec)
    }

    #[test]
    fn modes_parse_and_bad_names_are_named() {
        let s = with("{ mode = \"always\", agent = \"reviewer\", timeout = 5 }").unwrap();
        let lr = s.level_review.unwrap();
        assert_eq!(lr.mode, Some(super::LevelReviewMode::Always));
        assert_eq!(lr.timeout, Some(5.0));
        assert!(with("{ mode = \"off\" }").is_ok());
        assert!(with("{ mode = \"conflicts\" }").is_ok());
        let e = with("{ mode = \"sometimes\" }").unwrap_err().to_string();
        assert!(
            e.contains("sometimes") && e.contains("conflicts") && e.contains("always"),
            "{e}"
        );
        let e = with("{ mode = \"always\", agents = \"r\" }")
            .unwrap_err()
            .to_string();
        assert!(e.contains("agents"), "{e}");
    }

    #[test]
    fn review_agent_must_be_known_when_reviews_are_on() {
        let e = with("{ mode = \"always\", agent = \"qa\" }").unwrap_err();
        assert_eq!(
            e.to_string(),
            "level_review: review agent type `qa` has no entry in [capacities] and is not a known agent type"
        );
        assert!(with("{ mode = \"off\", agent = \"qa\" }").is_ok());
        let spec = PipelineSpec::from_toml(&format!("level_review = {{ agent = \"qa\" }}\n{BASE}"))
            .unwrap();
        let known = ["qa".to_string()].into();
        assert!(validate(&spec, Some(&known)).is_ok());
        let e = with("{ agent = \"Q A\" }").unwrap_err().to_string();
        assert!(e.contains("not a valid agent type name"), "{e}");
    }

    #[test]
    fn numbers_and_reserved_stage_name() {
        assert!(with("{ timeout = 0 }")
            .unwrap_err()
            .to_string()
            .contains("timeout must be a finite number > 0"));
        assert!(with("{ expected_duration = -1 }")
            .unwrap_err()
            .to_string()
            .contains("expected_duration"));
        assert!(with("{ retry = { max_attempts = 0 } }")
            .unwrap_err()
            .to_string()
            .contains("max_attempts"));
        let spec = PipelineSpec::from_toml(
            "name = \"p\"\ncapacities = { x = 1 }\n[[stages]]\nname = \"level_review\"\nagent = \"x\"\n",
        )
        .unwrap();
        let e = validate(&spec, None).unwrap_err().to_string();
        assert!(e.contains("`level_review` is reserved"), "{e}");
    }
}
