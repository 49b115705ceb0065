//! How a workflow record is shown in API replies (`status`, gates).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use caucus_shared::subjects::encode_token;

use crate::workflow::WorkflowRecord;

/// A workflow as the status API shows it (task outputs included).
pub fn workflow_json(r: &WorkflowRecord, with_tasks: bool) -> Value {
    workflow_json_with(r, with_tasks, true)
}

/// A workflow as the status API shows it; `with_outputs: false` leaves
/// tasks' `output` and `previous_output` out (and marks the workflow
/// `"outputs_omitted": true`), as `status` lists do.
pub fn workflow_json_with(r: &WorkflowRecord, with_tasks: bool, with_outputs: bool) -> Value {
    let (done, total) = r.progress();
    let overdue: Vec<&String> = r
        .tasks
        .iter()
        .filter(|(_, t)| t.overdue)
        .map(|(k, _)| k)
        .collect();
    let mut v = json!({
        "workflow_id": r.workflow_id,
        "item": r.item,
        "item_token": encode_token(&r.item),
        "pipeline": r.pipeline,
        "state": r.state.as_str(),
        "progress": {"completed": done, "total": total},
        "overdue_tasks": overdue,
        "created_at": r.created_at,
        "updated_at": r.updated_at,
    });
    let m = v.as_object_mut().expect("object");
    if let Some(f) = r.finished_at {
        m.insert("finished_at".into(), json!(f));
        m.insert(
            "elapsed_ms".into(),
            json!((f - r.created_at).num_milliseconds()),
        );
    }
    if let Some(f) = &r.failure {
        m.insert("failure".into(), json!(f));
    }
    if let Some(p) = &r.pause {
        m.insert("pause".into(), json!(p));
    }
    if !r.flags.is_empty() {
        m.insert("flags".into(), json!(r.flags));
        m.insert("reevaluate".into(), json!(true));
    }
    if let Some(research) = &r.research {
        m.insert("research".into(), research.status_json());
    }
    if let Some(lr) = &r.level_review {
        m.insert("level_review".into(), json!(lr));
    }
    let open = r.open_gate_keys();
    if !open.is_empty() {
        m.insert("open_gates".into(), json!(open));
    }
    if !r.resolved_assumptions.is_empty() {
        m.insert("resolved_assumptions".into(), json!(r.resolved_assumptions));
    }
    if !r.reruns.is_empty() {
        m.insert("reruns".into(), json!(r.reruns));
    }
    if r.auto_approve_gates {
        m.insert("auto_approve_gates".into(), json!(true));
    }
    if with_tasks {
        let tasks: BTreeMap<&String, Value> = r
            .tasks
            .iter()
            .map(|(k, t)| {
                let mut t = json!({
                        "stage": t.stage,
                        "agent_type": t.agent_type,
                        "state": t.state,
                        "attempt": t.attempt,
                        "worker_id": t.worker_id,
                        "started_at": t.started_at,
                        "finished_at": t.finished_at,
                        "overdue": t.overdue,
                        "error": t.error,
                        "output": t.output,
                        "gate": t.gate,
                        "previous_output": t.previous_output,
                });
                if !with_outputs {
                    let o = t.as_object_mut().expect("object");
                    o.remove("output");
                    o.remove("previous_output");
                }
                (k, t)
            })
            .collect();
        m.insert("tasks".into(), json!(tasks));
        if !with_outputs {
            m.insert("outputs_omitted".into(), json!(true));
        }
    }
    v
}
