//! Checkpoints and resume plans (the seed's DependencyResolver), pure.
//!
//! A checkpoint is what a paused workflow had: completed tasks with their
//! outputs, failed tasks with their errors, tasks still in flight, and the
//! rest. From the stage DAG and a checkpoint, [`resolve`] gives
//! `{restart, skip, wait}` (task keys):
//! - `skip`: every completed task (a resume never re-runs one);
//! - `restart`: the failed tasks and all their dependents, plus every other
//!   task not yet run: everything that will be dispatched (again);
//! - `wait`: in-flight tasks, whose results are awaited — or, with
//!   [`InFlightPolicy::Restart`], they go to `restart` as a new attempt.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use caucus_shared::messages::ResumePlan;
use caucus_shared::task::TaskError;

use super::{IllegalTransition, StageDef, TaskRunState, WorkflowRecord, WorkflowState};

/// Version of the stored checkpoint.
pub const CHECKPOINT_SCHEMA_VERSION: u32 = 1;

// The `resume` request names it: its type lives with the API.
pub use caucus_shared::api::coordinator::control::InFlightPolicy;

/// A completed task in a checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CompletedTask {
    /// Stage.
    pub stage: String,
    /// Agent type.
    pub agent_type: String,
    /// The attempt that completed.
    pub attempt: u32,
    /// Its output.
    #[serde(default)]
    pub output: Value,
    /// When it finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
}

/// A failed task in a checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FailedTask {
    /// Stage.
    pub stage: String,
    /// Agent type.
    pub agent_type: String,
    /// The last attempt.
    pub attempt: u32,
    /// Its error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<TaskError>,
}

/// An in-flight task in a checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct InFlightTask {
    /// Stage.
    pub stage: String,
    /// Agent type.
    pub agent_type: String,
    /// `dispatched` or `running`.
    pub state: TaskRunState,
    /// The attempt in flight.
    pub attempt: u32,
    /// The worker running it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
}

/// The state of a workflow saved on pause (KV bucket `checkpoints`, key =
/// `checkpoint_id` = `<workflow_id>.<pause seq>`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Checkpoint {
    /// Stored-record version.
    pub schema_version: u32,
    /// `<workflow_id>.<pause seq>`.
    pub checkpoint_id: String,
    /// The workflow.
    pub workflow_id: String,
    /// Its item.
    pub item: String,
    /// Its pipeline.
    pub pipeline: String,
    /// When it was taken.
    pub created_at: DateTime<Utc>,
    /// Why the workflow paused.
    pub reason: String,
    /// Who paused it.
    pub trigger_source: String,
    /// Completed tasks with outputs.
    pub completed: BTreeMap<String, CompletedTask>,
    /// Failed tasks with errors.
    pub failed: BTreeMap<String, FailedTask>,
    /// Tasks in flight when it paused.
    pub in_flight: BTreeMap<String, InFlightTask>,
    /// Tasks not started (waiting or ready).
    pub pending: Vec<String>,
    /// The stage DAG.
    pub stages: Vec<StageDef>,
}

/// Checkpoint id of a workflow's pause number `seq`.
pub fn checkpoint_id(workflow_id: &str, seq: u32) -> String {
    format!("{workflow_id}.{seq}")
}

impl Checkpoint {
    /// The checkpoint of `rec` as it is now.
    pub fn of(rec: &WorkflowRecord, now: DateTime<Utc>) -> Checkpoint {
        let mut completed = BTreeMap::new();
        let mut failed = BTreeMap::new();
        let mut in_flight = BTreeMap::new();
        let mut pending = Vec::new();
        for (k, t) in &rec.tasks {
            match t.state {
                TaskRunState::Completed => {
                    completed.insert(
                        k.clone(),
                        CompletedTask {
                            stage: t.stage.clone(),
                            agent_type: t.agent_type.clone(),
                            attempt: t.attempt,
                            output: t.output.clone().unwrap_or(Value::Null),
                            finished_at: t.finished_at,
                        },
                    );
                }
                TaskRunState::Failed => {
                    failed.insert(
                        k.clone(),
                        FailedTask {
                            stage: t.stage.clone(),
                            agent_type: t.agent_type.clone(),
                            attempt: t.attempt,
                            error: t.error.clone(),
                        },
                    );
                }
                TaskRunState::Dispatched | TaskRunState::Running => {
                    in_flight.insert(
                        k.clone(),
                        InFlightTask {
                            stage: t.stage.clone(),
                            agent_type: t.agent_type.clone(),
                            state: t.state,
                            attempt: t.attempt,
                            worker_id: t.worker_id.clone(),
                        },
                    );
                }
                TaskRunState::Waiting | TaskRunState::Ready | TaskRunState::AwaitingApproval => {
                    pending.push(k.clone())
                }
            }
        }
        let (reason, trigger_source, seq) = match &rec.pause {
            Some(p) => (p.reason.clone(), p.trigger_source.clone(), p.seq),
            None => (String::new(), String::new(), rec.pause_count),
        };
        Checkpoint {
            schema_version: CHECKPOINT_SCHEMA_VERSION,
            checkpoint_id: checkpoint_id(&rec.workflow_id, seq),
            workflow_id: rec.workflow_id.clone(),
            item: rec.item.clone(),
            pipeline: rec.pipeline.clone(),
            created_at: now,
            reason,
            trigger_source,
            completed,
            failed,
            in_flight,
            pending,
            stages: rec.stages.to_vec(),
        }
    }

