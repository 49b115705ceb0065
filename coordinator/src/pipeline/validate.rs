//! Semantic checks on a parsed spec. The first problem found is returned;
//! checks run in a fixed order (names, shape, graph, agents, numbers) so the
//! same bad spec always yields the same error.

use std::collections::BTreeSet;

use super::token::is_valid_token;
use super::{PipelineError, PipelineSpec, StageGraph, StageKind};

fn check_token(what: &'static str, name: &str) -> Result<(), PipelineError> {
    if is_valid_token(name) {
        Ok(())
    } else {
        Err(PipelineError::InvalidName {
            what,
            name: name.to_string(),
        })
    }
}

/// Validates `spec`.
///
/// `known_agents` is the set of agent types the caller knows can run (e.g.
/// registered workers or capacity overrides). A task stage's agent type must
/// have an entry in `[capacities]` or be in that set.
pub fn validate(
    spec: &PipelineSpec,
    known_agents: Option<&BTreeSet<String>>,
) -> Result<(), PipelineError> {
    validate_graph(spec, known_agents).map(|_| ())
}

/// [`validate`], returning the stage graph for callers that need it.
pub fn validate_graph(
    spec: &PipelineSpec,
    known_agents: Option<&BTreeSet<String>>,
) -> Result<StageGraph, PipelineError> {
    check_token("pipeline", &spec.name)?;
    if spec.stages.is_empty() {
        return Err(PipelineError::Empty {
            pipeline: spec.name.clone(),
        });
    }
    for (agent, &capacity) in &spec.capacities {
        check_token("agent type", agent)?;
        if capacity == 0 {
            return Err(PipelineError::ZeroCapacity {
                agent: agent.clone(),
            });
        }
    }
    for stage in &spec.stages {
        check_token("stage", &stage.name)?;
        if let Some(agent) = &stage.agent {
            check_token("agent type", agent)?;
        }
    }
    let graph = StageGraph::build(spec)?;
    for stage in &spec.stages {
        match (stage.kind, &stage.agent) {
            (StageKind::Task, None) => {
                return Err(PipelineError::MissingAgent {
                    stage: stage.name.clone(),
                })
            }
            (StageKind::Task, Some(agent)) => {
                let known = spec.capacities.contains_key(agent)
                    || known_agents.is_some_and(|k| k.contains(agent));
                if !known {
                    return Err(PipelineError::UnknownAgent {
                        stage: stage.name.clone(),
                        agent: agent.clone(),
                    });
                }
            }
            (StageKind::Gate, Some(_)) => {
                return Err(PipelineError::GateWithAgent {
                    stage: stage.name.clone(),
                })
            }
            (StageKind::Gate, None) => {
                if stage.fan_out.is_some() {
                    return Err(PipelineError::GateFanOut {
                        stage: stage.name.clone(),
                    });
                }
            }
        }
        let d = stage.expected_duration;
        if !d.is_finite() || d < 0.0 {
            return Err(PipelineError::InvalidDuration {
                stage: stage.name.clone(),
                field: "expected_duration",
                requirement: "a finite number >= 0",
                value: d,
            });
        }
        if let Some(t) = stage.timeout {
            check_timeout(&stage.name, t)?;
        }
        if stage.fan_out == Some(0) {
            return Err(PipelineError::InvalidFanOut {
                stage: stage.name.clone(),
            });
        }
        let retry = &stage.retry;
        if retry.max_attempts == 0 {
            return Err(PipelineError::InvalidRetry {
                stage: stage.name.clone(),
                message: "max_attempts must be at least 1".into(),
            });
        }
        if retry.backoff_initial_ms > retry.backoff_max_ms {
            return Err(PipelineError::InvalidRetry {
                stage: stage.name.clone(),
                message: format!(
                    "backoff_initial_ms ({}) exceeds backoff_max_ms ({})",
                    retry.backoff_initial_ms, retry.backoff_max_ms
                ),
            });
        }
    }
    if let Some(t) = spec.timeout {
        check_timeout(&spec.name, t)?;
    }
    super::level_review::check(spec, known_agents)?;
    Ok(graph)
}

