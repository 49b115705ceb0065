//! The rule sets that plug into a workflow record's transitions. Deep
//! research (`research/hook.rs`) and level review (`level_review.rs`) each
//! implement [`RecordHook`]; the core transitions (`transitions.rs`,
//! `pause.rs`, `resume.rs`) call every hook of [`crate::hooks`] at the same
//! points and know neither. A hook that does not govern a record does
//! nothing there (and decides nothing: `None`, `false`).

use chrono::{DateTime, Utc};
use serde_json::Value;

use caucus_shared::task::TaskEvent;

use super::WorkflowRecord;

/// Whether a stage's waiting tasks may start now.
pub(crate) type Admits = Box<dyn Fn(&WorkflowRecord, &str) -> bool>;

/// What a hook says before waiting tasks are promoted.
#[derive(Default)]
pub(crate) struct Promotion {
    /// Tasks the hook made ready itself (a level's review task).
    pub ready: Vec<String>,
    /// Whether a stage's waiting tasks may start; `None`: no hold.
    pub admits: Option<Admits>,
}

/// One rule set's part in a workflow record's transitions. Every method
/// has a neutral default, so a hook implements only the points it uses.
pub(crate) trait RecordHook: Sync {
    /// A worker started the task `key` (or reported its progress).
    fn on_started(
        &self,
        _rec: &mut WorkflowRecord,
        _key: &str,
        _ev: &TaskEvent,
        _now: DateTime<Utc>,
    ) {
    }

    /// The task `key` completed; true when the hook ended the workflow
    /// (nothing downstream starts then).
    fn on_completed(&self, _rec: &mut WorkflowRecord, _key: &str, _now: DateTime<Utc>) -> bool {
        false
    }

    /// Whether the hook absorbs the final failure of `key`: marked, not
    /// retried, not paused; the run goes on (a research stream).
    fn absorbs_failure(&self, _rec: &WorkflowRecord, _key: &str) -> bool {
        false
    }

    /// The final failure of `key` that [`Self::absorbs_failure`] took.
    fn on_absorbed_failure(&self, _rec: &mut WorkflowRecord, _key: &str, _now: DateTime<Utc>) {}

    /// A pause was requested by `who` for `reason`.
    fn on_pause(&self, _rec: &mut WorkflowRecord, _who: &str, _reason: &str, _now: DateTime<Utc>) {}

    /// The workflow resumed; `renewed` are the tasks started afresh.
    fn on_resume(
        &self,
        _rec: &mut WorkflowRecord,
        _paused_since: Option<DateTime<Utc>>,
        _renewed: &[String],
        _now: DateTime<Utc>,
    ) {
    }

    /// An input the hook adds to the tasks of `stage` (key, value).
    fn task_input(&self, _rec: &WorkflowRecord, _stage: &str) -> Option<(&'static str, Value)> {
        None
    }

    /// Whether `stage` counts as done for its dependents, when the hook
    /// decides it (a research stage: when its quality gate passed).
    fn stage_done(&self, _rec: &WorkflowRecord, _stage: &str) -> Option<bool> {
        None
    }

    /// Called before waiting tasks are promoted.
    fn before_promote(&self, _rec: &mut WorkflowRecord) -> Promotion {
        Promotion::default()
    }
}
