//! The level review gate (seed 002, docs/LEVEL-REVIEW.md), pure.
//!
//! A stage's level is its dependency depth (roots are level 0). With
//! reviews on, a level is a barrier: when every task of level `n` has
//! completed, the level context is extracted (what each task produced and
//! which resources it reports having modified), conflicts are detected (one
//! resource modified by two or more tasks of the level) and the mode decides
//! whether a review task, key `review@level-<n>`, is added to the workflow.
//! Level `n + 1` starts only once that review completed (or none was
//! needed), and its tasks find the normalised review in
//! `inputs.level_review`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use caucus_shared::outputs::review::{LevelContext, TaskSummary};
use caucus_shared::outputs::review::{ReviewParams, REVIEW_KIND};

use super::build::remaining_paths;
pub use super::level_review_output::Conflict;
use super::level_review_output::{normalise, LevelReview};
use super::{StageDef, StageKind, StageRetry, TaskRecord, TaskRunState, WorkflowRecord};
use crate::pipeline::{LevelReviewSpec, LEVEL_REVIEW_INPUT};

pub use caucus_shared::config::LevelReviewMode;

/// Prefix of review task keys and stage names (`review@level-<n>`); `@`
/// cannot occur in a pipeline's stage names, so they never clash.
pub const REVIEW_STAGE_PREFIX: &str = "review@level-";

/// Most characters of a task's `summary` copied into the level context.
const SUMMARY_KEEP: usize = 500;

/// A pipeline turns reviews on but leaves the agent to the configuration,
/// whose agent type has no capacity in the pipeline.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "level_review: review agent type `{agent}` (coordinator.level_review_agent) \
     has no entry in [capacities]; add it or name the agent in level_review.agent"
)]
pub struct ReviewAgentUnlisted {
    /// The configured review agent type.
    pub agent: String,
}

/// The API's message for it (the submit reply's `invalid_pipeline` error).
impl From<ReviewAgentUnlisted> for String {
    fn from(e: ReviewAgentUnlisted) -> String {
        e.to_string()
    }
}

/// The review settings of one workflow, fixed at submit.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LevelReviewPolicy {
    /// When to review.
    pub mode: LevelReviewMode,
    /// Agent type that runs review tasks.
    pub agent: String,
    /// Expected duration of a review in time units.
    pub expected: f64,
    /// Time limit per review attempt in time units.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<f64>,
    /// Retry policy of review tasks.
    #[serde(default)]
    pub retry: StageRetry,
}

impl LevelReviewPolicy {
    /// The effective policy of a pipeline: its own `level_review` fields,
    /// else the coordinator's defaults. A pipeline that turns reviews on
    /// itself but leaves the agent to the configuration must still list
    /// that agent in `[capacities]` (checked here, at submit, because only
    /// now is the configured agent known).
    pub fn resolve(
        spec: Option<&LevelReviewSpec>,
        capacities: &BTreeMap<String, u32>,
        default_mode: LevelReviewMode,
        default_agent: &str,
    ) -> Result<LevelReviewPolicy, ReviewAgentUnlisted> {
        let mode = spec.and_then(|s| s.mode).unwrap_or(default_mode);
        let agent = spec.and_then(|s| s.agent.clone());
        let explicit_on = spec.and_then(|s| s.mode).is_some() && mode != LevelReviewMode::Off;
        if explicit_on && agent.is_none() && !capacities.contains_key(default_agent) {
            return Err(ReviewAgentUnlisted {
                agent: default_agent.to_string(),
            });
        }
        let retry = spec.and_then(|s| s.retry).unwrap_or_default();
        Ok(LevelReviewPolicy {
            mode,
            agent: agent.unwrap_or_else(|| default_agent.to_string()),
            expected: spec.and_then(|s| s.expected_duration).unwrap_or(1.0),
            timeout: spec.and_then(|s| s.timeout),
            retry: StageRetry {
                max_attempts: retry.max_attempts.max(1),
                backoff_initial_ms: retry.backoff_initial_ms,
                backoff_max_ms: retry.backoff_max_ms,
            },
        })
    }
}

