//! Deep research as a [`RecordHook`] of the workflow record: the record's
//! transitions call it; the rules themselves are in `hook.rs`.

use chrono::{DateTime, Utc};

use caucus_shared::task::TaskEvent;

use crate::workflow::{RecordHook, WorkflowRecord};

/// Deep research's part in the record's transitions (seed 004): phase
/// gates on completion, isolated discovery streams, the audit trail of
/// starts, pauses and resumes. Does nothing for a record without research.
pub(crate) struct ResearchHook;

impl RecordHook for ResearchHook {
    fn on_started(&self, rec: &mut WorkflowRecord, key: &str, ev: &TaskEvent, now: DateTime<Utc>) {
        if rec.research.is_some() {
            rec.research_on_started(key, ev, now);
        }
    }

    fn on_completed(&self, rec: &mut WorkflowRecord, key: &str, now: DateTime<Utc>) -> bool {
        if rec.research.is_none() {
            return false;
        }
        rec.research_on_completed(key, now);
        rec.state.is_terminal()
    }

    fn absorbs_failure(&self, rec: &WorkflowRecord, key: &str) -> bool {
        rec.research_isolates(key)
    }

    fn on_absorbed_failure(&self, rec: &mut WorkflowRecord, key: &str, now: DateTime<Utc>) {
        rec.research_on_stream_failed(key, now);
    }

    fn on_pause(&self, rec: &mut WorkflowRecord, who: &str, reason: &str, now: DateTime<Utc>) {
        rec.research_on_pause(who, reason, now);
    }

    fn on_resume(
        &self,
        rec: &mut WorkflowRecord,
        paused_since: Option<DateTime<Utc>>,
        renewed: &[String],
        now: DateTime<Utc>,
    ) {
        rec.research_on_resume(paused_since, renewed, now);
    }

    fn stage_done(&self, rec: &WorkflowRecord, stage: &str) -> Option<bool> {
        // A research stage is done when its quality gate passed.
        rec.research.as_ref().map(|r| r.passed.contains(stage))
    }
}