    fn stage_of<'a>(&'a self, key: &'a str) -> Option<&'a str> {
        self.completed
            .get(key)
            .map(|t| t.stage.as_str())
            .or_else(|| self.failed.get(key).map(|t| t.stage.as_str()))
            .or_else(|| self.in_flight.get(key).map(|t| t.stage.as_str()))
            .or_else(|| {
                self.pending
                    .iter()
                    .any(|p| p == key)
                    .then(|| key.split('#').next().unwrap_or(key))
            })
    }
}

/// Stages downstream of `from` (transitively), `from` included.
fn downstream(stages: &[StageDef], from: &BTreeSet<String>) -> BTreeSet<String> {
    let mut dependents: HashMap<&str, Vec<&str>> = HashMap::new();
    for s in stages {
        for d in &s.depends_on {
            dependents.entry(d.as_str()).or_default().push(&s.name);
        }
    }
    let mut out: BTreeSet<String> = from.clone();
    let mut stack: Vec<String> = from.iter().cloned().collect();
    while let Some(s) = stack.pop() {
        for d in dependents.get(s.as_str()).into_iter().flatten() {
            if out.insert(d.to_string()) {
                stack.push(d.to_string());
            }
        }
    }
    out
}

/// The resume plan of a checkpoint (see the module docs).
pub fn resolve(cp: &Checkpoint, policy: InFlightPolicy) -> ResumePlan {
    let failed_stages: BTreeSet<String> = cp.failed.values().map(|t| t.stage.clone()).collect();
    let affected = downstream(&cp.stages, &failed_stages);
    let mut restart: BTreeSet<String> = cp.failed.keys().cloned().collect();
    let mut wait = BTreeSet::new();
    for k in &cp.pending {
        restart.insert(k.clone());
    }
    for k in cp.in_flight.keys() {
        let downstream_of_failure = cp.stage_of(k).is_some_and(|s| affected.contains(s));
        if policy == InFlightPolicy::Restart || downstream_of_failure {
            restart.insert(k.clone());
        } else {
            wait.insert(k.clone());
        }
    }
    ResumePlan {
        restart: restart.into_iter().collect(),
        skip: cp.completed.keys().cloned().collect(),
        wait: wait.into_iter().collect(),
    }
}

/// Why a resume could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    /// Not paused.
    #[error(transparent)]
    Illegal(#[from] IllegalTransition),
    /// The plan contradicts the record.
    #[error("invalid resume plan: {0}")]
    InvalidPlan(String),
}

impl WorkflowRecord {
    /// The plan a resume would follow now (the stored checkpoint plus any
    /// late results recorded since).
    pub fn resume_plan(&self, policy: InFlightPolicy, now: DateTime<Utc>) -> ResumePlan {
        let mut plan = resolve(&Checkpoint::of(self, now), policy);
        self.research_adjust_plan(&mut plan);
        plan
    }

    /// PAUSED → RESUMING → RUNNING following `plan`: failed and restarted
    /// in-flight tasks get a fresh attempt (and a fresh retry budget),
    /// completed tasks are kept. Returns the keys given a new attempt.
    pub fn resume(
        &mut self,
        plan: &ResumePlan,
        now: DateTime<Utc>,
    ) -> Result<Vec<String>, ResumeError> {
        self.check_resume()?;
        for k in plan.restart.iter().chain(&plan.skip).chain(&plan.wait) {
            if !self.tasks.contains_key(k) {
                return Err(ResumeError::InvalidPlan(format!(
                    "task `{k}` is not part of workflow {}",
                    self.workflow_id
                )));
            }
        }
        if let Some(k) = plan
            .restart
            .iter()
            .find(|k| self.tasks[*k].state == TaskRunState::Completed)
        {
            return Err(ResumeError::InvalidPlan(format!(
                "task `{k}` completed; a resume never re-runs a completed task"
            )));
        }
        let paused_since = self.pause.as_ref().map(|p| p.requested_at);
        self.state = WorkflowState::Resuming;
        let mut renewed = Vec::new();
        for k in &plan.restart {
            let Some(t) = self.tasks.get_mut(k) else {
                continue;
            };
            if matches!(
                t.state,
                TaskRunState::Failed | TaskRunState::Dispatched | TaskRunState::Running
            ) {
                t.new_attempt();
                renewed.push(k.clone());
            }
        }
        // A failure may leave no in-flight task and nothing ready: promote
        // the renewed tasks whose dependencies are complete.
        self.promote_waiting();
        self.open_gates(now);
        self.pause = None;
        self.failure = None;
        self.state = WorkflowState::Running;
        self.updated_at = now;
        for hook in crate::hooks::record_hooks() {
            hook.on_resume(self, paused_since, &renewed, now);
        }
        Ok(renewed)
    }
}
