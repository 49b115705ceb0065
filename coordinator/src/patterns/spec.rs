//! A pattern run request and its effective parameters, with the seed's
//! defaults filled in and every limit checked up front.

use serde::{Deserialize, Serialize};

/// Shared context (previous responses, the work under review) is cut to
/// this many characters unless the request says otherwise.
pub const DEFAULT_CONTEXT_TRUNCATION: usize = 500;
/// Stored outputs (and the pipeline's passed-on outputs) are cut to this
/// many characters unless the request says otherwise.
pub const DEFAULT_OUTPUT_TRUNCATION: usize = 1000;
/// Debate rounds by default.
pub const DEFAULT_DEBATE_ROUNDS: u32 = 2;
/// Consensus rounds at most, by default.
pub const DEFAULT_MAX_ROUNDS: u32 = 3;
/// Combined score a consensus round must reach, by default.
pub const DEFAULT_AGREEMENT_THRESHOLD: f64 = 0.8;

/// Agents in one run, at most (keeps a run record well under the NATS
/// payload limit).
pub const MAX_AGENTS: usize = 16;
/// Debate or consensus rounds, at most.
pub const MAX_ROUNDS: u32 = 10;
/// Length of the task text, at most (characters).
pub const MAX_TASK_CHARS: usize = 20_000;
/// Length of an agent type name, at most.
pub const MAX_AGENT_LEN: usize = 100;
/// Either truncation limit, at most.
pub const MAX_TRUNCATION: usize = 20_000;

/// The six coordination patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatternKind {
    /// Every agent gets the same task at once.
    Parallel,
    /// Agents in order, each seeing the earlier outputs.
    Pipeline,
    /// Parallel rounds, each seeing the previous responses.
    Debate,
    /// Leader plans, workers run in parallel, leader synthesises.
    Hierarchical,
    /// Debate rounds with agreement scoring and early exit.
    Consensus,
    /// Work, circular review, revision.
    PeerReview,
}

impl PatternKind {
    /// Every pattern, in the seed's order.
    pub const ALL: [PatternKind; 6] = [
        PatternKind::Parallel,
        PatternKind::Pipeline,
        PatternKind::Debate,
        PatternKind::Hierarchical,
        PatternKind::Consensus,
        PatternKind::PeerReview,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            PatternKind::Parallel => "parallel",
            PatternKind::Pipeline => "pipeline",
            PatternKind::Debate => "debate",
            PatternKind::Hierarchical => "hierarchical",
            PatternKind::Consensus => "consensus",
            PatternKind::PeerReview => "peer_review",
        }
    }

    /// Parses a name; `peer-review` is accepted for `peer_review`.
    pub fn parse(s: &str) -> Option<PatternKind> {
        let s = s.trim().to_ascii_lowercase().replace('-', "_");
        PatternKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// Fewest agents the pattern makes sense with.
    pub fn min_agents(self) -> usize {
        match self {
            PatternKind::Parallel | PatternKind::Pipeline => 1,
            _ => 2,
        }
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// The body is not a run request.
    #[error("{0}")]
    Malformed(String),
    /// No such pattern.
    #[error(
        "unknown pattern `{0}` (parallel, pipeline, debate, hierarchical, consensus, peer_review)"
    )]
    UnknownPattern(String),
    /// Too few or too many agents, or a bad agent name.
    #[error("{0}")]
    Agents(String),
    /// The task text is empty or too long.
    #[error("{0}")]
    Task(String),
    /// A parameter is out of range or does not apply to the pattern.
    #[error("{0}")]
    Param(String),
}

// The request is the API's.
pub use caucus_shared::api::coordinator::patterns::{ParamsInput, PatternParams, RunRequest};

