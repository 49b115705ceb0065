//! Recognising a research pipeline and attaching research state to a new
//! workflow record. A pipeline is a research pipeline when its stages carry
//! the parameter `phase` (`discovering`, `consolidating`, `validating`,
//! `analyzing`, `synthesizing`); the built-in `deep-research` does.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use serde_json::Value;

use super::gates::{Gate, ThresholdError};
use super::state::{ResearchSettings, ResearchState, StreamState, StreamStatus};
use super::Phase;
use crate::workflow::{StageDef, WorkflowRecord};

/// Why a pipeline cannot run as a research pipeline.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResearchSpecError {
    /// `phase` names no working phase.
    #[error("stage `{stage}`: unknown phase `{phase}` (discovering, consolidating, validating, analyzing, synthesizing)")]
    UnknownPhase {
        /// The stage.
        stage: String,
        /// What it said.
        phase: String,
    },
    /// A stage of a research pipeline without a phase.
    #[error("stage `{0}` has no `phase` parameter; every stage of a research pipeline needs one")]
    NoPhase(String),
    /// Human gates do not mix with research phases (yet).
    #[error("stage `{0}` is a human gate; research pipelines cannot contain gates yet (their phase time limits would run while a person decides)")]
    GateInResearch(String),
    /// Two stages claim one phase.
    #[error("phase {phase} is run by both `{first}` and `{second}`")]
    DuplicatePhase {
        /// The phase.
        phase: Phase,
        /// One stage.
        first: String,
        /// The other.
        second: String,
    },
    /// A phase has no stage.
    #[error("no stage runs phase {0}")]
    MissingPhase(Phase),
    /// A stage does not follow the previous phase's stage.
    #[error(
        "stage `{stage}` ({phase}) must depend on `{previous}`, the stage of the phase before it"
    )]
    OutOfOrder {
        /// The stage.
        stage: String,
        /// Its phase.
        phase: Phase,
        /// The stage it must depend on.
        previous: String,
    },
    /// Too many discovery streams.
    #[error("stage `{stage}` fans out to {fan_out} discovery streams; at most {max} are allowed")]
    TooManyStreams {
        /// The stage.
        stage: String,
        /// Its fan-out.
        fan_out: u32,
        /// The configured maximum.
        max: u32,
    },
    /// The stagger alone would outlast the discovery limit.
    #[error("stage `{stage}`: {streams} streams started {stagger_ms} ms apart need {needed_ms} ms, but DISCOVERING is limited to {limit_ms} ms; use a longer time unit or a shorter coordinator.research_stagger")]
    StaggerBeyondLimit {
        /// The stage.
        stage: String,
        /// Its streams.
        streams: u32,
        /// The configured stagger.
        stagger_ms: u64,
        /// (streams - 1) × stagger.
        needed_ms: u64,
        /// The phase limit in ms.
        limit_ms: u64,
    },
    /// Only discovery runs in parallel copies.
    #[error("stage `{0}` fans out, but only the discovery phase runs parallel streams")]
    FanOutOutsideDiscovery(String),
    /// A threshold parameter is wrong.
    #[error(transparent)]
    Threshold(#[from] ThresholdError),
    /// `phase_limit` or `output_key_space` is wrong.
    #[error("stage `{stage}`: {problem}")]
    BadParam {
        /// The stage.
        stage: String,
        /// What is wrong.
        problem: String,
    },
}

fn phase_param(s: &StageDef) -> Option<&Value> {
    s.params.get("phase")
}

/// The limit of the phase `stage` runs, in time units: its `phase_limit`
/// parameter, else its `timeout`.
pub fn phase_limit_units(stage: &StageDef) -> Option<f64> {
    stage
        .params
        .get("phase_limit")
        .and_then(Value::as_f64)
        .or(stage.timeout)
}

fn check_params(s: &StageDef) -> Result<(), ResearchSpecError> {
    let bad = |problem: String| ResearchSpecError::BadParam {
        stage: s.name.clone(),
        problem,
    };
    match s.params.get("phase_limit") {
        None | Some(Value::Null) => {}
        Some(v) if v.as_f64().is_some_and(|x| x.is_finite() && x > 0.0) => {}
        Some(v) => {
            return Err(bad(format!(
                "`phase_limit` must be a positive number of time units, not {v}"
            )))
        }
    }
    match s.params.get("output_key_space") {
        None | Some(Value::Null) | Some(Value::String(_)) => Ok(()),
        Some(v) => Err(bad(format!("`output_key_space` must be a string, not {v}"))),
    }
}

