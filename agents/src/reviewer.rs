//! The built-in level reviewer: a deterministic stand-in for a review
//! agent, so the level review gate works out of the box. Any task whose
//! `params.kind` is `level_review` (whatever its agent type) is answered
//! here by the `builtin` handler; `exec:` and `http:` handlers can review
//! instead (docs/LEVEL-REVIEW.md has the wire shape).
//!
//! Rule: each conflict is resolved by keeping the change of the task that
//! finished last (ties: the last task key), and the next level is warned
//! that the other tasks' changes to that resource must be checked.

use serde_json::Value;

use caucus_shared::outputs::review::{
    ConflictEntry, ReviewParamsView, ReviewedConflict, ReviewerOutput, REVIEW_KIND,
};
use caucus_shared::outputs::{to_value, OutputError};
use caucus_shared::task::{TaskDispatch, TaskError};

use crate::permanent;

/// Whether `task` is a level review.
pub fn is_review_task(task: &TaskDispatch) -> bool {
    task.params.get("kind").and_then(Value::as_str) == Some(REVIEW_KIND)
}

fn bad(message: String) -> TaskError {
    permanent("bad_input", format!("level review: {message}"))
}

/// The review of the level described by `task.params`.
pub fn review(task: &TaskDispatch) -> Result<Value, TaskError> {
    let p: ReviewParamsView = caucus_shared::outputs::decode(&task.params)
        .map_err(|e: OutputError| bad(format!("params: {e}")))?;
    let level = p
        .level
        .ok_or_else(|| bad("params.level must be a level number".into()))?;
    let tasks = p
        .context
        .and_then(|c| c.tasks)
        .ok_or_else(|| bad("params.context.tasks must be a list".into()))?;
    let conflicts = p
        .conflicts
        .ok_or_else(|| bad("params.conflicts must be a list".into()))?;
    let finished = |key: &str| {
        tasks
            .iter()
            .find(|t| t.task.as_deref() == Some(key))
            .and_then(|t| t.finished_at.clone())
            .unwrap_or_default()
    };
    let mut reviewed = Vec::new();
    let mut fixes = Vec::new();
    let mut warnings = Vec::new();
    for c in conflicts {
        let ConflictEntry {
            resource,
            tasks: by,
        } = c.clone();
        let resource = resource
            .ok_or_else(|| bad(format!("conflict without a resource: {}", to_value(&c))))?;
        let mut by = by.unwrap_or_default();
        by.sort();
        // RFC 3339 times of one clock sort as text; stable sort keeps key order on ties.
        by.sort_by_key(|k| finished(k));
        let Some(kept) = by.last().cloned() else {
            return Err(bad(format!("conflict on `{resource}` names no tasks")));
        };
        let others = by[..by.len() - 1].join(", ");
        reviewed.push(ReviewedConflict {
            resource: resource.clone(),
            tasks: by,
            resolved: true,
            resolution: format!("kept the change of `{kept}` (finished last) over {others}"),
        });
        fixes.push(format!("{resource}: kept the version of {kept}"));
        warnings.push(format!(
            "`{resource}` was modified by {others} and {kept}; the version of {kept} was kept: \
             check that the work of {others} is still present"
        ));
    }
    let summary = format!(
        "level {level}: {} task(s) reviewed, {} conflict(s) resolved by keeping the latest change",
        tasks.len(),
        reviewed.len()
    );
    Ok(to_value(&ReviewerOutput {
        level,
        conflicts: reviewed,
        summary,
        fixes_applied: fixes,
        warnings_for_next_level: warnings,
        reviewer: "builtin".into(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn task(params: Value) -> TaskDispatch {
        TaskDispatch {
            schema_version: 1,
            task_id: "w/review@level-0".into(),
            workflow_id: "w".into(),
            item: "X".into(),
            pipeline: "p".into(),
            stage: "review@level-0".into(),
            agent_type: "reviewer".into(),
            attempt: 1,
            shard: None,
            inputs: BTreeMap::new(),
            params,
            expected_ms: 0,
            timeout_ms: 0,
            priority: 0.0,
            dispatched_at: Utc::now(),
            partition: None,
        }
    }

    #[test]
    fn keeps_the_change_that_finished_last() {
        let t = task(json!({
            "kind": "level_review",
            "level": 0,
            "context": {"level": 0, "tasks": [
                {"task": "a", "finished_at": "2026-01-01T00:00:02Z"},
                {"task": "b", "finished_at": "2026-01-01T00:00:01Z"},
                {"task": "c"}
            ]},
            "conflicts": [{"resource": "src/app.py", "tasks": ["a", "b"]}]
        }));
        assert!(is_review_task(&t));
        let r = review(&t).unwrap();
        assert_eq!(r["conflicts"][0]["resolved"], true);
        assert_eq!(r["conflicts"][0]["tasks"], json!(["b", "a"]));
        assert_eq!(
            r["fixes_applied"],
            json!(["src/app.py: kept the version of a"])
        );
        let w = r["warnings_for_next_level"][0].as_str().unwrap();
        assert!(w.contains("check that the work of b"), "{w}");
        assert!(r["summary"]
            .as_str()
            .unwrap()
            .starts_with("level 0: 3 task(s) reviewed, 1 conflict(s)"));
    }

    #[test]
    fn no_conflict_is_a_clean_review_and_bad_params_are_named() {
        let t = task(json!({"kind": "level_review", "level": 2,
                            "context": {"tasks": []}, "conflicts": []}));
        let r = review(&t).unwrap();
        assert_eq!(r["warnings_for_next_level"], json!([]));
        let e = review(&task(json!({"kind": "level_review", "level": 1}))).unwrap_err();
        assert_eq!(e.error_type, "bad_input");
        assert!(e.message.contains("params.context.tasks"), "{}", e.message);
        assert!(!is_review_task(&task(json!({"kind": "other"}))));
    }
}
