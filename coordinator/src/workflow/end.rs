//! Ending an unfinished workflow as failed from outside its tasks' events
//! (a request whose deadline passed, or whose task failed beyond its
//! retries and would otherwise wait paused for a person). Pure: the caller
//! takes the record out of the engine first and puts it back after, so
//! in-flight counts and ready queues follow.

use chrono::{DateTime, Utc};

use caucus_shared::task::{ErrorClass, TaskError};

use super::{TaskRunState, WorkflowRecord, WorkflowState};

impl WorkflowRecord {
    /// Fails the workflow with `reason`: every task not finished yet is
    /// failed with a permanent `error_type` error (an attempt still on a
    /// worker runs on, and its late events are ignored), any pause is
    /// dropped. False (and nothing changed) when it already finished.
    pub fn end_failed(&mut self, error_type: &str, reason: &str, now: DateTime<Utc>) -> bool {
        if self.state.is_terminal() {
            return false;
        }
        for t in self.tasks.values_mut() {
            if matches!(t.state, TaskRunState::Completed | TaskRunState::Failed) {
                continue;
            }
            t.state = TaskRunState::Failed;
            t.finished_at = Some(now);
            t.not_before = None;
            t.error = Some(TaskError {
                class: ErrorClass::Permanent,
                error_type: error_type.to_string(),
                message: reason.to_string(),
                data_source: None,
            });
        }
        self.pause = None;
        self.state = WorkflowState::Failed;
        self.failure = Some(reason.to_string());
        self.finished_at = Some(now);
        self.updated_at = now;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::{instantiate, PauseSpec, StageDef, StageRetry};
    use serde_json::Value;

    fn one_stage() -> WorkflowRecord {
        let stage = StageDef {
            name: "valuation".into(),
            agent_type: "valuation".into(),
            depends_on: vec![],
            expected: 1.0,
            timeout: None,
            retry: StageRetry {
                max_attempts: 1,
                backoff_initial_ms: 10,
                backoff_max_ms: 10,
            },
            fan_out: 1,
            params: Value::Null,
            kind: Default::default(),
        };
        instantiate(
            "w".into(),
            "AAPL".into(),
            "request".into(),
            vec![stage],
            1_000,
            Utc::now(),
        )
    }

    #[test]
    fn fails_unfinished_tasks_and_the_workflow_once() {
        let now = Utc::now();
        let mut r = one_stage();
        r.dispatch("valuation", now).unwrap();
        assert!(r.end_failed("deadline_missed", "deadline x missed", now));
        assert_eq!(r.state, WorkflowState::Failed);
        assert_eq!(r.failure.as_deref(), Some("deadline x missed"));
        assert_eq!(r.finished_at, Some(now));
        let t = &r.tasks["valuation"];
        assert_eq!(t.state, TaskRunState::Failed);
        assert_eq!(t.error.as_ref().unwrap().error_type, "deadline_missed");
        assert_eq!(t.error.as_ref().unwrap().class, ErrorClass::Permanent);
        assert!(r.dispatch("valuation", now).is_none());
        assert!(!r.end_failed("deadline_missed", "again", now), "once");
        assert_eq!(r.failure.as_deref(), Some("deadline x missed"));
    }

    #[test]
    fn a_paused_workflow_ends_without_its_pause() {
        let now = Utc::now();
        let mut r = one_stage();
        r.request_pause(PauseSpec::default(), now).unwrap();
        assert!(r.pause.is_some());
        assert!(r.end_failed("request_failed", "why", now));
        assert!(r.pause.is_none());
        assert_eq!(r.state, WorkflowState::Failed);
    }

    #[test]
    fn completed_tasks_keep_their_output() {
        let now = Utc::now();
        let mut r = one_stage();
        r.tasks.get_mut("valuation").unwrap().state = TaskRunState::Completed;
        r.tasks.get_mut("valuation").unwrap().output = Some(serde_json::json!({"v": 1}));
        r.state = WorkflowState::Running;
        assert!(r.end_failed("deadline_missed", "late", now));
        assert_eq!(r.tasks["valuation"].state, TaskRunState::Completed);
        assert!(r.tasks["valuation"].error.is_none());
    }
}
