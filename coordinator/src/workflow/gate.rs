//! Human gates and re-runs: pure rules over a workflow record.
//!
//! A gate stage is a task nobody dispatches. When its dependencies complete
//! it *opens* (`awaiting_approval`) and waits for a person: approve completes
//! it (dependents go on), reject fails the workflow, send-back runs the named
//! upstream stages again and reopens the gate when they finish. A re-run
//! (a gate's send-back, or an override whose downstream impact requires it)
//! renews exactly the listed tasks, in groups: a group starts when the
//! previous one completed, so a serial plan is one task per group.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{TaskRecord, TaskRunState, WorkflowRecord, WorkflowState};

/// Agent type recorded for gate tasks (they never reach a work queue).
pub const GATE_AGENT: &str = "gate";

/// A gate's life beyond its task state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateState {
    /// When it last opened (its dependencies had all completed).
    pub opened_at: DateTime<Utc>,
    /// Reminders sent since it opened.
    #[serde(default)]
    pub reminders_sent: u32,
    /// When the wait was escalated, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalated_at: Option<DateTime<Utc>>,
    /// Earlier decisions that sent the work back, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<GateDecision>,
    /// The final decision (approve or reject).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<GateDecision>,
}

/// What a person decides at a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateAction {
    /// The work stands; dependents run.
    Approve,
    /// The analysis is refused; the workflow fails.
    Reject,
    /// Upstream stages run again; the gate reopens after them.
    SendBack,
}

impl GateAction {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            GateAction::Approve => "approve",
            GateAction::Reject => "reject",
            GateAction::SendBack => "send_back",
        }
    }
}

/// A recorded decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateDecision {
    /// What was decided.
    pub action: GateAction,
    /// Who decided (`auto` for an automatic approval).
    pub decided_by: String,
    /// Why.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rationale: String,
    /// When.
    pub at: DateTime<Utc>,
    /// Milliseconds from the gate opening to this decision.
    pub response_ms: i64,
    /// Send-back only: the stages run again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub send_back_to: Vec<String>,
    /// Reminders that had been sent when it was decided.
    #[serde(default)]
    pub reminders_sent: u32,
    /// Whether the wait had been escalated.
    #[serde(default)]
    pub escalated: bool,
}

/// A decision as requested (validated by [`WorkflowRecord::decide_gate`]).
#[derive(Debug, Clone, PartialEq)]
pub struct GateRequest {
    /// What to do.
    pub action: GateAction,
    /// Who decides.
    pub decided_by: String,
    /// Why (required to reject or send back).
    pub rationale: String,
    /// Send-back: stages to run again (default: the gate's dependencies).
    pub send_back_to: Vec<String>,
}

/// Why a gate decision or a re-run was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GateError {
    /// No gate is open in this workflow (or none with that name).
    #[error("no open gate{} in workflow {workflow_id}", .gate.as_ref().map(|g| format!(" `{g}`")).unwrap_or_default())]
    NoOpenGate {
        /// The workflow.
        workflow_id: String,
        /// The gate asked for.
        gate: Option<String>,
    },
    /// More than one gate is open; the request must name one.
    #[error("gates {0:?} are open; name one with `gate`")]
    Ambiguous(Vec<String>),
    /// The workflow already completed or failed.
    #[error("workflow {workflow_id} is {state}")]
    Finished {
        /// The workflow.
        workflow_id: String,
        /// Its state.
        state: WorkflowState,
    },
    /// The workflow is pausing, paused or resuming.
    #[error("workflow {workflow_id} is {state}; resume it first")]
    NotRunning {
        /// The workflow.
        workflow_id: String,
        /// Its state.
        state: WorkflowState,
    },
    /// A reason is required for this action.
    #[error("`rationale` is required to {0}")]
    RationaleRequired(&'static str),
    /// A named stage or task does not exist.
    #[error("unknown stage or task `{0}`")]
    Unknown(String),
    /// A send-back target is not upstream of the gate.
    #[error("stage `{stage}` is not upstream of gate `{gate}`")]
    NotUpstream {
        /// The target.
        stage: String,
        /// The gate.
        gate: String,
    },
    /// Work the gate depends on is running again.
    #[error("gate `{gate}` cannot be approved while {pending:?} run again")]
    RerunsPending {
        /// The gate.
        gate: String,
        /// Tasks upstream of it that are not complete.
        pending: Vec<String>,
    },
    /// A re-run plan with no task.
    #[error("the re-run plan names no task")]
    EmptyPlan,
}

