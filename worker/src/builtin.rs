//! Plugs the built-in analysts into the handler: their findings become
//! `finding` contents about the task's item, their challenges `challenge`
//! envelopes for the facilitator; the `macro` agent's broadcasts go to
//! `caucus.msg.all`. Level review tasks go to the built-in reviewer.

use std::sync::Arc;

use serde_json::Value;

use caucus_shared::envelope::{Envelope, MessageType, Priority};
use caucus_shared::task::TaskDispatch;

use crate::analysts::{self, Dataset, Settings};
use crate::handler::{BuiltinFn, HandlerFinding, HandlerMessage, HandlerOutput, MessageTarget};
use crate::macro_agent;

/// The built-in analysts over `data`, with the default settings.
pub fn analysts_over(data: Arc<Dataset>) -> BuiltinFn {
    analysts_with(data, Settings::default())
}

/// The built-in analysts over `data` with worker-level `settings`.
pub fn analysts_with(data: Arc<Dataset>, settings: Settings) -> BuiltinFn {
    Arc::new(move |task: &TaskDispatch| {
        if task.agent_type == macro_agent::AGENT_TYPE {
            return macro_agent::run(task).map_err(|e| e.to_task_error(None));
        }
        if let Some(r) = crate::research::run(task) {
            return r.map(HandlerOutput::plain);
        }
        if crate::reviewer::is_review_task(task) {
            return crate::reviewer::review(task).map(HandlerOutput::plain);
        }
        let out = analysts::run_with(&task.agent_type, task, &data, &settings)
            .map_err(|e| e.to_task_error(Some(data.origin())))?;
        let findings = out
            .findings
            .into_iter()
            .map(|f| {
                let mut content = serde_json::json!({
                    "finding": f.finding,
                    "confidence": f.confidence,
                    "evidence": f.evidence,
                    "impact": f.impact,
                    "key": format!("{}:{}", task.item, f.key),
                    "item": task.item,
                    "workflow_id": task.workflow_id,
                });
                if let Some(m) = f.metric {
                    content["metric"] = Value::String(m);
                }
                if let Some(v) = f.value {
                    content["value"] = serde_json::json!(v);
                }
                HandlerFinding { content }
            })
            .collect();
        let messages = out
            .challenges
            .into_iter()
            .filter_map(|c| challenge_message(task, c))
            .collect();
        Ok(HandlerOutput {
            output: out.output,
            findings,
            messages,
        })
    })
}

/// The envelope of a challenge an analyst raised; its id derives from the
/// debate id, so a re-run task's challenge is de-duplicated by the stream
/// (and the facilitator opens a debate id only once anyway).
fn challenge_message(task: &TaskDispatch, content: Value) -> Option<HandlerMessage> {
    let debate_id = content.get("debate_id")?.as_str()?.to_string();
    let envelope = Envelope::new(MessageType::Challenge, task.agent_type.clone(), content)
        .to("facilitator")
        .with_priority(Priority::High)
        .with_requires_response(true)
        .with_id(format!("challenge-{debate_id}"))
        .with_correlation_id(task.workflow_id.clone());
    Some(HandlerMessage {
        target: MessageTarget::Debate {
            debate_id,
            event: "challenge".into(),
        },
        envelope,
    })
}

/// The configured data set: `worker.data_path`, or the bundled one.
pub fn dataset(path: Option<&std::path::Path>) -> Result<Arc<Dataset>, analysts::DatasetError> {
    match path {
        Some(p) => Ok(Arc::new(Dataset::from_path(p)?)),
        None => Ok(Arc::new(Dataset::bundled()?.clone())),
    }
}
