//! Reminders and escalations for gates left waiting.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::super::{TaskRunState, WorkflowRecord};
use super::trace::GateEvent;

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

impl WorkflowRecord {
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
        for n in &out {
            let what = if n.escalation {
                "escalation".to_string()
            } else {
                format!("reminder {}", n.reminder)
            };
            self.trace_gate(GateEvent {
                name: "gate.reminded",
                gate: key,
                decision: &what,
                by: "",
            });
        }
        if !out.is_empty() {
            self.updated_at = now;
        }
        out
    }
}