/// Checks capacity overrides supplied at plan or submit time: valid agent
/// type names, every capacity at least 1.
pub fn check_capacity_overrides(
    overrides: &std::collections::BTreeMap<String, u32>,
) -> Result<(), PipelineError> {
    for (agent, &capacity) in overrides {
        check_token("agent type", agent)?;
        if capacity == 0 {
            return Err(PipelineError::ZeroCapacity {
                agent: agent.clone(),
            });
        }
    }
    Ok(())
}

fn check_timeout(owner: &str, t: f64) -> Result<(), PipelineError> {
    if t.is_finite() && t > 0.0 {
        Ok(())
    } else {
        Err(PipelineError::InvalidDuration {
            stage: owner.to_string(),
            field: "timeout",
            requirement: "a finite number > 0",
            value: t,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(toml: &str) -> PipelineSpec {
        PipelineSpec::from_toml(toml).unwrap()
    }

    fn err(toml: &str) -> PipelineError {
        validate(&spec(toml), None).unwrap_err()
    }

    #[test]
    fn tokens() {
        assert!(is_valid_token("research_discovery-2"));
        assert!(!is_valid_token(""));
        assert!(!is_valid_token("Valuation"));
        assert!(!is_valid_token("a.b"));
        assert!(!is_valid_token("a b"));
    }

    #[test]
    fn cycle_names_the_path() {
        let e = err(r#"
            name = "p"
            capacities = { x = 1 }
            [[stages]]
            name = "start"
            agent = "x"
            [[stages]]
            name = "a"
            agent = "x"
            depends_on = ["start", "c"]
            [[stages]]
            name = "b"
            agent = "x"
            depends_on = ["a"]
            [[stages]]
            name = "c"
            agent = "x"
            depends_on = ["b"]
        "#);
        assert_eq!(e.to_string(), "cycle: a -> b -> c -> a");
        assert_eq!(
            e,
            PipelineError::Cycle {
                path: vec!["a".into(), "b".into(), "c".into(), "a".into()]
            }
        );
    }

    #[test]
    fn self_dependency_is_a_cycle() {
        let e = err(r#"
            name = "p"
            capacities = { x = 1 }
            [[stages]]
            name = "a"
            agent = "x"
            depends_on = ["a"]
        "#);
        assert_eq!(e.to_string(), "cycle: a -> a");
    }

    #[test]
    fn unknown_dependency() {
        let e = err(r#"
            name = "p"
            capacities = { x = 1 }
            [[stages]]
            name = "x"
            agent = "x"
            depends_on = ["y"]
        "#);
        assert_eq!(e.to_string(), "stage `x` depends on unknown stage `y`");
    }

    #[test]
    fn duplicate_stage_and_dependency() {
        let base =
            "name = \"p\"\ncapacities = { x = 1 }\n[[stages]]\nname = \"a\"\nagent = \"x\"\n";
        let e = err(&format!("{base}[[stages]]\nname = \"a\"\nagent = \"x\"\n"));
        assert_eq!(e, PipelineError::DuplicateStage { stage: "a".into() });
        let e = err(&format!(
            "{base}[[stages]]\nname = \"b\"\nagent = \"x\"\ndepends_on = [\"a\", \"a\"]\n"
        ));
        assert!(
            matches!(e, PipelineError::DuplicateDependency { .. }),
            "{e}"
        );
    }

    #[test]
    fn unknown_agent_unless_known_by_caller() {
        let s = spec(
            r#"
            name = "p"
            capacities = { x = 1 }
            [[stages]]
            name = "a"
            agent = "y"
        "#,
        );
        let e = validate(&s, None).unwrap_err();
        assert_eq!(
            e,
            PipelineError::UnknownAgent {
                stage: "a".into(),
                agent: "y".into()
            }
        );
        assert!(e.to_string().contains("unknown agent type `y`"));
        let known: BTreeSet<String> = ["y".to_string()].into();
        validate(&s, Some(&known)).unwrap();
    }

    #[test]
    fn zero_capacity() {
        let e = err(r#"
            name = "p"
            capacities = { x = 0 }
            [[stages]]
            name = "a"
            agent = "x"
        "#);
        assert_eq!(
            e.to_string(),
            "agent type `x` has capacity 0; capacity must be at least 1"
        );
    }

    #[test]
    fn empty_pipeline() {
        assert_eq!(
            err("name = \"p\"\n"),
            PipelineError::Empty {
                pipeline: "p".into()
            }
        );
    }

    #[test]
    fn invalid_names() {
        let e = err("name = \"p\"\ncapacities = { x = 1 }\n[[stages]]\nname = \"Bad Stage\"\nagent = \"x\"\n");
        assert_eq!(
            e.to_string(),
            "invalid stage name `Bad Stage`: names must match [a-z0-9_-]+"
        );
        let e = err("name = \"p\"\ncapacities = { \"x.y\" = 1 }\n[[stages]]\nname = \"a\"\nagent = \"x.y\"\n");
        assert!(
            matches!(
                e,
                PipelineError::InvalidName {
                    what: "agent type",
                    ..
                }
            ),
            "{e}"
        );
        let e = err("name = \"P\"\n[[stages]]\nname = \"a\"\nkind = \"gate\"\n");
        assert!(
            matches!(
                e,
                PipelineError::InvalidName {
                    what: "pipeline",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn bad_numbers() {
        let mut s =
            spec("name = \"p\"\ncapacities = { x = 1 }\n[[stages]]\nname = \"a\"\nagent = \"x\"\n");
        s.stages[0].expected_duration = -1.0;
        let e = validate(&s, None).unwrap_err();
        assert!(
            e.to_string()
                .contains("expected_duration must be a finite number >= 0, got -1"),
            "{e}"
        );
        s.stages[0].expected_duration = f64::NAN;
        assert!(matches!(
            validate(&s, None).unwrap_err(),
            PipelineError::InvalidDuration {
                field: "expected_duration",
                ..
            }
        ));
        s.stages[0].expected_duration = 1.0;
        s.stages[0].timeout = Some(0.0);
        assert!(matches!(
            validate(&s, None).unwrap_err(),
            PipelineError::InvalidDuration {
                field: "timeout",
                ..
            }
        ));
        s.stages[0].timeout = None;
        s.stages[0].fan_out = Some(0);
        assert!(matches!(
            validate(&s, None).unwrap_err(),
            PipelineError::InvalidFanOut { .. }
        ));
        s.stages[0].fan_out = None;
        s.stages[0].retry.max_attempts = 0;
        assert!(matches!(
            validate(&s, None).unwrap_err(),
            PipelineError::InvalidRetry { .. }
        ));
        s.stages[0].retry.max_attempts = 1;
        s.stages[0].retry.backoff_initial_ms = 10_000;
        assert!(matches!(
            validate(&s, None).unwrap_err(),
            PipelineError::InvalidRetry { .. }
        ));
    }

    #[test]
    fn gates_take_no_agent_and_no_fan_out() {
        let e = err("name = \"p\"\ncapacities = { x = 1 }\n[[stages]]\nname = \"g\"\nkind = \"gate\"\nagent = \"x\"\n");
        assert_eq!(e, PipelineError::GateWithAgent { stage: "g".into() });
        let e = err("name = \"p\"\n[[stages]]\nname = \"g\"\nkind = \"gate\"\nfan_out = 2\n");
        assert_eq!(e, PipelineError::GateFanOut { stage: "g".into() });
        let e = err("name = \"p\"\n[[stages]]\nname = \"t\"\n");
        assert_eq!(e, PipelineError::MissingAgent { stage: "t".into() });
    }
}