/// The gate decision and result for one completed level, kept on the record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LevelOutcome {
    /// The level.
    pub level: u32,
    /// Conflicts detected in it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<Conflict>,
    /// Key of the review task, when the mode asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_task: Option<String>,
    /// The normalised review, once its task completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<LevelReview>,
}

impl LevelOutcome {
    /// The next level may start.
    pub fn passed(&self) -> bool {
        self.review_task.is_none() || self.review.is_some()
    }
}

/// A workflow's review settings and the outcome of each level so far.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LevelReviewState {
    /// The settings.
    pub policy: LevelReviewPolicy,
    /// One entry per completed level, in level order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<LevelOutcome>,
}

/// Whether `name` is a review stage (or task key).
pub fn is_review_stage(name: &str) -> bool {
    name.starts_with(REVIEW_STAGE_PREFIX)
}

/// Task key (and stage name) of the review of `level`.
pub fn review_key(level: u32) -> String {
    format!("{REVIEW_STAGE_PREFIX}{level}")
}

/// Dependency depth of every pipeline stage (review stages left out).
pub fn stage_levels(stages: &[StageDef]) -> BTreeMap<String, u32> {
    let by_name: BTreeMap<&str, &StageDef> = stages
        .iter()
        .filter(|s| !is_review_stage(&s.name))
        .map(|s| (s.name.as_str(), s))
        .collect();
    fn depth<'a>(
        name: &'a str,
        by_name: &BTreeMap<&'a str, &'a StageDef>,
        memo: &mut BTreeMap<String, u32>,
        guard: usize,
    ) -> u32 {
        if let Some(d) = memo.get(name) {
            return *d;
        }
        // Stages are validated acyclic; the guard only stops a corrupt record.
        let d = match by_name.get(name) {
            Some(s) if guard > 0 => s
                .depends_on
                .iter()
                .map(|dep| depth(dep, by_name, memo, guard - 1) + 1)
                .max()
                .unwrap_or(0),
            _ => 0,
        };
        memo.insert(name.to_string(), d);
        d
    }
    let mut memo = BTreeMap::new();
    for name in by_name.keys() {
        depth(name, &by_name, &mut memo, by_name.len());
    }
    memo.retain(|k, _| by_name.contains_key(k.as_str()));
    memo
}

/// The resources a task output reports having modified: `modified_resources`
/// (caucus) and `files_modified` (the seed), each a list of strings or of
/// objects with `resource`, `path` or `file_path`. Trimmed, `./` dropped,
/// sorted, de-duplicated.
pub fn modified_resources(output: &Value) -> Vec<String> {
    let mut out = BTreeSet::new();
    for field in ["modified_resources", "files_modified"] {
        let Some(items) = output.get(field).and_then(Value::as_array) else {
            continue;
        };
        for item in items {
            let raw = match item {
                Value::String(s) => Some(s.as_str()),
                Value::Object(m) => ["resource", "path", "file_path"]
                    .iter()
                    .find_map(|k| m.get(*k).and_then(Value::as_str)),
                _ => None,
            };
            if let Some(r) = raw.map(normalise_resource).filter(|r| !r.is_empty()) {
                out.insert(r);
            }
        }
    }
    out.into_iter().collect()
}

fn normalise_resource(r: &str) -> String {
    let r = r.trim();
    r.strip_prefix("./").unwrap_or(r).to_string()
}

/// Resources modified by two or more of `tasks`, sorted by resource.
pub fn detect_conflicts(tasks: &[TaskSummary]) -> Vec<Conflict> {
    let mut by_resource: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for t in tasks {
        for r in &t.modified_resources {
            by_resource.entry(r).or_default().insert(&t.task);
        }
    }
    by_resource
        .into_iter()
        .filter(|(_, ts)| ts.len() >= 2)
        .map(|(r, ts)| Conflict {
            resource: r.to_string(),
            tasks: ts.into_iter().map(str::to_string).collect(),
        })
        .collect()
}

/// Whether `mode` asks for a review of a level with `conflicts`.
pub fn needs_review(mode: LevelReviewMode, conflicts: &[Conflict]) -> bool {
    match mode {
        LevelReviewMode::Off => false,
        LevelReviewMode::Always => true,
        LevelReviewMode::Conflicts => !conflicts.is_empty(),
    }
}

