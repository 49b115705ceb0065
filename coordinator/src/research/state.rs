//! What a research run keeps on its workflow record.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::audit::{append, AuditEntry};
use super::gates::GateDecision;
use super::isolation::{KeyWrite, RefusedWrite};
use super::Phase;

/// Refused writes listed in status, at most (all are audited).
pub const MAX_REFUSED_LISTED: usize = 100;

/// The coordinator settings research runs use (`[coordinator]` keys
/// `research_*`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResearchSettings {
    /// Delay between the starts of two discovery streams (seed: 2 s).
    pub stagger: Duration,
    /// Discovery streams per run, at most (seed: 5).
    pub max_streams: u32,
    /// Period of the progress checkpoints (seed: 3 min).
    pub checkpoint_interval: Duration,
}

impl Default for ResearchSettings {
    fn default() -> Self {
        ResearchSettings {
            stagger: Duration::from_secs(2),
            max_streams: 5,
            checkpoint_interval: Duration::from_secs(180),
        }
    }
}

impl From<&caucus_shared::config::CoordinatorConfig> for ResearchSettings {
    fn from(c: &caucus_shared::config::CoordinatorConfig) -> Self {
        ResearchSettings {
            stagger: c.research_stagger,
            max_streams: c.research_max_streams,
            checkpoint_interval: c.research_checkpoint_interval,
        }
    }
}

/// Where one discovery stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StreamState {
    /// Not started (waiting for its stagger slot or capacity).
    Pending,
    /// A worker reported it started.
    Running,
    /// Finished with enough sources.
    Complete,
    /// Finished with fewer sources than the gate asks.
    Insufficient,
    /// Its agent failed.
    Failed,
    /// Still running when the discovery phase ran out of time.
    TimedOut,
}

/// One discovery stream: the seed's progress / completion / error signals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamStatus {
    /// Its task key (`discover#0`).
    pub task: String,
    /// Where it is.
    pub state: StreamState,
    /// Sources it found.
    #[serde(default)]
    pub sources: u32,
    /// When a worker started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    /// When it finished, failed or was timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    /// The last progress message (a `progress` event's text, or the
    /// agent's `progress: {items_done, items_total}` when it finished).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// When it should finish: start + the stage's expected duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta: Option<DateTime<Utc>>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Error signal: whether the run went on without it (set by the gate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub can_continue: Option<bool>,
    /// Error signal: whether a person was asked to step in.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub needs_intervention: bool,
    /// Keys it stored in its key space.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
}

/// An alert card still to publish (then `sent`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResearchAlert {
    /// `workflow_escalated` (a person must act) or `research_failed`.
    pub event_type: String,
    /// `critical` or `warning`.
    pub severity: String,
    /// Why.
    pub reason: String,
    /// Published.
    #[serde(default)]
    pub sent: bool,
}

/// The research side of a workflow record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResearchState {
    /// Current phase.
    pub phase: Phase,
    /// When the current phase began (its time limit counts from here).
    pub phase_started_at: DateTime<Utc>,
    /// The stage that runs each working phase.
    pub phase_stages: BTreeMap<Phase, String>,
    /// Limit on the whole run in ms (the pipeline `timeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_limit_ms: Option<u64>,
    /// Discovery streams by number (1-based).
    #[serde(default)]
    pub streams: BTreeMap<u32, StreamStatus>,
    /// Stages whose gate passed (their dependents may start).
    #[serde(default)]
    pub passed: BTreeSet<String>,
    /// Every gate decision so far.
    #[serde(default)]
    pub gates: BTreeMap<Phase, GateDecision>,
    /// Writes refused by key-space isolation (the first
    /// [`MAX_REFUSED_LISTED`]; every one is audited).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_writes: Vec<RefusedWrite>,
    /// Refused writes in all.
    #[serde(default)]
    pub refused_count: u32,
    /// Accepted writes not yet stored in the research bucket.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending_writes: Vec<KeyWrite>,
    /// Keys stored in the research bucket.
    #[serde(default)]
    pub stored_keys: u32,
    /// Alert card for a failed or escalated run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert: Option<ResearchAlert>,
    /// Time spent paused (ms); the time limits do not count it.
    #[serde(default)]
    pub paused_ms: u64,
    /// Progress checkpoints stored.
    #[serde(default)]
    pub checkpoints: u32,
    /// When the last one was stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_checkpoint_at: Option<DateTime<Utc>>,
    /// `timestamp | agent | action | result`, oldest first.
    #[serde(default)]
    pub audit: Vec<AuditEntry>,
}

impl ResearchState {
    /// Appends an audit entry.
    pub fn audit(&mut self, at: DateTime<Utc>, agent: &str, action: &str, result: String) {
        append(
            &mut self.audit,
            AuditEntry {
                at,
                agent: agent.to_string(),
                action: action.to_string(),
                result,
            },
        );
    }

    /// The working phase a stage runs.
    pub fn phase_of(&self, stage: &str) -> Option<Phase> {
        self.phase_stages
            .iter()
            .find(|(_, s)| s.as_str() == stage)
            .map(|(p, _)| *p)
    }

    /// Records a refused write (listed up to [`MAX_REFUSED_LISTED`]).
    pub fn refuse(&mut self, w: RefusedWrite) {
        self.refused_count += 1;
        if self.refused_writes.len() < MAX_REFUSED_LISTED {
            self.refused_writes.push(w);
        }
    }

    /// The status-API view: everything but the audit trail and the
    /// unstored writes.
    pub fn status_json(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Some(m) = v.as_object_mut() {
            m.remove("audit");
            m.remove("pending_writes");
            m.insert("audit_entries".into(), Value::from(self.audit.len()));
        }
        v
    }
}
