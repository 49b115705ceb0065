//! Plugs the built-in analysts into the handler: their findings become
//! `finding` contents about the task's item. Level review tasks go to the
//! built-in reviewer.

use std::sync::Arc;

use serde_json::Value;

use caucus_shared::task::TaskDispatch;

use crate::analysts::{self, Dataset};
use crate::handler::{BuiltinFn, HandlerFinding, HandlerOutput};

/// The built-in analysts over `data`.
pub fn analysts_over(data: Arc<Dataset>) -> BuiltinFn {
    Arc::new(move |task: &TaskDispatch| {
        if let Some(r) = crate::research::run(task) {
            return r.map(HandlerOutput::plain);
        }
        if crate::reviewer::is_review_task(task) {
            return crate::reviewer::review(task).map(HandlerOutput::plain);
        }
        let out = analysts::run(&task.agent_type, task, &data)
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
        Ok(HandlerOutput {
            output: out.output,
            findings,
        })
    })
}

/// The configured data set: `worker.data_path`, or the bundled one.
pub fn dataset(path: Option<&std::path::Path>) -> Result<Arc<Dataset>, analysts::DatasetError> {
    match path {
        Some(p) => Ok(Arc::new(Dataset::from_path(p)?)),
        None => Ok(Arc::new(Dataset::bundled()?.clone())),
    }
}