/// A pattern with its effective parameters.
#[derive(Debug, Clone, PartialEq)]
pub enum Pattern {
    /// See [`PatternKind::Parallel`].
    Parallel,
    /// See [`PatternKind::Pipeline`].
    Pipeline {
        /// Earlier outputs go to later agents as `<label>_output`.
        pass_context: bool,
        /// A failed step ends the pipeline.
        stop_on_failure: bool,
    },
    /// See [`PatternKind::Debate`].
    Debate {
        /// Rounds.
        rounds: u32,
    },
    /// See [`PatternKind::Hierarchical`].
    Hierarchical {
        /// Position of the leader in the agent list.
        leader: usize,
    },
    /// See [`PatternKind::Consensus`].
    Consensus {
        /// Rounds at most.
        max_rounds: u32,
        /// Combined score that ends the run.
        agreement_threshold: f64,
    },
    /// See [`PatternKind::PeerReview`].
    PeerReview,
}

impl Pattern {
    /// Its kind.
    pub fn kind(&self) -> PatternKind {
        match self {
            Pattern::Parallel => PatternKind::Parallel,
            Pattern::Pipeline { .. } => PatternKind::Pipeline,
            Pattern::Debate { .. } => PatternKind::Debate,
            Pattern::Hierarchical { .. } => PatternKind::Hierarchical,
            Pattern::Consensus { .. } => PatternKind::Consensus,
            Pattern::PeerReview => PatternKind::PeerReview,
        }
    }
}

/// Everything a run needs, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct PatternSpec {
    /// The pattern and its parameters.
    pub pattern: Pattern,
    /// Agent types by position.
    pub agents: Vec<String>,
    /// The task.
    pub task: String,
    /// Characters of shared context per response.
    pub context_truncation: usize,
    /// Characters of each stored output.
    pub output_truncation: usize,
}

impl PatternSpec {
    /// A spec with the seed's defaults.
    pub fn new(pattern: Pattern, agents: Vec<String>, task: impl Into<String>) -> Self {
        PatternSpec {
            pattern,
            agents,
            task: task.into(),
            context_truncation: DEFAULT_CONTEXT_TRUNCATION,
            output_truncation: DEFAULT_OUTPUT_TRUNCATION,
        }
    }

