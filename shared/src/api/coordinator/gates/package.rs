//! `coordinator.gate`'s reply: the decision package, everything a person
//! needs to decide at a gate.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::super::status::TaskState;
use super::{GateAction, OpenGate, RerunRecord};
use crate::api::facilitator::{DebateSummary, Precedent, ProvisionalReply};

/// The decision package of one open gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionPackage {
    /// The gate, as `coordinator.gates` lists it.
    pub gate: OpenGate,
    /// The workflow.
    pub workflow_id: String,
    /// The item it analyses.
    pub item: String,
    /// Its pipeline.
    pub pipeline: String,
    /// Every task of the workflow, by key.
    pub tasks: Vec<PackageTask>,
    /// The item's findings published by this workflow's tasks, oldest
    /// first, each once (as its newest run stated it); at most 500.
    pub findings: Vec<PackageFinding>,
    /// The workflow's debates not resolved yet (`facilitator.debates`
    /// entries).
    pub open_debates: Vec<DebateSummary>,
    /// Provisional decisions awaiting review (`facilitator.provisional`'s
    /// reply; none when no facilitator runs).
    pub provisional: ProvisionalReply,
    /// Precedents the workflow's debates cite.
    pub precedents: Vec<Precedent>,
    /// Assumptions settled by debates or reviews (metric → value).
    pub resolved_assumptions: BTreeMap<String, Value>,
    /// Re-runs of the workflow's tasks, oldest first.
    pub reruns: Vec<RerunRecord>,
    /// Whether `gate_decide` would accept an approval now.
    pub can_approve: bool,
    /// What blocks approval, one sentence each (empty when it can approve).
    pub blocking: Vec<String>,
    /// The decisions possible at the gate.
    pub actions: Vec<GateAction>,
    /// Why the facilitator's debates are missing, when it did not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facilitator: Option<String>,
}

/// One task of the workflow in a decision package.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackageTask {
    /// The task key.
    pub task: String,
    /// Its stage.
    pub stage: String,
    /// The agent type that runs it.
    pub agent_type: String,
    /// Where it is.
    pub state: TaskState,
    /// When it last finished, if it did.
    pub finished_at: Option<DateTime<Utc>>,
    /// Whether it ran again (it keeps its previous output).
    pub rerun: bool,
}

/// One finding in a decision package.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PackageFinding {
    /// The agent that published it.
    pub from_agent: String,
    /// What was found, in one line.
    pub finding: String,
    /// How sure the agent is, 0..=1; null when the message did not say
    /// (findings from outside services are listed as they came).
    pub confidence: Option<f64>,
    /// Supporting evidence.
    #[serde(default)]
    pub evidence: Vec<String>,
    /// Implication for other agents.
    #[serde(default)]
    pub impact: Option<String>,
    /// The measured quantity, e.g. `operating_margin`.
    #[serde(default)]
    pub metric: Option<String>,
    /// Its value (a number, or any JSON such as a rating).
    #[serde(default)]
    pub value: Option<Value>,
    /// When it was published; null when the message did not say.
    pub timestamp: Option<DateTime<Utc>>,
    /// Its id across its task's runs (`<task_id>:finding:<index>`), when
    /// the worker's message id states it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding_id: Option<String>,
}