impl GateError {
    /// A stable error code for the API.
    pub fn code(&self) -> &'static str {
        match self {
            GateError::NoOpenGate { .. } => "no_open_gate",
            GateError::Ambiguous(_) => "ambiguous_gate",
            GateError::Finished { .. } => "workflow_finished",
            GateError::NotRunning { .. } => "workflow_not_running",
            GateError::RationaleRequired(_) => "bad_request",
            GateError::Unknown(_) => "not_found",
            GateError::NotUpstream { .. } => "bad_request",
            GateError::RerunsPending { .. } => "reruns_pending",
            GateError::EmptyPlan => "bad_request",
        }
    }
}

/// What a decision changed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GateOutcome {
    /// The gate decided.
    pub gate: String,
    /// Tasks that became ready.
    pub newly_ready: Vec<String>,
    /// Tasks renewed by a send-back.
    pub renewed: Vec<String>,
    /// The workflow completed (approval of its last stage).
    pub workflow_completed: bool,
}

/// A reminder or escalation that is due for an open gate.
#[derive(Debug, Clone, PartialEq)]
pub struct GateNotice {
    /// The gate's task key.
    pub gate: String,
    /// 1-based reminder number; 0 for the escalation.
    pub reminder: u32,
    /// Whether this is the escalation.
    pub escalation: bool,
    /// How long the gate has waited.
    pub waiting_ms: i64,
}

/// When to remind and escalate an open gate.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GateTimers {
    /// Reminders after these waits (ascending).
    pub reminders: Vec<Duration>,
    /// Escalate after this wait (none: never).
    pub escalate_after: Option<Duration>,
}

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

/// An impact report's estimate of what a re-run task will produce, and
/// what it did produce: `gate show` and the workflow record show how far
/// off the estimate was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerunEstimate {
    /// The task key (the impact report's `analysis_id`).
    pub task: String,
    /// What it produces, e.g. `target_price`.
    pub output_metric: String,
    /// Its result before the re-run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<f64>,
    /// The estimated result.
    pub estimate: f64,
    /// How it was estimated, e.g. `linear sensitivity`.
    pub estimate_method: String,
    /// The re-run's result (its stage's `params.impact.result`), rounded
    /// to 2 decimals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual: Option<f64>,
    /// `actual − estimate`, rounded to 2 decimals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<f64>,
}

