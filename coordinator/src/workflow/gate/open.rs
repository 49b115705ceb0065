//! Open gates: opening the ready ones, finding the one a request means,
//! and what an open gate waits on.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::super::{TaskRecord, TaskRunState, WorkflowRecord};
use super::error::GateError;
use super::state::GateState;
use super::trace::GateEvent;

impl WorkflowRecord {
    pub(super) fn is_gate_task(&self, t: &TaskRecord) -> bool {
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
        for k in &keys {
            self.trace_gate(GateEvent {
                name: "gate.opened",
                gate: k,
                decision: "",
                by: "",
            });
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
}
