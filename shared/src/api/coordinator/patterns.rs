//! `run_pattern` and `pattern_status`: coordination patterns (parallel,
//! pipeline, debate, hierarchical, consensus, peer review) run over real
//! workers, and the run record they answer with (docs/PATTERNS.md). The
//! record is also what the coordinator stores in KV `pattern_runs`.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::api::{Operation, OperationDoc, CODE_NOT_FOUND};

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[
    OperationDoc::of::<RunPattern>(),
    OperationDoc::of::<PatternStatus>(),
];

/// Error code of a run record that could not be stored.
pub const CODE_STORE_FAILED: &str = "store_failed";

/// `coordinator.run_pattern`: any instance runs it (a run touches no
/// workflow state, only its own record).
#[derive(Debug, Clone, Copy)]
pub struct RunPattern;

impl Operation for RunPattern {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "run_pattern";
    const MUTATES: bool = true;
    const SUMMARY: &'static str = "run a coordination pattern (see PATTERNS.md)";
    const ERRORS: &'static [&'static str] = &[CODE_STORE_FAILED];
    type Request = RunRequest;
    type Reply = PatternRunReply;
}

/// `coordinator.pattern_status`: a run's record as it stands.
#[derive(Debug, Clone, Copy)]
pub struct PatternStatus;

impl Operation for PatternStatus {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "pattern_status";
    const SUMMARY: &'static str = "a pattern run's record";
    const ERRORS: &'static [&'static str] = &[CODE_NOT_FOUND, CODE_STORE_FAILED];
    type Request = PatternStatusRequest;
    type Reply = PatternRunReply;
}

/// Optional parameters as a request gives them; which apply depends on
/// the pattern.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ParamsInput {
    /// Pipeline: pass earlier outputs on as context (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_context: Option<bool>,
    /// Pipeline: stop at the first failed step (default false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_on_failure: Option<bool>,
    /// Debate: number of rounds (default 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<u32>,
    /// Hierarchical: the leader's agent type (default the first agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// Consensus: rounds at most (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rounds: Option<u32>,
    /// Consensus: combined score needed (default 0.8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreement_threshold: Option<f64>,
    /// Characters of shared context per response (default 500).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_truncation: Option<usize>,
    /// Characters of each stored output (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_truncation: Option<usize>,
}

/// The body of `coordinator.run_pattern`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// Pattern name.
    pub pattern: String,
    /// Agent types, in order (repeats allowed: each position is one agent).
    pub agents: Vec<String>,
    /// The task every agent works on.
    pub task: String,
    /// Pattern parameters.
    #[serde(default)]
    pub params: ParamsInput,
    /// The item dispatched tasks name (default `pattern-<run_id>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    /// Per-agent-call time limit in ms (default: config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_timeout_ms: Option<u64>,
    /// Answer when the run finished (default) or at once with the run id.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub wait: bool,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// The `pattern_status` request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatternStatusRequest {
    /// The run (`run_id` of the `run_pattern` reply).
    pub run_id: String,
}

/// The reply of `run_pattern` and `pattern_status`: the run record plus
/// every result in one flat list (round by round, agent order within).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatternRunReply {
    /// The record.
    #[serde(flatten)]
    pub run: PatternRun,
    /// Every result, flat.
    pub results: Vec<AgentResult>,
}

impl From<&PatternRun> for PatternRunReply {
    fn from(run: &PatternRun) -> Self {
        PatternRunReply {
            run: run.clone(),
            results: run.results().cloned().collect(),
        }
    }
}

/// Version of the run record.
pub const RUN_SCHEMA_VERSION: u32 = 1;

fn schema_v1() -> u32 {
    RUN_SCHEMA_VERSION
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Rounds still to go.
    Running,
    /// Every planned round ran (agents may still have failed).
    Completed,
    /// The run itself stopped (the coordinator shut down mid-run).
    Failed,
}

/// Counts over all results.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Results so far.
    pub results: usize,
    /// Successful ones.
    pub succeeded: usize,
    /// Failed ones.
    pub failed: usize,
}

/// One pattern run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatternRun {
    /// Wire version of this body.
    #[serde(default = "schema_v1")]
    pub schema_version: u32,
    /// Run id (UUID v7).
    pub run_id: String,
    /// Workflow id its dispatches carry (`pattern-<run_id>`).
    pub workflow_id: String,
    /// Pattern name.
    pub pattern: String,
    /// Agent types by position.
    pub agents: Vec<String>,
    /// The task.
    pub task: String,
    /// Effective parameters (defaults filled in).
    pub params: PatternParams,
    /// Where it stands.
    pub state: RunState,
    /// Rounds finished so far, in order.
    pub rounds: Vec<RoundRecord>,
    /// Counts over all results.
    pub summary: Summary,
    /// Consensus: whether it was reached (set when the run ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consensus_reached: Option<bool>,
    /// Why the run ended before its last planned round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<StopReason>,
    /// Why the run itself failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When it started.
    pub started_at: DateTime<Utc>,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
}

impl PatternRun {
    /// Adds a finished round and updates the counts.
    pub fn push_round(&mut self, round: RoundRecord) {
        for r in &round.results {
            self.summary.results += 1;
            if r.success {
                self.summary.succeeded += 1;
            } else {
                self.summary.failed += 1;
            }
        }
        self.rounds.push(round);
    }

