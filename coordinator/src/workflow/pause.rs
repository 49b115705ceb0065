//! The pause state machine of one workflow (pure):
//! RUNNING → PAUSING → PAUSED → RESUMING → RUNNING. Pausing stops dispatch;
//! in-flight tasks finish (their results are recorded) and the workflow is
//! PAUSED once none is left, or at once with `cancel_in_flight`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{TaskRunState, Tier, WorkflowRecord, WorkflowState};

/// The current pause of a workflow, stored on its record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PauseInfo {
    /// 1 for the first pause of the workflow, +1 per pause.
    pub seq: u32,
    /// Why, shown to people.
    pub reason: String,
    /// Who asked: `human`, `api`, `tier2_failure`, `tier3_failure`,
    /// `batch`, `correlator`, `gate_timeout`, …
    pub trigger_source: String,
    /// When the pause was requested.
    pub requested_at: DateTime<Utc>,
    /// When it reached PAUSED.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_at: Option<DateTime<Utc>>,
    /// Paused without waiting for in-flight tasks.
    #[serde(default)]
    pub cancel_in_flight: bool,
    /// Failure tier that caused it (2 or 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<u8>,
    /// A person has been alerted (tier 3); dispatch stays stopped until
    /// someone resumes it.
    #[serde(default)]
    pub escalated: bool,
    /// Tasks that failed beyond their tier-1 handling.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_tasks: Vec<String>,
    /// Set once the checkpoint is stored and `pause_complete` published.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_id: Option<String>,
    /// Indices of the reminders already sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reminders_sent: Vec<usize>,
    /// The batch that paused it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
    /// The failure correlation behind the batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
}

impl PauseInfo {
    /// Paused because a human gate timed out (resumed first in batches).
    pub fn is_gate_timeout(&self) -> bool {
        self.trigger_source == "gate_timeout"
    }
}

/// A pause request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PauseSpec {
    /// Why.
    pub reason: String,
    /// Who asked.
    pub trigger_source: String,
    /// Do not wait for in-flight tasks.
    pub cancel_in_flight: bool,
    /// The failure tier behind it.
    pub tier: Option<Tier>,
    /// The task that failed.
    pub failed_task: Option<String>,
    /// Batch link.
    pub batch_id: Option<String>,
    /// Correlation link.
    pub correlation_id: Option<String>,
}

/// What a pause request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseOutcome {
    /// Waiting for in-flight tasks.
    Pausing,
    /// Paused at once.
    Paused,
    /// It was already pausing or paused (the request is merged: a tier-3
    /// failure still escalates, a batch still links).
    AlreadyPaused,
}

/// A state change the machine does not allow.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("illegal transition {from} → {to} for workflow {workflow_id}: {why}")]
pub struct IllegalTransition {
    /// The workflow.
    pub workflow_id: String,
    /// Its state.
    pub from: WorkflowState,
    /// The state asked for.
    pub to: WorkflowState,
    /// Why not.
    pub why: String,
}

impl WorkflowRecord {
    /// Keys of tasks dispatched or running.
    pub fn in_flight(&self) -> Vec<String> {
        self.tasks
            .iter()
            .filter(|(_, t)| matches!(t.state, TaskRunState::Dispatched | TaskRunState::Running))
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn illegal(&self, to: WorkflowState, why: &str) -> IllegalTransition {
        IllegalTransition {
            workflow_id: self.workflow_id.clone(),
            from: self.state,
            to,
            why: why.to_string(),
        }
    }

    /// Starts a pause (or merges into the current one).
    pub fn request_pause(
        &mut self,
        spec: PauseSpec,
        now: DateTime<Utc>,
    ) -> Result<PauseOutcome, IllegalTransition> {
        match self.state {
            WorkflowState::Completed | WorkflowState::Failed => Err(self.illegal(
                WorkflowState::Pausing,
                "the workflow has finished; only a running or pending workflow can be paused",
            )),
            WorkflowState::Pausing | WorkflowState::Paused => {
                let p = self.pause.get_or_insert_with(|| PauseInfo {
                    seq: self.pause_count.max(1),
                    reason: spec.reason.clone(),
                    trigger_source: spec.trigger_source.clone(),
                    requested_at: now,
                    paused_at: None,
                    cancel_in_flight: false,
                    tier: None,
                    escalated: false,
                    failed_tasks: Vec::new(),
                    checkpoint_id: None,
                    reminders_sent: Vec::new(),
                    batch_id: None,
                    correlation_id: None,
                });
                merge(p, &spec);
                self.updated_at = now;
                Ok(PauseOutcome::AlreadyPaused)
            }
            WorkflowState::Pending | WorkflowState::Running | WorkflowState::Resuming => {
                self.pause_count += 1;
                let mut p = PauseInfo {
                    seq: self.pause_count,
                    reason: spec.reason.clone(),
                    trigger_source: spec.trigger_source.clone(),
                    requested_at: now,
                    paused_at: None,
                    cancel_in_flight: spec.cancel_in_flight,
                    tier: None,
                    escalated: false,
                    failed_tasks: Vec::new(),
                    checkpoint_id: None,
                    reminders_sent: Vec::new(),
                    batch_id: None,
                    correlation_id: None,
                };
                merge(&mut p, &spec);
                self.pause = Some(p);
                self.state = WorkflowState::Pausing;
                self.updated_at = now;
                for hook in crate::hooks::record_hooks() {
                    hook.on_pause(self, &spec.trigger_source, &spec.reason, now);
                }
                Ok(if self.settle_pause(now) {
                    PauseOutcome::Paused
                } else {
                    PauseOutcome::Pausing
                })
            }
        }
    }

    /// PAUSING → PAUSED once nothing is in flight (or at once when the
    /// pause cancels in-flight tasks). True when it moved.
    pub(crate) fn settle_pause(&mut self, now: DateTime<Utc>) -> bool {
        if self.state != WorkflowState::Pausing {
            return false;
        }
        let cancel = self.pause.as_ref().is_some_and(|p| p.cancel_in_flight);
        if !cancel && !self.in_flight().is_empty() {
            return false;
        }
        self.state = WorkflowState::Paused;
        if let Some(p) = self.pause.as_mut() {
            p.paused_at = Some(now);
        }
        self.updated_at = now;
        true
    }

    /// Whether a resume may start now.
    pub fn check_resume(&self) -> Result<(), IllegalTransition> {
        match self.state {
            WorkflowState::Paused => Ok(()),
            WorkflowState::Pausing => Err(self.illegal(
                WorkflowState::Resuming,
                "still pausing (in-flight tasks finishing); resume once it is paused",
            )),
            _ => Err(self.illegal(
                WorkflowState::Resuming,
                "only a paused workflow can be resumed",
            )),
        }
    }

    /// When the current pause reached PAUSED.
    pub fn paused_at(&self) -> Option<DateTime<Utc>> {
        self.pause.as_ref().and_then(|p| p.paused_at)
    }
}

fn merge(p: &mut PauseInfo, spec: &PauseSpec) {
    if let Some(t) = spec.tier {
        p.tier = Some(p.tier.unwrap_or(0).max(t.number()));
        if t == Tier::Escalate {
            p.escalated = true;
        }
    }
    if let Some(k) = &spec.failed_task {
        if !p.failed_tasks.contains(k) {
            p.failed_tasks.push(k.clone());
        }
    }
    if p.batch_id.is_none() {
        p.batch_id = spec.batch_id.clone();
    }
    if p.correlation_id.is_none() {
        p.correlation_id = spec.correlation_id.clone();
    }
}