    /// Validates a request's pattern, agents, task and parameters.
    pub fn from_request(req: &RunRequest) -> Result<PatternSpec, SpecError> {
        let kind = PatternKind::parse(&req.pattern)
            .ok_or_else(|| SpecError::UnknownPattern(req.pattern.clone()))?;
        let p = &req.params;
        let given = |name: &str, set: bool| -> Result<(), SpecError> {
            if set {
                Err(SpecError::Param(format!(
                    "parameter `{name}` does not apply to the {} pattern",
                    kind.as_str()
                )))
            } else {
                Ok(())
            }
        };
        if kind != PatternKind::Pipeline {
            given("pass_context", p.pass_context.is_some())?;
            given("stop_on_failure", p.stop_on_failure.is_some())?;
        }
        if kind != PatternKind::Debate {
            given("rounds", p.rounds.is_some())?;
        }
        if kind != PatternKind::Hierarchical {
            given("leader", p.leader.is_some())?;
        }
        if kind != PatternKind::Consensus {
            given("max_rounds", p.max_rounds.is_some())?;
            given("agreement_threshold", p.agreement_threshold.is_some())?;
        }
        let rounds = |name: &str, v: Option<u32>, default: u32| -> Result<u32, SpecError> {
            let v = v.unwrap_or(default);
            if v == 0 || v > MAX_ROUNDS {
                return Err(SpecError::Param(format!(
                    "`{name}` must be 1..={MAX_ROUNDS}, got {v}"
                )));
            }
            Ok(v)
        };
        let pattern = match kind {
            PatternKind::Parallel => Pattern::Parallel,
            PatternKind::Pipeline => Pattern::Pipeline {
                pass_context: p.pass_context.unwrap_or(true),
                stop_on_failure: p.stop_on_failure.unwrap_or(false),
            },
            PatternKind::Debate => Pattern::Debate {
                rounds: rounds("rounds", p.rounds, DEFAULT_DEBATE_ROUNDS)?,
            },
            PatternKind::Hierarchical => {
                let leader = match &p.leader {
                    None => 0,
                    Some(l) => req.agents.iter().position(|a| a == l).ok_or_else(|| {
                        SpecError::Param(format!(
                            "leader `{l}` is not one of the agents {:?}",
                            req.agents
                        ))
                    })?,
                };
                Pattern::Hierarchical { leader }
            }
            PatternKind::Consensus => {
                let t = p.agreement_threshold.unwrap_or(DEFAULT_AGREEMENT_THRESHOLD);
                if !(0.0..=1.0).contains(&t) {
                    return Err(SpecError::Param(format!(
                        "`agreement_threshold` must be within 0..=1, got {t}"
                    )));
                }
                Pattern::Consensus {
                    max_rounds: rounds("max_rounds", p.max_rounds, DEFAULT_MAX_ROUNDS)?,
                    agreement_threshold: t,
                }
            }
            PatternKind::PeerReview => Pattern::PeerReview,
        };
        check_agents(kind, &req.agents)?;
        let task = req.task.trim();
        if task.is_empty() {
            return Err(SpecError::Task("`task` must not be empty".into()));
        }
        let n = task.chars().count();
        if n > MAX_TASK_CHARS {
            return Err(SpecError::Task(format!(
                "`task` has {n} characters; the limit is {MAX_TASK_CHARS}"
            )));
        }
        let limit = |name: &str, v: Option<usize>, default: usize| -> Result<usize, SpecError> {
            let v = v.unwrap_or(default);
            if v == 0 || v > MAX_TRUNCATION {
                return Err(SpecError::Param(format!(
                    "`{name}` must be 1..={MAX_TRUNCATION}, got {v}"
                )));
            }
            Ok(v)
        };
        Ok(PatternSpec {
            pattern,
            agents: req.agents.clone(),
            task: task.to_string(),
            context_truncation: limit(
                "context_truncation",
                p.context_truncation,
                DEFAULT_CONTEXT_TRUNCATION,
            )?,
            output_truncation: limit(
                "output_truncation",
                p.output_truncation,
                DEFAULT_OUTPUT_TRUNCATION,
            )?,
        })
    }

    /// The effective parameters, as stored and returned.
    pub fn params(&self) -> PatternParams {
        let p = PatternParams {
            context_truncation: self.context_truncation,
            output_truncation: self.output_truncation,
            ..PatternParams::default()
        };
        match &self.pattern {
            Pattern::Parallel | Pattern::PeerReview => p,
            Pattern::Pipeline {
                pass_context,
                stop_on_failure,
            } => PatternParams {
                pass_context: Some(*pass_context),
                stop_on_failure: Some(*stop_on_failure),
                ..p
            },
            Pattern::Debate { rounds } => PatternParams {
                rounds: Some(*rounds),
                ..p
            },
            Pattern::Hierarchical { leader } => PatternParams {
                leader: Some(self.agents[*leader].clone()),
                leader_index: Some(*leader),
                ..p
            },
            Pattern::Consensus {
                max_rounds,
                agreement_threshold,
            } => PatternParams {
                max_rounds: Some(*max_rounds),
                agreement_threshold: Some(*agreement_threshold),
                ..p
            },
        }
    }

    /// How each position is named in contexts: the agent type, or
    /// `<type>#<n>` (1-based position) when the type appears more than once.
    pub fn labels(&self) -> Vec<String> {
        self.agents
            .iter()
            .enumerate()
            .map(|(i, a)| {
                if self.agents.iter().filter(|b| *b == a).count() > 1 {
                    format!("{a}#{}", i + 1)
                } else {
                    a.clone()
                }
            })
            .collect()
    }
}