impl WorkflowRecord {
    /// Sets the review settings of a fresh workflow.
    pub fn with_level_review(mut self, policy: LevelReviewPolicy) -> Self {
        self.level_review = Some(LevelReviewState {
            policy,
            levels: Vec::new(),
        });
        self
    }

    fn reviews_on(&self) -> Option<&LevelReviewState> {
        self.level_review
            .as_ref()
            .filter(|s| s.policy.mode != LevelReviewMode::Off)
    }

    /// The context of `level` from its tasks as they are now.
    pub fn level_context(&self, level: u32, levels: &BTreeMap<String, u32>) -> LevelContext {
        let tasks = self
            .tasks
            .iter()
            .filter(|(_, t)| levels.get(&t.stage) == Some(&level))
            .map(|(k, t)| {
                let out = t.output.as_ref().unwrap_or(&Value::Null);
                TaskSummary {
                    task: k.clone(),
                    stage: t.stage.clone(),
                    agent_type: t.agent_type.clone(),
                    modified_resources: modified_resources(out),
                    summary: out
                        .get("summary")
                        .and_then(Value::as_str)
                        .map(|s| s.chars().take(SUMMARY_KEEP).collect()),
                    finished_at: t.finished_at,
                }
            })
            .collect();
        LevelContext { level, tasks }
    }

    /// The hook of [`WorkflowRecord::promote_waiting`]: records completed
    /// reviews, and for each newly completed level decides on a review,
    /// adding its task (ready) when needed. Returns the review keys made
    /// ready and the stage levels for [`Self::level_gate_open`] (empty when
    /// reviews are off: no gate).
    pub(crate) fn advance_level_reviews(&mut self) -> (Vec<String>, BTreeMap<String, u32>) {
        let Some(state) = self.reviews_on() else {
            return (Vec::new(), BTreeMap::new());
        };
        let policy = state.policy.clone();
        self.absorb_reviews();
        let levels = stage_levels(&self.stages);
        let Some(&top) = levels.values().max() else {
            return (Vec::new(), levels);
        };
        let mut ready = Vec::new();
        for level in 0..=top {
            let decided = self
                .level_review
                .as_ref()
                .and_then(|s| s.levels.iter().find(|o| o.level == level));
            if let Some(o) = decided {
                if o.passed() {
                    continue;
                }
                break;
            }
            let complete = self
                .tasks
                .values()
                .filter(|t| levels.get(&t.stage) == Some(&level))
                .all(|t| t.state == TaskRunState::Completed);
            if !complete {
                break;
            }
            let context = self.level_context(level, &levels);
            let conflicts = detect_conflicts(&context.tasks);
            // A level of human gates only did no agent work to review.
            let gates_only = levels
                .iter()
                .filter(|(_, l)| **l == level)
                .all(|(s, _)| self.stages.iter().any(|d| &d.name == s && d.is_gate()));
            let wanted = !gates_only && needs_review(policy.mode, &conflicts);
            let review_task = wanted.then(|| {
                let key = self.add_review_task(&policy, &context, &conflicts, &levels, top);
                ready.push(key.clone());
                key
            });
            let waits = review_task.is_some();
            if let Some(s) = self.level_review.as_mut() {
                s.levels.push(LevelOutcome {
                    level,
                    conflicts,
                    review_task,
                    review: None,
                });
            }
            if waits {
                break;
            }
        }
        (ready, levels)
    }

