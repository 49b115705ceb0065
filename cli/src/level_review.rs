//! Text lines for the level reviews of one workflow in `caucus status --tasks`.

use caucus_shared::api::coordinator::status::WorkflowView;

/// One line per reviewed level: conflicts, how many were resolved, and the
/// warnings handed to the next level.
pub fn level_review_lines(w: &WorkflowView) -> Vec<String> {
    let levels = w.level_review.as_ref().map(|lr| lr.levels.as_slice());
    levels
        .unwrap_or_default()
        .iter()
        .filter_map(|l| {
            let key = l.review_task.as_deref()?;
            let state = w
                .tasks
                .as_ref()
                .and_then(|t| t.get(key))
                .map_or("?", |t| t.state.as_str());
            let Some(r) = &l.review else {
                return Some(format!("{key}: {state}, {} conflict(s)", l.conflicts.len()));
            };
            let resolved = r.conflicts.iter().filter(|c| c.resolved).count();
            let mut line = format!(
                "{key}: {}/{} conflict(s) resolved",
                resolved,
                r.conflicts.len()
            );
            if !r.warnings_for_next_level.is_empty() {
                line.push_str(&format!(
                    "; warnings: {}",
                    r.warnings_for_next_level.join(" | ")
                ));
            }
            Some(line)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// A workflow view with `more` merged in.
    fn workflow(more: Value) -> WorkflowView {
        let mut w = json!({"workflow_id": "wf-1", "item": "A", "item_token": "A",
            "pipeline": "p", "state": "running", "progress": {"completed": 1, "total": 3},
            "overdue_tasks": [], "created_at": "2026-11-25T12:00:00Z",
            "updated_at": "2026-11-25T12:00:00Z"});
        for (k, v) in more.as_object().expect("an object") {
            w[k] = v.clone();
        }
        serde_json::from_value(w).expect("a workflow view")
    }

    fn task(state: &str) -> Value {
        json!({"stage": "review", "agent_type": "reviewer", "state": state, "attempt": 1,
               "overdue": false})
    }

    #[test]
    fn pending_and_done_reviews() {
        let w = workflow(json!({
            "tasks": {"review@level-0": task("completed"), "review@level-1": task("ready")},
            "level_review": {
                "policy": {"mode": "conflicts", "agent": "reviewer", "expected": 1.0,
                           "retry": {"max_attempts": 3, "backoff_initial_ms": 200, "backoff_max_ms": 5000}},
                "levels": [
                {"level": 0, "conflicts": [{"resource": "x", "tasks": ["a", "b"]}],
                 "review_task": "review@level-0",
                 "review": {"level": 0, "conflicts": [{"resource": "x", "resolved": true}],
                            "warnings_for_next_level": ["check x"], "duration_ms": 5}},
                {"level": 1, "review_task": "review@level-1"},
                {"level": 2}
            ]}
        }));
        assert_eq!(
            level_review_lines(&w),
            vec![
                "review@level-0: 1/1 conflict(s) resolved; warnings: check x",
                "review@level-1: ready, 0 conflict(s)"
            ]
        );
        assert!(level_review_lines(&workflow(json!({}))).is_empty());
    }
}
