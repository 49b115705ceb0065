//! Dispatch from a task to the built-in agent that answers it: the `macro`
//! agent, the research agents, the level reviewer (any task whose
//! `params.kind` is `level_review`) and the analysts. The analysts' findings
//! become `finding` contents about the task's item, their challenges
//! `challenge` envelopes for the facilitator; the `macro` agent's broadcasts
//! go to `caucus.msg.all`.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use caucus_shared::envelope::{Envelope, MessageType, Priority};
use caucus_shared::messages::Finding;
use caucus_shared::outputs::to_value;
use caucus_shared::task::{TaskDispatch, TaskError};

use crate::analysts::{self, Dataset, DatasetError, Settings};
use crate::output::{AgentMessage, AgentOutput, MessageTarget};
use crate::{macro_agent, research, reviewer};

/// The built-in agents over one data set, with worker-level settings.
/// Cheap to clone (the data set is shared).
#[derive(Debug, Clone)]
pub struct BuiltinAgents {
    data: Arc<Dataset>,
    settings: Settings,
}

impl BuiltinAgents {
    /// The built-in agents over `data` with the default settings.
    pub fn new(data: Arc<Dataset>) -> Self {
        Self::with_settings(data, Settings::default())
    }

    /// The built-in agents over `data` with `settings`.
    pub fn with_settings(data: Arc<Dataset>, settings: Settings) -> Self {
        BuiltinAgents { data, settings }
    }

    /// The data set the analysts read.
    pub fn dataset(&self) -> &Arc<Dataset> {
        &self.data
    }

    /// Runs `task` on the built-in agent for its agent type. Blocking and
    /// deterministic. An error is the wire form of the failure; an analyst's
    /// error names the data set as its data source.
    pub fn run(&self, task: &TaskDispatch) -> Result<AgentOutput, TaskError> {
        if task.agent_type == macro_agent::AGENT_TYPE {
            return macro_agent::run(task).map_err(|e| e.to_task_error(None));
        }
        if let Some(r) = research::run(task) {
            return r.map(AgentOutput::plain);
        }
        if reviewer::is_review_task(task) {
            return reviewer::review(task).map(AgentOutput::plain);
        }
        let data = &self.data;
        let out = analysts::run_with(&task.agent_type, task, data, &self.settings)
            .map_err(|e| e.to_task_error(Some(data.origin())))?;
        let findings = out
            .findings
            .into_iter()
            .map(|f| {
                to_value(&Finding {
                    key: Some(format!("{}:{}", task.item, f.key)),
                    item: Some(task.item.clone()),
                    workflow_id: Some(task.workflow_id.clone()),
                    evidence: f.evidence,
                    impact: Some(f.impact),
                    metric: f.metric,
                    value: f.value.map(Value::from),
                    ..Finding::new(f.finding, f.confidence)
                })
            })
            .collect();
        let messages = out
            .challenges
            .into_iter()
            .filter_map(|c| challenge_message(task, c))
            .collect();
        Ok(AgentOutput {
            output: out.output,
            findings,
            messages,
        })
    }
}

/// The envelope of a challenge an analyst raised; its id derives from the
/// debate id, so a re-run task's challenge is de-duplicated by the stream
/// (and the facilitator opens a debate id only once anyway).
fn challenge_message(task: &TaskDispatch, content: Value) -> Option<AgentMessage> {
    let debate_id = content.get("debate_id")?.as_str()?.to_string();
    let envelope = Envelope::new(MessageType::Challenge, task.agent_type.clone(), content)
        .to("facilitator")
        .with_priority(Priority::High)
        .with_requires_response(true)
        .with_id(format!("challenge-{debate_id}"))
        .with_correlation_id(task.workflow_id.clone());
    Some(AgentMessage {
        target: MessageTarget::Debate {
            debate_id,
            event: "challenge".into(),
        },
        envelope,
    })
}

/// The configured data set: the file at `path` (JSON or CSV,
/// `worker.data_path`), or the bundled one.
pub fn load_dataset(path: Option<&Path>) -> Result<Arc<Dataset>, DatasetError> {
    match path {
        Some(p) => Ok(Arc::new(Dataset::from_path(p)?)),
        None => Ok(Arc::new(Dataset::bundled()?.clone())),
    }
}