    fn add_review_task(
        &mut self,
        policy: &LevelReviewPolicy,
        context: &LevelContext,
        conflicts: &[Conflict],
        levels: &BTreeMap<String, u32>,
        top: u32,
    ) -> String {
        let level = context.level;
        let key = review_key(level);
        let depends_on: Vec<String> = levels
            .iter()
            .filter(|(_, l)| **l == level)
            .map(|(s, _)| s.clone())
            .collect();
        // The review sits on the path of every next-level stage.
        let paths = remaining_paths(&self.stages);
        let tail = levels
            .iter()
            .filter(|(_, l)| **l == level + 1)
            .filter_map(|(s, _)| paths.get(s))
            .fold(0.0, |a: f64, b| a.max(*b));
        std::sync::Arc::make_mut(&mut self.stages).push(StageDef {
            name: key.clone(),
            agent_type: policy.agent.clone(),
            depends_on,
            expected: policy.expected,
            timeout: policy.timeout,
            retry: policy.retry,
            fan_out: 1,
            params: caucus_shared::outputs::to_value(&ReviewParams {
                kind: REVIEW_KIND.into(),
                level,
                next_level: (level < top).then_some(level + 1),
                mode: policy.mode.as_str().into(),
                context: context.clone(),
                conflicts: conflicts.to_vec(),
            }),
            kind: StageKind::Task,
        });
        self.tasks.insert(
            key.clone(),
            TaskRecord::new(
                key.clone(),
                policy.agent.clone(),
                None,
                TaskRunState::Ready,
                policy.expected + tail,
            ),
        );
        key
    }

    /// Normalises the output of every review task that completed (again
    /// after a re-run of the review, so the latest answer counts).
    fn absorb_reviews(&mut self) {
        let Some(state) = self.level_review.as_ref() else {
            return;
        };
        let mut done = Vec::new();
        for (i, o) in state.levels.iter().enumerate() {
            let Some(key) = &o.review_task else {
                continue;
            };
            let Some(t) = self.tasks.get(key) else {
                continue;
            };
            if t.state != TaskRunState::Completed {
                continue;
            }
            let measured = match (t.started_at.or(t.dispatched_at), t.finished_at) {
                (Some(s), Some(f)) => (f - s).num_milliseconds().max(0) as u64,
                _ => 0,
            };
            let out = t.output.clone().unwrap_or(Value::Null);
            done.push((i, normalise(o.level, &o.conflicts, &out, measured)));
        }
        if let Some(s) = self.level_review.as_mut() {
            for (i, review) in done {
                s.levels[i].review = Some(review);
            }
        }
    }

    /// Whether tasks of `stage` may become ready as far as the review gate
    /// is concerned: always without reviews and for review tasks (absent
    /// from `levels`); else when every earlier level has passed its gate.
    pub(crate) fn level_gate_open(&self, stage: &str, levels: &BTreeMap<String, u32>) -> bool {
        let Some(state) = self.reviews_on() else {
            return true;
        };
        let Some(&level) = levels.get(stage) else {
            return true;
        };
        (0..level).all(|l| {
            state
                .levels
                .iter()
                .find(|o| o.level == l)
                .is_some_and(LevelOutcome::passed)
        })
    }

    /// The review a task of `stage` receives as `inputs.level_review`: the
    /// review of the level just before it, when one ran.
    pub(crate) fn level_review_input(&self, stage: &str) -> Option<(&'static str, Value)> {
        let state = self.reviews_on()?;
        // Most workflows never get a review: skip computing levels then.
        if state.levels.iter().all(|o| o.review.is_none()) {
            return None;
        }
        let level = *stage_levels(&self.stages).get(stage)?;
        let prev = level.checked_sub(1)?;
        let review = state
            .levels
            .iter()
            .find(|o| o.level == prev)?
            .review
            .as_ref()?;
        serde_json::to_value(review)
            .ok()
            .map(|v| (LEVEL_REVIEW_INPUT, v))
    }
}

/// Level review's part in the record's transitions: the previous level's
/// review is an input of the next level's tasks, and a level's tasks wait
/// for the review gate of the levels before them.
pub(crate) struct LevelReviewHook;

impl super::RecordHook for LevelReviewHook {
    fn task_input(&self, rec: &WorkflowRecord, stage: &str) -> Option<(&'static str, Value)> {
        rec.level_review_input(stage)
    }

    fn before_promote(&self, rec: &mut WorkflowRecord) -> super::Promotion {
        let (ready, levels) = rec.advance_level_reviews();
        let admits: Option<super::hooks::Admits> = if levels.is_empty() {
            None
        } else {
            Some(Box::new(move |rec: &WorkflowRecord, stage: &str| {
                rec.level_gate_open(stage, &levels)
            }))
        };
        super::Promotion { ready, admits }
    }
}
