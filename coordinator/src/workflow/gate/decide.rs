//! A person's decision at an open gate: approve, reject or send back.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::json;

use super::super::{TaskRunState, WorkflowRecord, WorkflowState};
use super::error::GateError;
use super::rerun::{renew, RerunRecord};
use super::state::{GateAction, GateDecision, GateRequest, GateState};
use super::trace::GateEvent;

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

impl WorkflowRecord {
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
        let decided_by = req.decided_by.clone();
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
        self.trace_gate(GateEvent {
            name: "gate.decided",
            gate: &key,
            decision: req.action.as_str(),
            by: &decided_by,
        });
        Ok(out)
    }
}
