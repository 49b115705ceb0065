//! In-flight attempts: when the coordinator last heard of each, and
//! failing an attempt for a retry (a silent task, an unconfirmed dispatch,
//! a dispatch JetStream gave up on).

use chrono::Utc;

use caucus_shared::task::TaskEvent;

use super::Scheduler;

impl Scheduler {
    /// Starts the silence clock of every in-flight task of `id`.
    pub(super) fn hear_in_flight(&mut self, id: &str) {
        let now = self.clock.now();
        let Some(rec) = self.engine.get(id) else {
            return;
        };
        for (key, t) in &rec.tasks {
            if t.state.is_in_flight() {
                self.heard.insert(rec.task_id(key), now);
            }
        }
    }

    /// Fails `attempt` of a task as if its worker had reported `error`: the
    /// task's retry policy decides between a new attempt and failing it.
    /// A finished task or an older attempt is left alone.
    pub(super) fn fail_attempt(
        &mut self,
        workflow_id: &str,
        task_id: &str,
        attempt: u32,
        error: caucus_shared::task::TaskError,
    ) {
        let now = self.clock.now();
        let Some(rec) = self.engine.get(workflow_id) else {
            return;
        };
        let key = task_id
            .strip_prefix(&format!("{workflow_id}/"))
            .unwrap_or(task_id);
        let Some(t) = rec.tasks.get(key) else {
            return;
        };
        let ev = TaskEvent {
            schema_version: caucus_shared::task::TASK_SCHEMA_VERSION,
            task_id: task_id.to_string(),
            workflow_id: workflow_id.to_string(),
            stage: t.stage.clone(),
            agent_type: t.agent_type.clone(),
            attempt,
            status: caucus_shared::task::TaskStatus::Failed,
            worker_id: "coordinator".into(),
            output: None,
            error: Some(error),
            message: None,
            started_at: t.started_at,
            at: now,
            partition: None,
        };
        let before = self.before(&ev);
        if let Some(outcome) = self.engine.apply_event(&ev, now) {
            if let Some(before) = before {
                self.observe(&ev, before, &outcome);
            }
            self.heard.remove(task_id);
            self.dirty.insert(workflow_id.to_string());
            if let Some(c) = self.control.as_mut() {
                c.on_outcome(&ev, &outcome, &self.engine, None);
            }
        }
    }

    /// Fails (for a retry) every in-flight attempt nobody has reported on
    /// for longer than `silence`: its worker is gone and JetStream did not
    /// bring the dispatch to another one, or its events were lost.
    pub(super) fn reconcile_silent(&mut self, now: chrono::DateTime<Utc>) {
        let Ok(silence) = chrono::Duration::from_std(self.silence) else {
            return;
        };
        let silent: Vec<String> = self
            .heard
            .iter()
            .filter(|(_, at)| now - **at > silence)
            .map(|(id, _)| id.clone())
            .collect();
        for task_id in silent {
            let Some((wf, key)) = caucus_shared::task::split_task_id(&task_id) else {
                self.heard.remove(&task_id);
                continue;
            };
            let Some((attempt, in_flight)) = self
                .engine
                .get(wf)
                .and_then(|r| r.tasks.get(key))
                .map(|t| (t.attempt, t.state.is_in_flight()))
            else {
                self.heard.remove(&task_id);
                continue;
            };
            if !in_flight {
                self.heard.remove(&task_id);
                continue;
            }
            tracing::warn!(task_id = %task_id, attempt, silent_ms = self.silence.as_millis() as u64, "no word of an in-flight task; failing the attempt for a retry");
            let wf = wf.to_string();
            self.fail_attempt(
                &wf,
                &task_id,
                attempt,
                caucus_shared::task::TaskError {
                    class: caucus_shared::task::ErrorClass::Transient,
                    error_type: caucus_shared::task::coordinator_errors::SILENT.into(),
                    message: format!(
                        "no started or progress event for {} ms (worker lost, or its events were)",
                        self.silence.as_millis()
                    ),
                    data_source: None,
                },
            );
        }
    }
}
