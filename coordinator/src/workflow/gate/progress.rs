//! What follows a completion: the running re-run's next group, waiting
//! tasks, gates, the workflow's own completion.

use chrono::{DateTime, Utc};

use super::super::{TaskRunState, WorkflowRecord, WorkflowState};

impl WorkflowRecord {
    /// Releases the next group of the running re-run once the current one
    /// completed; marks re-runs done.
    fn advance_reruns(&mut self, now: DateTime<Utc>) {
        self.record_actuals();
        let Some(r) = self.reruns.last_mut() else {
            return;
        };
        while r.completed_at.is_none() {
            let current_done = r.groups.get(r.next_group).is_none_or(|g| {
                g.iter().all(|k| {
                    self.tasks
                        .get(k)
                        .is_none_or(|t| t.state == TaskRunState::Completed)
                })
            });
            if !current_done {
                return;
            }
            r.next_group += 1;
            match r.groups.get(r.next_group) {
                Some(g) => {
                    for k in g {
                        if let Some(t) = self.tasks.get_mut(k) {
                            t.held = false;
                        }
                    }
                }
                None => r.completed_at = Some(now),
            }
        }
    }

    /// After a task (or gate) completed: release re-run steps, promote
    /// waiting tasks, open gates, and settle the workflow's completion.
    /// Returns the keys newly ready for dispatch and whether it completed.
    pub(crate) fn after_completion(&mut self, now: DateTime<Utc>) -> (Vec<String>, bool) {
        self.advance_reruns(now);
        let mut ready = self.promote_waiting();
        let opened = self.open_gates(now);
        ready.retain(|k| !opened.contains(k));
        let done = self
            .tasks
            .values()
            .all(|t| t.state == TaskRunState::Completed);
        if done {
            self.state = WorkflowState::Completed;
            self.finished_at = Some(now);
        }
        (ready, done)
    }
}