/// Attaches research state to a fresh record when its stages carry phases:
/// checks the phases, thresholds and stream count, staggers the discovery
/// streams and audits INITIALIZING → DISCOVERING. `Ok(false)`: not a
/// research pipeline (nothing changed).
pub fn attach(
    rec: &mut WorkflowRecord,
    pipeline_timeout: Option<f64>,
    settings: &ResearchSettings,
    now: DateTime<Utc>,
) -> Result<bool, ResearchSpecError> {
    if !rec.stages.iter().any(|s| phase_param(s).is_some()) {
        return Ok(false);
    }
    let mut phase_stages: BTreeMap<Phase, String> = BTreeMap::new();
    for s in rec.stages.iter() {
        if s.is_gate() {
            return Err(ResearchSpecError::GateInResearch(s.name.clone()));
        }
        let Some(p) = phase_param(s) else {
            return Err(ResearchSpecError::NoPhase(s.name.clone()));
        };
        let phase = p.as_str().and_then(Phase::parse_working).ok_or_else(|| {
            ResearchSpecError::UnknownPhase {
                stage: s.name.clone(),
                phase: p
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| p.to_string()),
            }
        })?;
        if let Some(first) = phase_stages.insert(phase, s.name.clone()) {
            return Err(ResearchSpecError::DuplicatePhase {
                phase,
                first,
                second: s.name.clone(),
            });
        }
        Gate::from_params(phase, &s.name, &s.params)?;
        check_params(s)?;
        if phase == Phase::Discovering {
            if let Ok(Gate::Discovery(g)) = Gate::from_params(phase, &s.name, &s.params) {
                if s.fan_out < g.min_successful_streams {
                    return Err(ResearchSpecError::BadParam {
                        stage: s.name.clone(),
                        problem: format!(
                            "{} streams can never give the {} successful streams `min_successful_streams` asks for",
                            s.fan_out, g.min_successful_streams
                        ),
                    });
                }
            }
            if s.fan_out > settings.max_streams {
                return Err(ResearchSpecError::TooManyStreams {
                    stage: s.name.clone(),
                    fan_out: s.fan_out,
                    max: settings.max_streams,
                });
            }
        } else if s.fan_out > 1 {
            return Err(ResearchSpecError::FanOutOutsideDiscovery(s.name.clone()));
        }
    }
    let mut previous: Option<&String> = None;
    for p in Phase::WORKING {
        let stage = phase_stages
            .get(&p)
            .ok_or(ResearchSpecError::MissingPhase(p))?;
        if let Some(prev) = previous {
            let def = rec
                .stages
                .iter()
                .find(|s| &s.name == stage)
                .expect("listed");
            if !def.depends_on.contains(prev) {
                return Err(ResearchSpecError::OutOfOrder {
                    stage: stage.clone(),
                    phase: p,
                    previous: prev.clone(),
                });
            }
        }
        previous = Some(stage);
    }
    let discover = phase_stages[&Phase::Discovering].clone();
    let def = rec
        .stages
        .iter()
        .find(|s| s.name == discover)
        .expect("listed");
    let stagger_ms = settings.stagger.as_millis() as u64;
    let needed_ms = stagger_ms.saturating_mul(def.fan_out.saturating_sub(1) as u64);
    if let Some(limit) = phase_limit_units(def) {
        let limit_ms = (limit * rec.unit_ms as f64).round() as u64;
        if needed_ms >= limit_ms {
            return Err(ResearchSpecError::StaggerBeyondLimit {
                stage: discover,
                streams: def.fan_out,
                stagger_ms,
                needed_ms,
                limit_ms,
            });
        }
    }
    let stagger = ChronoDuration::from_std(settings.stagger).unwrap_or_default();
    let mut streams = BTreeMap::new();
    for (key, t) in rec.tasks.iter_mut().filter(|(_, t)| t.stage == discover) {
        let shard = t.shard.unwrap_or(0);
        // The seed's stagger: stream N starts (N-1) × stagger after the first.
        if shard > 0 {
            t.not_before = Some(now + stagger * shard as i32);
        }
        streams.insert(
            shard + 1,
            StreamStatus {
                task: key.clone(),
                state: StreamState::Pending,
                sources: 0,
                started_at: None,
                finished_at: None,
                progress: None,
                eta: None,
                error: None,
                can_continue: None,
                needs_intervention: false,
                keys: Vec::new(),
            },
        );
    }
    let n = streams.len();
    let mut state = ResearchState {
        phase: Phase::Initializing,
        phase_started_at: now,
        phase_stages,
        total_limit_ms: pipeline_timeout.map(|t| (t * rec.unit_ms as f64).round() as u64),
        streams,
        passed: Default::default(),
        gates: Default::default(),
        refused_writes: Vec::new(),
        refused_count: 0,
        pending_writes: Vec::new(),
        stored_keys: 0,
        alert: None,
        paused_ms: 0,
        checkpoints: 0,
        last_checkpoint_at: None,
        audit: Vec::new(),
    };
    state.phase = Phase::Initializing
        .transition(Phase::Discovering)
        .expect("the first transition is legal");
    state.audit(
        now,
        "coordinator",
        "transition",
        format!(
            "INITIALIZING → DISCOVERING: setup complete; {n} streams, {} ms apart",
            settings.stagger.as_millis()
        ),
    );
    // The phases are barriers with their own quality gates, and a failed
    // stream never completes its level: dependency-level reviews (seed
    // 002) would hold the run forever, so research runs have none.
    rec.level_review = None;
    rec.research = Some(state);
    Ok(true)
}