fn check_agents(kind: PatternKind, agents: &[String]) -> Result<(), SpecError> {
    let min = kind.min_agents();
    if agents.len() < min {
        return Err(SpecError::Agents(format!(
            "the {} pattern needs at least {min} agent(s), got {}",
            kind.as_str(),
            agents.len()
        )));
    }
    if agents.len() > MAX_AGENTS {
        return Err(SpecError::Agents(format!(
            "{} agents; the limit is {MAX_AGENTS}",
            agents.len()
        )));
    }
    for a in agents {
        if a.is_empty() || a.len() > MAX_AGENT_LEN || a.chars().any(char::is_whitespace) {
            return Err(SpecError::Agents(format!(
                "agent type `{a}` must be 1..={MAX_AGENT_LEN} characters without white space"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn req(v: Value) -> RunRequest {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn seed_defaults_fill_in() {
        let s = PatternSpec::from_request(&req(
            json!({"pattern": "pipeline", "agents": ["a", "b"], "task": "t"}),
        ))
        .unwrap();
        assert_eq!(
            s.pattern,
            Pattern::Pipeline {
                pass_context: true,
                stop_on_failure: false
            }
        );
        assert_eq!((s.context_truncation, s.output_truncation), (500, 1000));
        let d = PatternSpec::from_request(&req(
            json!({"pattern": "debate", "agents": ["a", "b"], "task": "t"}),
        ))
        .unwrap();
        assert_eq!(d.pattern, Pattern::Debate { rounds: 2 });
        let c = PatternSpec::from_request(&req(
            json!({"pattern": "consensus", "agents": ["a", "b"], "task": "t"}),
        ))
        .unwrap();
        assert_eq!(
            c.pattern,
            Pattern::Consensus {
                max_rounds: 3,
                agreement_threshold: 0.8
            }
        );
        let h = PatternSpec::from_request(&req(json!({"pattern": "hierarchical",
            "agents": ["w1", "lead", "w2"], "task": "t", "params": {"leader": "lead"}})))
        .unwrap();
        assert_eq!(h.pattern, Pattern::Hierarchical { leader: 1 });
        assert!(PatternKind::parse("peer-review") == Some(PatternKind::PeerReview));
    }

    #[test]
    fn bad_requests_name_the_problem() {
        let err = |v: Value| PatternSpec::from_request(&req(v)).unwrap_err().to_string();
        assert!(
            err(json!({"pattern": "vote", "agents": ["a"], "task": "t"}))
                .contains("unknown pattern `vote`")
        );
        assert!(
            err(json!({"pattern": "debate", "agents": ["a"], "task": "t"}))
                .contains("at least 2 agent(s), got 1")
        );
        assert!(err(
            json!({"pattern": "parallel", "agents": ["a"], "task": "t", "params": {"rounds": 3}})
        )
        .contains("`rounds` does not apply to the parallel pattern"));
        assert!(err(
            json!({"pattern": "debate", "agents": ["a", "b"], "task": "t", "params": {"rounds": 0}})
        )
        .contains("`rounds` must be 1..=10, got 0"));
        assert!(err(
            json!({"pattern": "consensus", "agents": ["a", "b"], "task": "t",
            "params": {"agreement_threshold": 1.5}})
        )
        .contains("within 0..=1"));
        assert!(err(
            json!({"pattern": "hierarchical", "agents": ["a", "b"], "task": "t",
            "params": {"leader": "zed"}})
        )
        .contains("leader `zed` is not one of the agents"));
        assert!(
            err(json!({"pattern": "parallel", "agents": ["a"], "task": "  "}))
                .contains("`task` must not be empty")
        );
        assert!(
            err(json!({"pattern": "parallel", "agents": ["a b"], "task": "t"}))
                .contains("without white space")
        );
        let unknown = serde_json::from_value::<RunRequest>(
            json!({"pattern": "parallel", "agents": ["a"], "task": "t", "params": {"round": 2}}),
        )
        .unwrap_err()
        .to_string();
        assert!(unknown.contains("unknown field `round`"), "{unknown}");
    }

    #[test]
    fn repeated_agent_types_get_positional_labels() {
        let s = PatternSpec::new(
            Pattern::Parallel,
            vec!["x".into(), "y".into(), "x".into()],
            "t",
        );
        assert_eq!(s.labels(), vec!["x#1", "y", "x#3"]);
    }
}
