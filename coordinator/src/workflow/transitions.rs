//! Pure state transitions of a workflow record. No I/O and no clock reads:
//! the caller passes `now`, so the rules are tested without servers.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use serde_json::Value;

use caucus_shared::task::{TaskDispatch, TaskEvent, TaskStatus, TASK_SCHEMA_VERSION};

use super::build::task_key;
use super::{PauseSpec, StageDef, TaskRunState, Tier, TierRules, WorkflowRecord, WorkflowState};
use crate::hooks::record_hooks;
use crate::workflow::tiers::FailureFacts;

/// What to do after a failed attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum RetryDecision {
    /// Dispatch attempt `attempt` at `at` (Tier 1: transient, backoff).
    Retry {
        /// The next attempt number.
        attempt: u32,
        /// Not before this time.
        at: DateTime<Utc>,
    },
    /// Tier 2 or 3: the task failed and its workflow pauses (tier 3 also
    /// escalates to a person).
    Halt {
        /// 2 or 3.
        tier: Tier,
        /// The tier rule that matched.
        rule: String,
    },
    /// The task failed for good but its workflow goes on without it (a
    /// research discovery stream); these task keys became ready.
    Isolated {
        /// Keys of tasks that are now ready.
        newly_ready: Vec<String>,
    },
}

/// Result of applying one task event.
#[derive(Debug, Clone, PartialEq)]
pub enum EventOutcome {
    /// Duplicate, stale attempt, unknown task or finished workflow.
    Ignored(&'static str),
    /// The task started (or reported progress) on a worker.
    Started,
    /// Recorded the completion; these task keys became ready.
    Completed {
        /// Keys of tasks that are now ready.
        newly_ready: Vec<String>,
        /// The whole workflow completed.
        workflow_completed: bool,
    },
    /// Recorded the failure.
    Failed(RetryDecision),
}

/// The `started` event a terminal event stands for (its output, error
/// and message belong to the end).
fn started_part(ev: &TaskEvent) -> TaskEvent {
    TaskEvent {
        schema_version: ev.schema_version,
        task_id: ev.task_id.clone(),
        workflow_id: ev.workflow_id.clone(),
        stage: ev.stage.clone(),
        agent_type: ev.agent_type.clone(),
        attempt: ev.attempt,
        status: TaskStatus::Started,
        worker_id: ev.worker_id.clone(),
        output: None,
        error: None,
        message: None,
        started_at: ev.started_at,
        at: ev.started_at.unwrap_or(ev.at),
        partition: ev.partition,
    }
}

impl WorkflowRecord {
    fn stage(&self, name: &str) -> Option<&StageDef> {
        self.stages.iter().find(|s| s.name == name)
    }