    /// All results in the seed's order.
    pub fn results(&self) -> impl Iterator<Item = &AgentResult> {
        self.rounds.iter().flat_map(|r| r.results.iter())
    }
}

/// A run's effective parameters (the request's with the defaults filled
/// in); only those of its pattern are present.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PatternParams {
    /// Pipeline: earlier outputs go to later agents as `<label>_output`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_context: Option<bool>,
    /// Pipeline: a failed step ends the pipeline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_on_failure: Option<bool>,
    /// Debate: rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<u32>,
    /// Hierarchical: the leader's agent type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// Hierarchical: the leader's position in the agent list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_index: Option<usize>,
    /// Consensus: rounds at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_rounds: Option<u32>,
    /// Consensus: combined score that ends the run, 0..=1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreement_threshold: Option<f64>,
    /// Characters of shared context per response.
    pub context_truncation: usize,
    /// Characters of each stored output.
    pub output_truncation: usize,
}

/// Why a run ended before its last planned round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// Consensus reached before `max_rounds`.
    ConsensusReached,
    /// A pipeline step failed with `stop_on_failure`.
    StopOnFailure,
}

/// One call of one agent within a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatternTask {
    /// Pattern name.
    pub pattern: String,
    /// Round (or phase number) within the run, from 1.
    pub round: u32,
    /// Role in the round: `work`, `plan`, `synthesize`, `debate`,
    /// `consensus`, `review`, `revise`.
    pub phase: String,
    /// Position of the agent in the request's agent list.
    pub index: usize,
    /// How the agent is named in other agents' contexts.
    pub label: String,
    /// The prompt.
    pub description: String,
    /// Structured context (previous responses, plan, work under review …).
    pub context: Map<String, Value>,
}

/// The outcome of one call; a failure is a result, never an abort.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentResult {
    /// Agent type.
    pub agent: String,
    /// Name in contexts (agent type, or `type#n` when repeated).
    pub label: String,
    /// Position in the agent list.
    pub index: usize,
    /// Round.
    pub round: u32,
    /// Role in the round.
    pub phase: String,
    /// Whether the agent produced an output.
    pub success: bool,
    /// The output text (cut to the output truncation limit when stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// The output was longer than the limit and was cut.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Machine-readable failure kind (`timeout`, `exit_status`, `skipped` …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_type: Option<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Consensus rounds: the stance read from the output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stance: Option<Stance>,
    /// The dispatched task's id, when the call went over NATS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The worker that ran it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_id: Option<String>,
    /// Wall time of the call.
    pub duration_ms: u64,
}

impl AgentResult {
    /// A success for `task` run by `agent`.
    pub fn ok(agent: &str, task: &PatternTask, output: impl Into<String>) -> Self {
        AgentResult {
            success: true,
            output: Some(output.into()),
            ..Self::blank(agent, task)
        }
    }

    /// A failure for `task` run by `agent`.
    pub fn failed(
        agent: &str,
        task: &PatternTask,
        error_type: impl Into<String>,
        error: impl Into<String>,
    ) -> Self {
        AgentResult {
            success: false,
            error_type: Some(error_type.into()),
            error: Some(error.into()),
            ..Self::blank(agent, task)
        }
    }

    fn blank(agent: &str, task: &PatternTask) -> Self {
        AgentResult {
            agent: agent.to_string(),
            label: task.label.clone(),
            index: task.index,
            round: task.round,
            phase: task.phase.clone(),
            success: false,
            output: None,
            truncated: false,
            error_type: None,
            error: None,
            stance: None,
            task_id: None,
            worker_id: None,
            duration_ms: 0,
        }
    }

    /// The output when the call succeeded.
    pub fn text(&self) -> Option<&str> {
        if self.success {
            self.output.as_deref()
        } else {
            None
        }
    }
}

/// One round of a run, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundRecord {
    /// Round number, from 1.
    pub round: u32,
    /// Role of the round's calls.
    pub phase: String,
    /// Results in agent order.
    pub results: Vec<AgentResult>,
    /// Consensus rounds: the agreement check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consensus: Option<ConsensusScore>,
    /// When the round began.
    pub started_at: DateTime<Utc>,
    /// When its last call returned.
    pub finished_at: DateTime<Utc>,
}

/// Stance of one response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stance {
    /// Agrees.
    Agree,
    /// Disagrees.
    Disagree,
}

/// The consensus check of one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsensusScore {
    /// Agents that agreed ÷ agents in the round (a failed agent has not agreed).
    pub explicit: f64,
    /// Mean pairwise Jaccard similarity of the successful responses.
    pub similarity: f64,
    /// `0.7 × explicit + 0.3 × similarity`.
    pub combined: f64,
    /// The threshold it was held against.
    pub threshold: f64,
    /// `combined ≥ threshold`.
    pub reached: bool,
    /// Responses that agreed.
    pub agreed: usize,
    /// Responses that disagreed.
    pub disagreed: usize,
    /// Successful responses with no stance.
    pub no_stance: usize,
    /// Agents in the round (including failed ones).
    pub agents: usize,
}
