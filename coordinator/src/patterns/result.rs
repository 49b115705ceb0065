//! What an agent is asked ([`PatternTask`]), what comes back
//! ([`AgentResult`]), and one round of a run ([`RoundRecord`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::consensus::{ConsensusScore, Stance};

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

/// The first `limit` characters of `s`, and whether anything was cut.
pub fn truncate_chars(s: &str, limit: usize) -> (String, bool) {
    match s.char_indices().nth(limit) {
        Some((cut, _)) => (s[..cut].to_string(), true),
        None => (s.to_string(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_counts_characters() {
        assert_eq!(truncate_chars("héllo", 2), ("hé".to_string(), true));
        assert_eq!(truncate_chars("héllo", 5), ("héllo".to_string(), false));
        assert_eq!(truncate_chars("", 3), (String::new(), false));
    }
}