/// `v` rounded to 2 decimals.
fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
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
    fn is_gate_task(&self, t: &TaskRecord) -> bool {
        self.stages.iter().any(|s| s.name == t.stage && s.is_gate())
    }

    /// Ready gates open: they wait for a person instead of a worker.
    /// Returns the keys opened.
    pub fn open_gates(&mut self, now: DateTime<Utc>) -> Vec<String> {
        let keys: Vec<String> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.state == TaskRunState::Ready && self.is_gate_task(t))
            .map(|(k, _)| k.clone())
            .collect();
        for k in &keys {
            if let Some(t) = self.tasks.get_mut(k) {
                t.state = TaskRunState::AwaitingApproval;
                t.not_before = None;
                let history = t.gate.take().map(|g| g.history).unwrap_or_default();
                t.gate = Some(Box::new(GateState {
                    opened_at: now,
                    reminders_sent: 0,
                    escalated_at: None,
                    history,
                    decision: None,
                }));
            }
        }
        keys
    }

    /// Keys of the gates waiting for a decision.
    pub fn open_gate_keys(&self) -> Vec<String> {
        self.tasks
            .iter()
            .filter(|(_, t)| t.state == TaskRunState::AwaitingApproval)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Debates the completed tasks' outputs name (`debate_ids`, e.g. the
    /// built-in valuation's margin debate), in task order, once each.
    pub fn named_debates(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for t in self.tasks.values() {
            if t.state != TaskRunState::Completed {
                continue;
            }
            let ids = t
                .output
                .as_ref()
                .and_then(|o| o.get("debate_ids"))
                .and_then(Value::as_array);
            for id in ids.into_iter().flatten().filter_map(Value::as_str) {
                if !out.iter().any(|x| x == id) {
                    out.push(id.to_string());
                }
            }
        }
        out
    }

    /// Stages `stage` depends on, directly or not.
    pub fn upstream_of(&self, stage: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut todo = vec![stage.to_string()];
        while let Some(s) = todo.pop() {
            if let Some(def) = self.stages.iter().find(|d| d.name == s) {
                for d in &def.depends_on {
                    if out.insert(d.clone()) {
                        todo.push(d.clone());
                    }
                }
            }
        }
        out
    }

    /// `stages` and every stage depending on one of them, directly or not.
    pub fn downstream_of(&self, stages: &BTreeSet<String>) -> BTreeSet<String> {
        let mut out = stages.clone();
        loop {
            let more: Vec<String> = self
                .stages
                .iter()
                .filter(|s| !out.contains(&s.name))
                .filter(|s| s.depends_on.iter().any(|d| out.contains(d)))
                .map(|s| s.name.clone())
                .collect();
            if more.is_empty() {
                return out;
            }
            out.extend(more);
        }
    }

    fn check_decidable(&self) -> Result<(), GateError> {
        if self.state.is_terminal() {
            return Err(GateError::Finished {
                workflow_id: self.workflow_id.clone(),
                state: self.state,
            });
        }
        if !self.state.accepts_dispatch() {
            return Err(GateError::NotRunning {
                workflow_id: self.workflow_id.clone(),
                state: self.state,
            });
        }
        Ok(())
    }

    /// The open gate a request means: the named one, or the only one open.
    pub fn pick_open_gate(&self, gate: Option<&str>) -> Result<String, GateError> {
        let open = self.open_gate_keys();
        match gate {
            Some(g) if open.iter().any(|k| k == g) => Ok(g.to_string()),
            Some(g) => Err(GateError::NoOpenGate {
                workflow_id: self.workflow_id.clone(),
                gate: Some(g.to_string()),
            }),
            None => match open.len() {
                0 => Err(GateError::NoOpenGate {
                    workflow_id: self.workflow_id.clone(),
                    gate: None,
                }),
                1 => Ok(open[0].clone()),
                _ => Err(GateError::Ambiguous(open)),
            },
        }
    }

    /// Tasks upstream of `gate` that are not complete.
    pub fn pending_upstream(&self, gate: &str) -> Vec<String> {
        let Some(stage) = self.tasks.get(gate).map(|t| t.stage.clone()) else {
            return Vec::new();
        };
        let up = self.upstream_of(&stage);
        self.tasks
            .iter()
            .filter(|(_, t)| up.contains(&t.stage) && t.state != TaskRunState::Completed)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Applies a person's decision at an open gate.
    pub fn decide_gate(
        &mut self,
        gate: Option<&str>,
        req: GateRequest,
        now: DateTime<Utc>,
    ) -> Result<GateOutcome, GateError> {
        self.check_decidable()?;
        let key = self.pick_open_gate(gate)?;
        let stage = self.tasks[&key].stage.clone();
        let rationale = req.rationale.trim().to_string();
        match req.action {
            GateAction::Approve => {
                let pending = self.pending_upstream(&key);
                if !pending.is_empty() {
                    return Err(GateError::RerunsPending { gate: key, pending });
                }
            }
            GateAction::Reject if rationale.is_empty() => {
                return Err(GateError::RationaleRequired("reject"))
            }
            GateAction::SendBack if rationale.is_empty() => {
                return Err(GateError::RationaleRequired("send back"))
            }
            _ => {}
        }
        let targets: Vec<String> = if req.action == GateAction::SendBack {
            let up = self.upstream_of(&stage);
            let targets = if req.send_back_to.is_empty() {
                self.stages
                    .iter()
                    .find(|s| s.name == stage)
                    .map(|s| s.depends_on.clone())
                    .unwrap_or_default()
            } else {
                req.send_back_to.clone()
            };
            for t in &targets {
                if !self.stages.iter().any(|s| &s.name == t) {
                    return Err(GateError::Unknown(t.clone()));
                }
                if !up.contains(t) {
                    return Err(GateError::NotUpstream {
                        stage: t.clone(),
                        gate: stage.clone(),
                    });
                }
            }
            targets
        } else {
            Vec::new()
        };

        let t = self.tasks.get_mut(&key).expect("picked an open gate");
        let g = t.gate.get_or_insert_with(|| {
            Box::new(GateState {
                opened_at: now,
                reminders_sent: 0,
                escalated_at: None,
                history: Vec::new(),
                decision: None,
            })
        });
        let decision = GateDecision {
            action: req.action,
            decided_by: req.decided_by.clone(),
            rationale: rationale.clone(),
            at: now,
            response_ms: (now - g.opened_at).num_milliseconds().max(0),
            send_back_to: targets.clone(),
            reminders_sent: g.reminders_sent,
            escalated: g.escalated_at.is_some(),
        };
        self.updated_at = now;
        let mut out = GateOutcome {
            gate: key.clone(),
            ..GateOutcome::default()
        };
        match req.action {
            GateAction::Approve => {
                g.decision = Some(decision.clone());
                t.state = TaskRunState::Completed;
                t.finished_at = Some(now);
                t.output = Some(json!({ "gate": decision }));
                t.output_key = None;
                let (ready, done) = self.after_completion(now);
                out.newly_ready = ready;
                out.workflow_completed = done;
            }
            GateAction::Reject => {
                g.decision = Some(decision.clone());
                t.state = TaskRunState::Failed;
                t.finished_at = Some(now);
                t.output = Some(json!({ "gate": decision }));
                t.output_key = None;
                let who = if req.decided_by.is_empty() {
                    "a reviewer".to_string()
                } else {
                    req.decided_by.clone()
                };
                self.failure = Some(format!("rejected at gate {key} by {who}: {rationale}"));
                self.state = WorkflowState::Failed;
                self.finished_at = Some(now);
            }
            GateAction::SendBack => {
                g.history.push(decision);
                let stages = self.downstream_of(&targets.iter().cloned().collect());
                let keys: Vec<String> = self
                    .tasks
                    .iter()
                    .filter(|(_, t)| stages.contains(&t.stage))
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in &keys {
                    if let Some(t) = self.tasks.get_mut(k) {
                        if renew(t) {
                            out.renewed.push(k.clone());
                        }
                    }
                }
                let n = self.reruns.len() + 1;
                self.reruns.push(RerunRecord {
                    rerun_id: format!("rerun-{n}"),
                    reason: format!("sent back at gate {key}: {rationale}"),
                    requested_by: req.decided_by,
                    requested_at: now,
                    groups: vec![out.renewed.clone()],
                    next_group: 0,
                    not_yet_run: Vec::new(),
                    assumptions: BTreeMap::new(),
                    completed_at: None,
                    estimates: Vec::new(),
                });
                out.newly_ready = self.after_completion(now).0;
            }
        }
        Ok(out)
    }

    /// Reminders and escalations due now for every open gate; marks them sent.
    pub fn gate_notices(&mut self, now: DateTime<Utc>, timers: &GateTimers) -> Vec<GateNotice> {
        let keys = self.open_gate_keys();
        keys.iter()
            .flat_map(|k| self.gate_notices_for(k, now, timers))
            .collect()
    }

    /// Reminders and escalations due now for the open gate `key`.
    pub fn gate_notices_for(
        &mut self,
        key: &str,
        now: DateTime<Utc>,
        timers: &GateTimers,
    ) -> Vec<GateNotice> {
        let mut out = Vec::new();
        let Some(g) = self
            .tasks
            .get_mut(key)
            .filter(|t| t.state == TaskRunState::AwaitingApproval)
            .and_then(|t| t.gate.as_mut())
        else {
            return out;
        };
        let waited = (now - g.opened_at).to_std().unwrap_or_default();
        let waiting_ms = waited.as_millis() as i64;
        let due = timers.reminders.iter().filter(|d| **d <= waited).count() as u32;
        if due > g.reminders_sent {
            // Only the latest one: after a coordinator outage a person
            // gets one reminder, not a burst of stale ones.
            g.reminders_sent = due;
            out.push(GateNotice {
                gate: key.to_string(),
                reminder: due,
                escalation: false,
                waiting_ms,
            });
        }
        if g.escalated_at.is_none() && timers.escalate_after.is_some_and(|e| e <= waited) {
            g.escalated_at = Some(now);
            out.push(GateNotice {
                gate: key.to_string(),
                reminder: 0,
                escalation: true,
                waiting_ms,
            });
        }
        if !out.is_empty() {
            self.updated_at = now;
        }
        out
    }

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

    /// A debate settled `metric` at `value` (a binding resolution): every
    /// later dispatch gets it, and each completed task of a stage declaring
    /// `params.impact` with `used` (a JSON pointer to the value its output
    /// says it used) that used another value runs again, followed by its
    /// completed dependents (gates excepted). `None` when nothing changed.
    pub fn settle_assumption(
        &mut self,
        metric: &str,
        value: f64,
        reason: String,
        requested_by: String,
        now: DateTime<Utc>,
    ) -> Option<RerunOutcome> {
        if self.state == WorkflowState::Failed {
            return None;
        }
        let already = self
            .resolved_assumptions
            .get(metric)
            .and_then(Value::as_f64)
            .is_some_and(|v| (v - value).abs() < 1e-12);
        let stale: Vec<String> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.state == TaskRunState::Completed)
            .filter(|(_, t)| {
                let Some(imp) = self
                    .stages
                    .iter()
                    .find(|s| s.name == t.stage)
                    .and_then(|s| s.params.get("impact"))
                else {
                    return false;
                };
                let uses = imp["inputs"]
                    .as_array()
                    .is_none_or(|a| a.is_empty() || a.iter().any(|x| x == metric));
                let used = imp["used"]
                    .as_str()
                    .and_then(|p| t.output.as_ref()?.pointer(p))
                    .and_then(Value::as_f64);
                uses && used.is_some_and(|u| (u - value).abs() > 1e-9)
            })
            .map(|(k, _)| k.clone())
            .collect();
        if stale.is_empty() && already {
            return None;
        }
        let stages: BTreeSet<String> = stale.iter().map(|k| self.tasks[k].stage.clone()).collect();
        let after = self.downstream_of(&stages);
        let followers: Vec<String> = self
            .tasks
            .iter()
            .filter(|(k, t)| {
                !stale.contains(k)
                    && after.contains(&t.stage)
                    && t.state == TaskRunState::Completed
                    && !self.is_gate_task(t)
            })
            .map(|(k, _)| k.clone())
            .collect();
        let mut groups = vec![stale];
        if !followers.is_empty() {
            groups.push(followers);
        }
        groups.retain(|g| !g.is_empty());
        self.request_rerun(
            RerunRequest {
                reason,
                requested_by,
                groups,
                assumptions: BTreeMap::from([(metric.to_string(), json!(value))]),
                estimates: Vec::new(),
            },
            now,
        )
        .ok()
    }

    /// Releases the next group of the running re-run once the current one
    /// completed; marks re-runs done.
    fn advance_reruns(&mut self, now: DateTime<Utc>) {
        self.record_actuals();
        let Some(r) = self.reruns.last_mut() else {
            return;
        };
        while r.completed_at.is_none() {
            let current_done = r.groups.get(r.next_group).is_none_or(|g| {
                g.iter().all(|k| {
                    self.tasks
                        .get(k)
                        .is_none_or(|t| t.state == TaskRunState::Completed)
                })
            });
            if !current_done {
                return;
            }
            r.next_group += 1;
            match r.groups.get(r.next_group) {
                Some(g) => {
                    for k in g {
                        if let Some(t) = self.tasks.get_mut(k) {
                            t.held = false;
                        }
                    }
                }
                None => r.completed_at = Some(now),
            }
        }
    }

    /// Fills in the actual result of each estimate of the running (last)
    /// re-run whose task completed again: its output at its stage's
    /// `params.impact.result` pointer.
    fn record_actuals(&mut self) {
        let Some(r) = self.reruns.last() else {
            return;
        };
        let actuals: Vec<(usize, f64)> = r
            .estimates
            .iter()
            .enumerate()
            .filter(|(_, e)| e.actual.is_none())
            .filter_map(|(i, e)| {
                let t = self.tasks.get(&e.task)?;
                if t.state != TaskRunState::Completed {
                    return None;
                }
                let pointer = self
                    .stages
                    .iter()
                    .find(|s| s.name == t.stage)?
                    .params
                    .get("impact")?
                    .get("result")?
                    .as_str()?;
                let v = t.output.as_ref()?.pointer(pointer)?;
                caucus_shared::messages::assumption_value(v).map(|v| (i, v))
            })
            .collect();
        if actuals.is_empty() {
            return;
        }
        let r = self.reruns.last_mut().expect("checked above");
        for (i, v) in actuals {
            let e = &mut r.estimates[i];
            e.actual = Some(round2(v));
            e.error = Some(round2(v - e.estimate));
        }
    }

    /// After a task (or gate) completed: release re-run steps, promote
    /// waiting tasks, open gates, and settle the workflow's completion.
    /// Returns the keys newly ready for dispatch and whether it completed.
    pub(crate) fn after_completion(&mut self, now: DateTime<Utc>) -> (Vec<String>, bool) {
        self.advance_reruns(now);
        let mut ready = self.promote_waiting();
        let opened = self.open_gates(now);
        ready.retain(|k| !opened.contains(k));
        let done = self
            .tasks
            .values()
            .all(|t| t.state == TaskRunState::Completed);
        if done {
            self.state = WorkflowState::Completed;
            self.finished_at = Some(now);
        }
        (ready, done)
    }
}

/// Makes a task that ran (or is running) run again; `false` when it has not
/// run yet (it will run once, with whatever the workflow holds by then).
fn renew(t: &mut TaskRecord) -> bool {
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
