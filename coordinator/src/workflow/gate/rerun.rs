//! Re-runs. A re-run (a gate's send-back, or an override whose downstream
//! impact requires it) renews exactly the listed tasks, in groups: a group
//! starts when the previous one completed, so a serial plan is one task per
//! group.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::super::{TaskRecord, TaskRunState, WorkflowRecord, WorkflowState};
use super::error::GateError;
use super::estimate::RerunEstimate;

/// One re-run request and its progress.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerunRecord {
    /// `rerun-<n>` within the workflow.
    pub rerun_id: String,
    /// Why (e.g. `override of debate D-1: operating_margin 0.25 → 0.28`).
    pub reason: String,
    /// Who asked (a reviewer, `facilitator`).
    pub requested_by: String,
    /// When.
    pub requested_at: DateTime<Utc>,
    /// Task keys in order: a group starts once the previous one completed.
    pub groups: Vec<Vec<String>>,
    /// Index of the group running now (`groups.len()` when done).
    pub next_group: usize,
    /// Listed tasks that had not run yet: they run once, with the new inputs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_yet_run: Vec<String>,
    /// Assumptions it settled (merged into the workflow's).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub assumptions: BTreeMap<String, Value>,
    /// When the last group completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<DateTime<Utc>>,
    /// The impact report's estimates of the re-run tasks' results, each
    /// with the actual result once its task ran again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub estimates: Vec<RerunEstimate>,
}

/// A re-run as requested.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RerunRequest {
    /// Why.
    pub reason: String,
    /// Who asks.
    pub requested_by: String,
    /// Task keys or stage names, in groups run one after another.
    pub groups: Vec<Vec<String>>,
    /// Assumptions to settle for every task dispatched from now on.
    pub assumptions: BTreeMap<String, Value>,
    /// Estimates of the re-run tasks' results (a gate override's impact
    /// report), kept in the re-run record with the actual results.
    pub estimates: Vec<RerunEstimate>,
}

/// What a re-run changed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RerunOutcome {
    /// The new re-run's id.
    pub rerun_id: String,
    /// Tasks renewed (they run again).
    pub renewed: Vec<String>,
    /// Listed tasks that had not run yet.
    pub not_yet_run: Vec<String>,
    /// Tasks that became ready now.
    pub newly_ready: Vec<String>,
}

impl WorkflowRecord {
    /// Runs exactly the listed tasks again (see the module docs).
    pub fn request_rerun(
        &mut self,
        req: RerunRequest,
        now: DateTime<Utc>,
    ) -> Result<RerunOutcome, GateError> {
        if self.state == WorkflowState::Failed {
            return Err(GateError::Finished {
                workflow_id: self.workflow_id.clone(),
                state: self.state,
            });
        }
        if !self.state.accepts_dispatch() && self.state != WorkflowState::Completed {
            return Err(GateError::NotRunning {
                workflow_id: self.workflow_id.clone(),
                state: self.state,
            });
        }
        // Resolve names (a stage means all its copies); keep first mention.
        let mut seen = BTreeSet::new();
        let mut groups: Vec<Vec<String>> = Vec::new();
        for g in &req.groups {
            let mut keys = Vec::new();
            for name in g {
                let matched: Vec<String> = if self.tasks.contains_key(name) {
                    vec![name.clone()]
                } else {
                    self.tasks
                        .iter()
                        .filter(|(_, t)| &t.stage == name)
                        .map(|(k, _)| k.clone())
                        .collect()
                };
                if matched.is_empty() {
                    return Err(GateError::Unknown(name.clone()));
                }
                for k in matched {
                    if self.is_gate_task(&self.tasks[&k]) {
                        return Err(GateError::Unknown(format!("{k} (a gate, not a task)")));
                    }
                    if seen.insert(k.clone()) {
                        keys.push(k);
                    }
                }
            }
            groups.push(keys);
        }
        let mut out = RerunOutcome::default();
        let mut plan: Vec<Vec<String>> = Vec::new();
        for g in groups {
            let mut kept = Vec::new();
            for k in g {
                let t = self.tasks.get_mut(&k).expect("resolved above");
                if renew(t) {
                    out.renewed.push(k.clone());
                    kept.push(k);
                } else {
                    out.not_yet_run.push(k);
                }
            }
            if !kept.is_empty() {
                plan.push(kept);
            }
        }
        if plan.is_empty() && out.not_yet_run.is_empty() {
            if req.assumptions.is_empty() {
                return Err(GateError::EmptyPlan);
            }
            // Only settles assumptions: tasks dispatched from now on get them.
            for (k, v) in req.assumptions {
                self.resolved_assumptions.insert(k, v);
            }
            self.updated_at = now;
            return Ok(out);
        }
        for g in plan.iter().skip(1) {
            for k in g {
                if let Some(t) = self.tasks.get_mut(k) {
                    t.held = true;
                }
            }
        }
        for (k, v) in &req.assumptions {
            self.resolved_assumptions.insert(k.clone(), v.clone());
        }
        out.rerun_id = format!("rerun-{}", self.reruns.len() + 1);
        let done = plan.is_empty();
        self.reruns.push(RerunRecord {
            rerun_id: out.rerun_id.clone(),
            reason: req.reason,
            requested_by: req.requested_by,
            requested_at: now,
            next_group: 0,
            groups: plan,
            not_yet_run: out.not_yet_run.clone(),
            assumptions: req.assumptions,
            completed_at: done.then_some(now),
            estimates: req.estimates,
        });
        if !done && self.state == WorkflowState::Completed {
            self.state = WorkflowState::Running;
            self.finished_at = None;
        }
        self.updated_at = now;
        out.newly_ready = self.after_completion(now).0;
        Ok(out)
    }
}

/// Makes a task that ran (or is running) run again; `false` when it has not
/// run yet (it will run once, with whatever the workflow holds by then).
pub(super) fn renew(t: &mut TaskRecord) -> bool {
    match t.state {
        TaskRunState::Completed
        | TaskRunState::Failed
        | TaskRunState::Dispatched
        | TaskRunState::Running => {
            if t.state == TaskRunState::Completed {
                t.previous_output = t.output.take();
                t.previous_output_key = t.output_key.take();
            }
            t.new_attempt();
            t.error = None;
            t.output = None;
            t.output_key = None;
            true
        }
        TaskRunState::AwaitingApproval => {
            // A gate downstream of sent-back work closes until it reopens.
            t.state = TaskRunState::Waiting;
            false
        }
        TaskRunState::Waiting | TaskRunState::Ready => false,
    }
}
