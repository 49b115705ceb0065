//! A research run as a workflow view shows it (docs/RESEARCH.md): the
//! record's research state without its audit trail (only the count) and
//! without the writes not stored yet.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The research side of a workflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResearchView {
    /// The current phase (`DISCOVERING`, `SYNTHESIZING`, `COMPLETE`, …).
    pub phase: String,
    /// When the current phase began.
    pub phase_started_at: DateTime<Utc>,
    /// The stage that runs each working phase, by phase.
    pub phase_stages: BTreeMap<String, String>,
    /// Limit on the whole run (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_limit_ms: Option<u64>,
    /// Discovery streams by number (1-based).
    #[serde(default)]
    pub streams: BTreeMap<u32, StreamView>,
    /// Stages whose gate passed.
    #[serde(default)]
    pub passed: BTreeSet<String>,
    /// Every phase gate's decision so far, by phase.
    #[serde(default)]
    pub gates: BTreeMap<String, ResearchGateView>,
    /// Writes refused by key-space isolation (the first 100).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_writes: Vec<RefusedWriteView>,
    /// Refused writes in all.
    #[serde(default)]
    pub refused_count: u32,
    /// Keys stored in the research bucket.
    #[serde(default)]
    pub stored_keys: u32,
    /// The alert card of a failed or escalated run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert: Option<ResearchAlertView>,
    /// Time spent paused (ms); the time limits do not count it.
    #[serde(default)]
    pub paused_ms: u64,
    /// Progress checkpoints stored.
    #[serde(default)]
    pub checkpoints: u32,
    /// When the last one was stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_checkpoint_at: Option<DateTime<Utc>>,
    /// Entries in the audit trail (`coordinator.audit` reads them).
    #[serde(default)]
    pub audit_entries: usize,
}

/// One discovery stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamView {
    /// Its task key (`discover#0`).
    pub task: String,
    /// `pending`, `running`, `complete`, `insufficient`, `failed` or
    /// `timed_out`.
    pub state: String,
    /// Sources it found.
    #[serde(default)]
    pub sources: u32,
    /// When a worker started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    /// When it finished, failed or was timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    /// The last progress message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// When it should finish: start + the stage's expected duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta: Option<DateTime<Utc>>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Whether the run went on without it (set by the gate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub can_continue: Option<bool>,
    /// Whether a person was asked to step in.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub needs_intervention: bool,
    /// Keys it stored in its key space.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
}

/// A phase gate's decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResearchGateView {
    /// The phase whose gate this is.
    pub phase: String,
    /// `pass`, `pass_with_fallback` or `fail`.
    pub verdict: String,
    /// Why (requirements missed, fallbacks taken); empty on a clean pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    /// A person must look.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub escalate: bool,
    /// The measured figures the gate compared.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metrics: BTreeMap<String, f64>,
}

/// A write refused by key-space isolation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedWriteView {
    /// The task key (`discover#1`).
    pub task: String,
    /// The key it tried.
    pub key: String,
    /// Why it was refused.
    pub reason: String,
}

/// The alert card of a failed or escalated research run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResearchAlertView {
    /// `workflow_escalated` or `research_failed`.
    pub event_type: String,
    /// `critical` or `warning`.
    pub severity: String,
    /// Why.
    pub reason: String,
    /// Published.
    #[serde(default)]
    pub sent: bool,
}
