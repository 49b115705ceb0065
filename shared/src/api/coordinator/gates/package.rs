//! `coordinator.gate`'s reply: the decision package, everything a person
//! needs to decide at a gate.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::super::status::TaskState;
use super::{GateAction, OpenGate, RerunRecord};
use crate::api::facilitator::{DebateSummary, Precedent, ProvisionalReply};
use crate::envelope::Priority;

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
    /// The item's findings: those published by this workflow's tasks (each
    /// once, as its newest run stated it) and every finding about the item
    /// addressed to an agent (`to_agent` set: outside services, other
    /// agents' runs) within `coordinator.findings_lookback`; the newest 500
    /// at most, listed oldest first.
    pub findings: Vec<PackageFinding>,
    /// High or critical findings that arrived after the analysis their
    /// addressee made for this workflow (the workflow's `late_finding`
    /// flags), oldest first. They do not block approval: each names the
    /// re-run that would apply it.
    #[serde(default)]
    pub late_findings: Vec<LateFindingView>,
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
    /// Its id: for this workflow's task, its id across the task's runs
    /// (`<task_id>:finding:<index>`) when the worker's message id states
    /// it; otherwise (a finding from outside) its envelope `id`, what a
    /// confirmation's `correlation_id` names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding_id: Option<String>,
    /// Who it is for as sent (`valuation_agent`, `valuation` or `all`);
    /// null for a finding addressed to no one (what the workflow's own
    /// agents publish).
    #[serde(default)]
    pub to_agent: Option<String>,
    /// The envelope's priority; null when it did not say or said
    /// something unknown.
    #[serde(default)]
    pub priority: Option<Priority>,
    /// Who published it, relative to this workflow.
    #[serde(default)]
    pub source: FindingSource,
    /// When JetStream stored it.
    #[serde(default)]
    pub stored_at: Option<DateTime<Utc>>,
    /// It was stored after a task of this workflow it addresses had
    /// completed: that analysis did not see it.
    #[serde(default)]
    pub late: bool,
    /// A late finding: the completed stages it arrived after, whose re-run
    /// would apply it.
    #[serde(default)]
    pub rerun_stages: Vec<String>,
    /// The sender asked for a `confirmation`.
    #[serde(default)]
    pub requires_response: bool,
    /// Whether a confirmation came; null when none was asked for.
    #[serde(default)]
    pub answered: Option<bool>,
    /// Whether the addressee used it (its confirmation, or a task of this
    /// workflow listing it in `applied_findings`); null when not reported.
    #[serde(default)]
    pub used: Option<bool>,
    /// How it was used, or why not, as the addressee said.
    #[serde(default)]
    pub answer_note: Option<String>,
}

/// Who published a finding, relative to the workflow of the package.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingSource {
    /// A task of this workflow (its `correlation_id` or
    /// `content.workflow_id` names the workflow).
    #[default]
    Agent,
    /// An outside service, or another workflow's agent, addressing an
    /// agent (`to_agent` set).
    Outside,
}

impl FindingSource {
    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingSource::Agent => "agent",
            FindingSource::Outside => "outside",
        }
    }
}

/// A finding that arrived after the analysis its addressee made for the
/// workflow (a `late_finding` flag), with the re-run that would apply it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LateFindingView {
    /// The finding's envelope id.
    pub id: String,
    /// Its sender.
    pub from_agent: String,
    /// Its addressee as sent.
    pub to_agent: String,
    /// Its priority (high or above).
    pub priority: Priority,
    /// Its one-line text.
    pub finding: String,
    /// Its `impact`, when it has one.
    #[serde(default)]
    pub impact: Option<String>,
    /// The completed stages it arrived after: re-running them applies it.
    pub stages: Vec<String>,
    /// When it was stored.
    pub stored_at: DateTime<Utc>,
    /// The CLI command that sends the work back to those stages from this
    /// gate (`caucus gate send-back …`).
    pub rerun: String,
}