    /// Keys of tasks that are ready and not held back by a backoff.
    pub fn dispatchable(&self, now: DateTime<Utc>) -> Vec<String> {
        if !self.state.accepts_dispatch() {
            return Vec::new();
        }
        self.tasks
            .iter()
            .filter(|(_, t)| {
                t.state == TaskRunState::Ready && t.not_before.is_none_or(|nb| nb <= now)
            })
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Marks a ready task dispatched and returns the body to publish.
    pub fn dispatch(&mut self, key: &str, now: DateTime<Utc>) -> Option<TaskDispatch> {
        if !self.state.accepts_dispatch() {
            return None;
        }
        let t = self.tasks.get(key)?;
        if t.state != TaskRunState::Ready {
            return None;
        }
        let stage = self.stage(&t.stage)?.clone();
        let inputs = self.inputs_of(&stage);
        let unit = self.unit_ms as f64;
        let task_id = self.task_id(key);
        let t = self.tasks.get_mut(key)?;
        t.attempt = t.attempt.max(1);
        t.state = TaskRunState::Dispatched;
        t.dispatched_at = Some(now);
        t.not_before = None;
        self.state = WorkflowState::Running;
        self.updated_at = now;
        Some(TaskDispatch {
            schema_version: TASK_SCHEMA_VERSION,
            task_id,
            workflow_id: self.workflow_id.clone(),
            item: self.item.clone(),
            pipeline: self.pipeline.clone(),
            stage: stage.name.clone(),
            agent_type: stage.agent_type.clone(),
            attempt: t.attempt,
            shard: t.shard,
            inputs,
            params: stage.params.clone(),
            expected_ms: (stage.expected * unit).round() as u64,
            timeout_ms: stage
                .timeout
                .map(|x| (x * unit).round() as u64)
                .unwrap_or(0),
            priority: t.priority,
            dispatched_at: now,
            // The scheduler names its partition when there are several.
            partition: None,
        })
    }

    /// Outputs of a stage's dependencies; fan-out stages give an array.
    fn inputs_of(&self, stage: &StageDef) -> BTreeMap<String, Value> {
        let mut out = BTreeMap::new();
        for dep in &stage.depends_on {
            let Some(d) = self.stage(dep) else { continue };
            let v = if d.fan_out > 1 {
                Value::Array(
                    (0..d.fan_out)
                        .map(|i| {
                            self.tasks
                                .get(&task_key(dep, Some(i)))
                                .and_then(|t| t.output.clone())
                                .unwrap_or(Value::Null)
                        })
                        .collect(),
                )
            } else {
                self.tasks
                    .get(dep)
                    .and_then(|t| t.output.clone())
                    .unwrap_or(Value::Null)
            };
            out.insert(dep.clone(), v);
        }
        for hook in record_hooks() {
            if let Some((k, v)) = hook.task_input(self, &stage.name) {
                out.insert(k.to_string(), v);
            }
        }
        // Settled assumptions (debates, gate overrides) win over what the
        // task's own analysis would assume.
        if !self.resolved_assumptions.is_empty() {
            out.insert(
                "resolved_assumptions".to_string(),
                Value::Object(
                    self.resolved_assumptions
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect(),
                ),
            );
        }
        out
    }

    fn key_of(&self, ev: &TaskEvent) -> Option<String> {
        let prefix = format!("{}/", self.workflow_id);
        ev.task_id.strip_prefix(&prefix).map(str::to_string)
    }

    /// The agent type of the task `ev` names when it is not the one the
    /// event claims (such an event is refused: it would free or count
    /// capacity of the wrong type).
    pub fn agent_type_mismatch(&self, ev: &TaskEvent) -> Option<&str> {
        let t = self.tasks.get(&self.key_of(ev)?)?;
        (t.agent_type != ev.agent_type).then_some(t.agent_type.as_str())
    }

    /// Whether `ev` is about the current attempt of a task that is
    /// already running (a heartbeat changes nothing stored).
    pub fn is_running(&self, ev: &TaskEvent) -> bool {
        self.key_of(ev)
            .and_then(|k| self.tasks.get(&k))
            .is_some_and(|t| t.state == TaskRunState::Running && t.attempt == ev.attempt)
    }

    /// Whether `ev` is ahead of this record: an attempt not dispatched
    /// yet by the record, of a task still waiting for its dependencies.
    /// Only a coordinator that dispatched the task and then died before
    /// storing the record (its write still held back, see
    /// `coordinator.persist_delay`) leaves such a task; the events that
    /// made it ready are being redelivered, so `ev` waits for them instead
    /// of being dropped (the re-dispatch carries the same `Nats-Msg-Id` and
    /// is dropped as a duplicate, so the task would otherwise run again).
    pub fn is_ahead(&self, ev: &TaskEvent) -> bool {
        self.key_of(ev)
            .and_then(|k| self.tasks.get(&k))
            .is_some_and(|t| t.state == TaskRunState::Waiting && ev.attempt > t.attempt)
    }

    /// [`WorkflowRecord::apply_event_with`] the default tier rules.
    pub fn apply_event(&mut self, ev: &TaskEvent, now: DateTime<Utc>) -> EventOutcome {
        self.apply_event_with(ev, now, &TierRules::default())
    }

    /// Applies a worker's event. Idempotent: a second completion, an event
    /// for an older attempt or for a finished task changes nothing. Results
    /// are recorded while pausing or paused too; a pausing workflow becomes
    /// paused when its last in-flight task finishes. A failure is
    /// classified by `tiers`.
    pub fn apply_event_with(
        &mut self,
        ev: &TaskEvent,
        now: DateTime<Utc>,
        tiers: &TierRules,
    ) -> EventOutcome {
        let outcome = self.apply_event_inner(ev, now, tiers);
        if !matches!(outcome, EventOutcome::Ignored(_)) {
            self.settle_pause(now);
        }
        outcome
    }

    fn apply_event_inner(
        &mut self,
        ev: &TaskEvent,
        now: DateTime<Utc>,
        tiers: &TierRules,
    ) -> EventOutcome {
        if self.state.is_terminal() {
            return EventOutcome::Ignored("workflow finished");
        }
        let Some(key) = self.key_of(ev) else {
            return EventOutcome::Ignored("task of another workflow");
        };
        let Some(t) = self.tasks.get_mut(&key) else {
            return EventOutcome::Ignored("unknown task");
        };
        if matches!(t.state, TaskRunState::Completed | TaskRunState::Failed) {
            return EventOutcome::Ignored("task already finished");
        }
        // A coordinator that died after publishing a dispatch but before
        // storing it left the task `ready` (attempt 0 before the first
        // dispatch): the worker's events of that attempt are genuine, and
        // ignoring them would leave the task stuck (the re-dispatch carries
        // the same Nats-Msg-Id and is dropped as a duplicate).
        if t.state == TaskRunState::Ready && t.attempt == 0 && ev.attempt == 1 {
            t.attempt = 1;
        }
        if ev.attempt != t.attempt || t.state == TaskRunState::Waiting {
            return EventOutcome::Ignored("stale attempt");
        }
        let unannounced = t.state != TaskRunState::Running;
        match ev.status {
            TaskStatus::Started | TaskStatus::Progress => {
                self.start(&key, ev, now);
                EventOutcome::Started
            }
            TaskStatus::Completed | TaskStatus::Failed
                if unannounced && ev.started_at.is_some() =>
            {
                // A worker publishes no `started` for an attempt that ends
                // within `worker.started_delay` (and one can be lost): its
                // terminal event says when it started, and is applied as
                // that start and then as the end, so the record (the
                // research audit trail too) is what both events make.
                self.start(&key, &started_part(ev), now);
                self.apply_event_inner(ev, now, tiers)
            }
            TaskStatus::Completed => {
                t.state = TaskRunState::Completed;
                t.worker_id = Some(ev.worker_id.clone());
                t.started_at = ev.started_at.or(t.started_at);
                t.finished_at = Some(ev.at);
                t.output = Some(ev.output.clone().unwrap_or(Value::Null));
                t.output_key = None;
                t.error = None;
                self.updated_at = now;
                // A hook (research's quality gate) decides before anything
                // downstream starts, and may end the workflow.
                let mut ended = false;
                for hook in record_hooks() {
                    ended |= hook.on_completed(self, &key, now);
                }
                if ended {
                    return EventOutcome::Completed {
                        newly_ready: Vec::new(),
                        workflow_completed: self.state == WorkflowState::Completed,
                    };
                }
                let (newly_ready, workflow_completed) = self.after_completion(now);
                EventOutcome::Completed {
                    newly_ready,
                    workflow_completed,
                }
            }
            TaskStatus::Failed => {
                let err = ev.error.clone().unwrap_or_default();
                let stage_retry = self
                    .stages
                    .iter()
                    .find(|s| s.name == t.stage)
                    .map(|s| s.retry)
                    .unwrap_or_default();
                t.error = Some(err.clone());
                t.worker_id = Some(ev.worker_id.clone());
                let repeats = {
                    let n = t.failure_counts.entry(err.error_type.clone()).or_default();
                    *n += 1;
                    *n
                };
                self.updated_at = now;
                let used = t.attempt.saturating_sub(t.attempt_base);
                let c = tiers.classify(&FailureFacts {
                    error: &err,
                    retries_exhausted: used >= stage_retry.max_attempts,
                    repeats,
                });
                if c.tier == Tier::Retry {
                    let next = t.attempt + 1;
                    let at = now
                        + ChronoDuration::milliseconds(
                            stage_retry.backoff_ms(next - t.attempt_base) as i64,
                        );
                    t.attempt = next;
                    t.state = TaskRunState::Ready;
                    t.started_at = None;
                    t.not_before = Some(at);
                    return EventOutcome::Failed(RetryDecision::Retry { attempt: next, at });
                }
                t.state = TaskRunState::Failed;
                t.finished_at = Some(ev.at);
                if let Some(hook) = record_hooks()
                    .iter()
                    .find(|h| h.absorbs_failure(self, &key))
                {
                    // Seed 004: a failed stream is marked, not retried, and
                    // the run continues with the others if the gate allows.
                    hook.on_absorbed_failure(self, &key, now);
                    let newly_ready = if self.state.is_terminal() {
                        Vec::new()
                    } else {
                        self.promote_waiting()
                    };
                    return EventOutcome::Failed(RetryDecision::Isolated { newly_ready });
                }
                let reason = format!(
                    "task {key} failed after {} attempt(s): {}: {}",
                    used, err.error_type, err.message
                );
                self.failure = Some(reason.clone());
                let spec = PauseSpec {
                    reason: format!("tier {} ({}): {reason}", c.tier.number(), c.rule),
                    trigger_source: format!("tier{}_failure", c.tier.number()),
                    tier: Some(c.tier),
                    failed_task: Some(key.clone()),
                    ..PauseSpec::default()
                };
                // Cannot fail: the workflow is not terminal (checked above).
                let _ = self.request_pause(spec, now);
                EventOutcome::Failed(RetryDecision::Halt {
                    tier: c.tier,
                    rule: c.rule,
                })
            }
        }
    }

    /// The worker of `ev` started the task `key` (or reported progress):
    /// it runs (from `ready` only for the first attempt's unrecorded
    /// dispatch; older attempts were refused before).
    fn start(&mut self, key: &str, ev: &TaskEvent, now: DateTime<Utc>) {
        let Some(t) = self.tasks.get_mut(key) else {
            return;
        };
        t.not_before = None;
        t.state = TaskRunState::Running;
        t.worker_id = Some(ev.worker_id.clone());
        if t.started_at.is_none() || ev.status == TaskStatus::Started {
            t.started_at = ev.started_at.or(Some(ev.at));
        }
        self.updated_at = now;
        for hook in record_hooks() {
            hook.on_started(self, key, ev, now);
        }
    }

    /// Waiting tasks whose dependencies all completed (and, with level
    /// reviews, whose earlier levels passed their review gate) become
    /// ready; a completed level may first get its review task.
    pub(crate) fn promote_waiting(&mut self) -> Vec<String> {
        let hooks = record_hooks();
        let mut made_ready = Vec::new();
        let mut holds = Vec::new();
        for hook in hooks {
            let p = hook.before_promote(self);
            made_ready.extend(p.ready);
            holds.extend(p.admits);
        }
        let done = |rec: &WorkflowRecord, stage: &str| {
            hooks
                .iter()
                .find_map(|h| h.stage_done(rec, stage))
                .unwrap_or_else(|| {
                    rec.tasks
                        .values()
                        .filter(|t| t.stage == stage)
                        .all(|t| t.state == TaskRunState::Completed)
                })
        };
        let promote: Vec<String> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.state == TaskRunState::Waiting && !t.held)
            .filter(|(_, t)| {
                self.stage(&t.stage)
                    .is_some_and(|s| s.depends_on.iter().all(|d| done(self, d)))
                    && holds.iter().all(|admits| admits(self, &t.stage))
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in &promote {
            if let Some(t) = self.tasks.get_mut(k) {
                t.state = TaskRunState::Ready;
            }
        }
        let mut promote = promote;
        promote.extend(made_ready);
        promote
    }

    /// Flags tasks running longer than `factor` × their expected duration;
    /// returns the keys newly flagged.
    pub fn flag_overdue(&mut self, now: DateTime<Utc>, factor: f64) -> Vec<String> {
        let unit = self.unit_ms as f64;
        let expected: BTreeMap<String, f64> = self
            .stages
            .iter()
            .map(|s| (s.name.clone(), s.expected * unit * factor))
            .collect();
        let mut flagged = Vec::new();
        for (k, t) in self.tasks.iter_mut() {
            if t.state != TaskRunState::Running || t.overdue {
                continue;
            }
            let (Some(start), Some(limit)) = (t.started_at, expected.get(&t.stage)) else {
                continue;
            };
            if (now - start).num_milliseconds() as f64 > *limit {
                t.overdue = true;
                flagged.push(k.clone());
            }
        }
        flagged
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::{instantiate, StageRetry};
    use caucus_shared::task::{ErrorClass, TaskError};

    fn stage(name: &str, deps: &[&str], expected: f64) -> StageDef {
        StageDef {
            name: name.into(),
            agent_type: name.into(),
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
            expected,
            timeout: None,
            retry: StageRetry {
                max_attempts: 2,
                backoff_initial_ms: 100,
                backoff_max_ms: 1000,
            },
            fan_out: 1,
            params: Value::Null,
            kind: Default::default(),
        }
    }

    fn stock() -> Vec<StageDef> {
        vec![
            stage("screening", &[], 2.0),
            stage("business", &["screening"], 2.0),
            stage("financial", &["business"], 2.0),
            stage("strategy", &["screening"], 2.0),
            stage("valuation", &["financial", "strategy"], 1.0),
            stage("report", &["valuation"], 1.0),
        ]
    }

    fn ev(rec: &WorkflowRecord, key: &str, attempt: u32, status: TaskStatus) -> TaskEvent {
        TaskEvent {
            schema_version: 1,
            task_id: rec.task_id(key),
            workflow_id: rec.workflow_id.clone(),
            stage: key.into(),
            agent_type: key.into(),
            attempt,
            status,
            worker_id: "w1".into(),
            output: (status == TaskStatus::Completed).then(|| serde_json::json!({"k": key})),
            error: (status == TaskStatus::Failed).then(|| TaskError {
                error_type: "timeout".into(),
                message: "upstream timed out".into(),
                ..TaskError::default()
            }),
            message: None,
            started_at: None,
            at: Utc::now(),
            partition: None,
        }
    }

    fn run(rec: &mut WorkflowRecord, key: &str) -> EventOutcome {
        let now = Utc::now();
        let d = rec.dispatch(key, now).expect("dispatchable");
        rec.apply_event(&ev(rec, key, d.attempt, TaskStatus::Started), now);
        rec.apply_event(&ev(rec, key, d.attempt, TaskStatus::Completed), now)
    }

    #[test]
    fn priorities_are_longest_remaining_paths() {
        let r = instantiate(
            "w".into(),
            "AAPL".into(),
            "p".into(),
            stock(),
            10,
            Utc::now(),
        );
        let p = |k: &str| r.tasks[k].priority;
        assert_eq!(p("screening"), 8.0);
        assert_eq!(p("business"), 6.0);
        assert_eq!(p("strategy"), 4.0);
        assert_eq!(p("report"), 1.0);
        assert_eq!(r.dispatchable(Utc::now()), vec!["screening".to_string()]);
    }

    #[test]
    fn completes_in_dependency_order_and_records_once() {
        let mut r = instantiate(
            "w".into(),
            "AAPL".into(),
            "p".into(),
            stock(),
            10,
            Utc::now(),
        );
        match run(&mut r, "screening") {
            EventOutcome::Completed { newly_ready, .. } => {
                assert_eq!(
                    newly_ready,
                    vec!["business".to_string(), "strategy".to_string()]
                )
            }
            o => panic!("{o:?}"),
        }
        // A duplicate completion is ignored.
        let dup = ev(&r, "screening", 1, TaskStatus::Completed);
        assert_eq!(
            r.apply_event(&dup, Utc::now()),
            EventOutcome::Ignored("task already finished")
        );
        run(&mut r, "business");
        run(&mut r, "financial");
        assert!(r.dispatchable(Utc::now()).contains(&"strategy".to_string()));
        assert!(!r
            .dispatchable(Utc::now())
            .contains(&"valuation".to_string()));
        run(&mut r, "strategy");
        let d = r.dispatch("valuation", Utc::now()).unwrap();
        assert_eq!(d.inputs.len(), 2);
        assert_eq!(d.inputs["financial"], serde_json::json!({"k": "financial"}));
        r.apply_event(&ev(&r, "valuation", 1, TaskStatus::Completed), Utc::now());
        match run(&mut r, "report") {
            EventOutcome::Completed {
                workflow_completed, ..
            } => assert!(workflow_completed),
            o => panic!("{o:?}"),
        }
        assert_eq!(r.state, WorkflowState::Completed);
    }

    #[test]
    fn transient_failure_retries_with_backoff_then_gives_up() {
        let mut r = instantiate("w".into(), "A".into(), "p".into(), stock(), 10, Utc::now());
        let now = Utc::now();
        r.dispatch("screening", now).unwrap();
        let o = r.apply_event(&ev(&r, "screening", 1, TaskStatus::Failed), now);
        let RetryDecision::Retry { attempt, at } = (match o {
            EventOutcome::Failed(d) => d,
            o => panic!("{o:?}"),
        }) else {
            panic!("expected retry")
        };
        assert_eq!(attempt, 2);
        assert_eq!((at - now).num_milliseconds(), 100);
        assert!(r.dispatchable(now).is_empty(), "held back by backoff");
        assert_eq!(r.dispatchable(at), vec!["screening".to_string()]);
        // A late event of attempt 1 is stale.
        assert_eq!(
            r.apply_event(&ev(&r, "screening", 1, TaskStatus::Completed), now),
            EventOutcome::Ignored("stale attempt")
        );
        let d = r.dispatch("screening", at).unwrap();
        assert_eq!(d.attempt, 2);
        assert_eq!(d.msg_id(), format!("{}@2", r.task_id("screening")));
        let o = r.apply_event(&ev(&r, "screening", 2, TaskStatus::Failed), at);
        assert_eq!(
            o,
            EventOutcome::Failed(RetryDecision::Halt {
                tier: Tier::Pause,
                rule: "retries_exhausted".into()
            })
        );
        // Tier 2: nothing else in flight, so paused at once.
        assert_eq!(r.state, WorkflowState::Paused);
        let p = r.pause.as_ref().unwrap();
        assert_eq!(p.trigger_source, "tier2_failure");
        assert_eq!(p.failed_tasks, vec!["screening".to_string()]);
        assert!(!p.escalated);
        assert!(r.failure.as_deref().unwrap().contains("after 2 attempt(s)"));
    }

    #[test]
    fn events_of_an_unrecorded_dispatch_are_applied() {
        // The stored record never saw the dispatch (crash between publish
        // and persist); the worker ran attempt 1 anyway.
        let mut r = instantiate("w".into(), "A".into(), "p".into(), stock(), 10, Utc::now());
        let mut started = ev(&r, "screening", 1, TaskStatus::Started);
        started.attempt = 1;
        assert_eq!(r.apply_event(&started, Utc::now()), EventOutcome::Started);
        assert_eq!(r.tasks["screening"].state, TaskRunState::Running);
        let mut r = instantiate("w".into(), "A".into(), "p".into(), stock(), 10, Utc::now());
        let done = ev(&r, "screening", 1, TaskStatus::Completed);
        assert!(matches!(
            r.apply_event(&done, Utc::now()),
            EventOutcome::Completed { .. }
        ));
        assert!(
            r.dispatch("screening", Utc::now()).is_none(),
            "not run twice"
        );
        // Attempt 2 is not a first dispatch: still stale.
        let mut r = instantiate("w".into(), "A".into(), "p".into(), stock(), 10, Utc::now());
        let mut late = ev(&r, "screening", 2, TaskStatus::Completed);
        late.attempt = 2;
        assert_eq!(
            r.apply_event(&late, Utc::now()),
            EventOutcome::Ignored("stale attempt")
        );
    }

    #[test]
    fn permanent_failure_does_not_retry() {
        let mut r = instantiate("w".into(), "A".into(), "p".into(), stock(), 10, Utc::now());
        r.dispatch("screening", Utc::now()).unwrap();
        let mut e = ev(&r, "screening", 1, TaskStatus::Failed);
        e.error.as_mut().unwrap().class = ErrorClass::Permanent;
        assert!(matches!(
            r.apply_event(&e, Utc::now()),
            EventOutcome::Failed(RetryDecision::Halt {
                tier: Tier::Pause,
                ..
            })
        ));
    }

    #[test]
    fn fan_out_waits_for_every_shard() {
        let mut st = vec![
            stage("discover", &[], 1.0),
            stage("merge", &["discover"], 1.0),
        ];
        st[0].fan_out = 3;
        let mut r = instantiate("w".into(), "q".into(), "p".into(), st, 10, Utc::now());
        assert_eq!(r.dispatchable(Utc::now()).len(), 3);
        run(&mut r, "discover#0");
        run(&mut r, "discover#1");
        assert!(r.dispatchable(Utc::now()).len() == 1);
        match run(&mut r, "discover#2") {
            EventOutcome::Completed { newly_ready, .. } => assert_eq!(newly_ready, vec!["merge"]),
            o => panic!("{o:?}"),
        }
        let d = r.dispatch("merge", Utc::now()).unwrap();
        assert_eq!(d.inputs["discover"].as_array().unwrap().len(), 3);
    }

    /// `events` applied to a fresh record whose screening was dispatched
    /// at `t0`; the outcomes and the record after.
    fn after(events: &[TaskEvent], t0: DateTime<Utc>) -> (Vec<EventOutcome>, Value) {
        let mut r = instantiate("w".into(), "A".into(), "p".into(), stock(), 10, t0);
        r.dispatch("screening", t0).unwrap();
        let outcomes = events
            .iter()
            .map(|e| r.apply_event(e, e.at + ChronoDuration::milliseconds(1)))
            .collect();
        (outcomes, serde_json::to_value(&r).unwrap())
    }

    /// The worker's `started` (at `t0 + 1 ms`) and its terminal event of
    /// `status` (at `t0 + 9 ms`), both saying the attempt started at
    /// `t0 + 1 ms`.
    fn announced_and_ended(status: TaskStatus, t0: DateTime<Utc>) -> [TaskEvent; 2] {
        let r = instantiate("w".into(), "A".into(), "p".into(), stock(), 10, t0);
        let begun = t0 + ChronoDuration::milliseconds(1);
        let mut started = ev(&r, "screening", 1, TaskStatus::Started);
        (started.started_at, started.at) = (Some(begun), begun);
        let mut end = ev(&r, "screening", 1, status);
        (end.started_at, end.at) = (Some(begun), t0 + ChronoDuration::milliseconds(9));
        [started, end]
    }

    #[test]
    fn a_terminal_event_without_its_started_is_applied_as_both() {
        let t0 = Utc::now();
        // Completed; failed for a retry; failed for good (the workflow
        // pauses).
        for (status, permanent) in [
            (TaskStatus::Completed, false),
            (TaskStatus::Failed, false),
            (TaskStatus::Failed, true),
        ] {
            let [started, mut end] = announced_and_ended(status, t0);
            if let Some(err) = end.error.as_mut().filter(|_| permanent) {
                err.class = ErrorClass::Permanent;
            }
            let (both, both_rec) = after(&[started, end.clone()], t0);
            let (alone, alone_rec) = after(std::slice::from_ref(&end), t0);
            assert_eq!(both[0], EventOutcome::Started);
            assert_eq!(alone[0], both[1], "{status:?}, permanent: {permanent}");
            assert_eq!(alone_rec, both_rec, "{status:?}, permanent: {permanent}");
        }
        // The end is what counts: a completion without `started` frees
        // what it unblocks and records when the attempt ran.
        let [_, done] = announced_and_ended(TaskStatus::Completed, t0);
        let (o, rec) = after(&[done], t0);
        assert!(
            matches!(&o[0], EventOutcome::Completed { newly_ready, .. } if newly_ready.len() == 2),
            "{o:?}"
        );
        let t = &rec["tasks"]["screening"];
        assert_eq!(t["state"], "completed", "{t}");
        assert_eq!(t["worker_id"], "w1", "{t}");
        let at = |v: &Value| v.as_str().unwrap().parse::<DateTime<Utc>>().unwrap();
        assert_eq!(at(&t["started_at"]), t0 + ChronoDuration::milliseconds(1));
        assert_eq!(at(&t["finished_at"]), t0 + ChronoDuration::milliseconds(9));
    }

    #[test]
    fn a_failure_the_coordinator_records_starts_nothing() {
        // A silent or undeliverable attempt is failed with the record's own
        // started_at: for one never heard of, none; it must stay unstarted.
        let t0 = Utc::now();
        let mut r = instantiate("w".into(), "A".into(), "p".into(), stock(), 10, t0);
        r.dispatch("screening", t0).unwrap();
        let mut e = ev(&r, "screening", 1, TaskStatus::Failed);
        e.worker_id = "coordinator".into();
        assert!(matches!(
            r.apply_event(&e, t0),
            EventOutcome::Failed(RetryDecision::Retry { attempt: 2, .. })
        ));
        let t = &r.tasks["screening"];
        assert_eq!(t.started_at, None);
        assert_eq!(t.state, TaskRunState::Ready);
    }

    #[test]
    fn a_late_started_after_the_end_changes_nothing() {
        // Published before the terminal event but consumed after it (or
        // redelivered): the task is finished and stays so.
        let t0 = Utc::now();
        let [started, done] = announced_and_ended(TaskStatus::Completed, t0);
        let (o, rec) = after(&[done.clone(), started], t0);
        assert_eq!(o[1], EventOutcome::Ignored("task already finished"));
        let (_, done_only) = after(&[done], t0);
        assert_eq!(rec, done_only);
    }

    #[test]
    fn overdue_is_flagged_once() {
        let mut r = instantiate("w".into(), "A".into(), "p".into(), stock(), 10, Utc::now());
        let t0 = Utc::now();
        r.dispatch("screening", t0).unwrap();
        let mut e = ev(&r, "screening", 1, TaskStatus::Started);
        e.started_at = Some(t0);
        r.apply_event(&e, t0);
        assert!(r
            .flag_overdue(t0 + ChronoDuration::milliseconds(15), 1.0)
            .is_empty());
        assert_eq!(
            r.flag_overdue(t0 + ChronoDuration::milliseconds(25), 1.0),
            vec!["screening"]
        );
        assert!(r
            .flag_overdue(t0 + ChronoDuration::milliseconds(50), 1.0)
            .is_empty());
    }
}
