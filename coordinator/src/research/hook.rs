//! The research rules applied to a workflow record as its task events
//! arrive and as time passes. Pure: the caller passes `now`.
//!
//! - A stage's gate is evaluated once all its tasks finished; its
//!   dependents start only after the gate passed (with or without a
//!   fallback), and a failed gate fails the workflow.
//! - A failed discovery stream is marked, not retried and not paused: the
//!   run goes on if the gate allows.
//! - Writes outside the task's key space are refused and audited.

use chrono::{DateTime, Duration as ChronoDuration, Utc};
use serde_json::Value;

use caucus_shared::task::{ErrorClass, TaskError, TaskEvent, TaskStatus};

use caucus_shared::outputs;
use caucus_shared::outputs::research::{DiscoveryOutput, Signals};

use super::gates::{stream_domains, Gate, GateDecision, StreamResult};
use super::isolation::{key_space, split_writes};
use super::spec::phase_limit_units;
use super::state::{ResearchAlert, StreamState};
use super::Phase;
use crate::workflow::{PauseSpec, TaskRunState, Tier, WorkflowRecord, WorkflowState};

const COORDINATOR: &str = "coordinator";

type Deadlines = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

impl WorkflowRecord {
    /// Whether research rules govern this workflow.
    pub fn is_research(&self) -> bool {
        self.research.is_some()
    }

    fn research_phase_of_task(&self, key: &str) -> Option<(Phase, String, Option<u32>)> {
        let t = self.tasks.get(key)?;
        let phase = self.research.as_ref()?.phase_of(&t.stage)?;
        Some((phase, t.stage.clone(), t.shard))
    }

    /// Who acted, for the audit trail: `stream-N` or the agent type.
    fn research_agent(&self, key: &str) -> String {
        match self.research_phase_of_task(key) {
            Some((Phase::Discovering, _, shard)) => format!("stream-{}", shard.unwrap_or(0) + 1),
            _ => self
                .tasks
                .get(key)
                .map(|t| t.agent_type.clone())
                .unwrap_or_else(|| key.to_string()),
        }
    }

    /// A failed attempt of this task is marked and the run goes on
    /// (discovery streams).
    pub(crate) fn research_isolates(&self, key: &str) -> bool {
        matches!(
            self.research_phase_of_task(key),
            Some((Phase::Discovering, _, _))
        )
    }

    /// A worker started a task or reported progress.
    pub(crate) fn research_on_started(&mut self, key: &str, ev: &TaskEvent, now: DateTime<Utc>) {
        let Some((phase, _, shard)) = self.research_phase_of_task(key) else {
            return;
        };
        let agent = self.research_agent(key);
        let expected_ms = self
            .tasks
            .get(key)
            .and_then(|t| self.stages.iter().find(|s| s.name == t.stage))
            .map(|s| (s.expected * self.unit_ms as f64).round() as i64)
            .unwrap_or(0);
        let Some(r) = self.research.as_mut() else {
            return;
        };
        let first = ev.status == TaskStatus::Started;
        if phase == Phase::Discovering {
            if let Some(s) = r.streams.get_mut(&(shard.unwrap_or(0) + 1)) {
                if s.state == StreamState::Pending {
                    s.state = StreamState::Running;
                    s.started_at = ev.started_at.or(Some(ev.at));
                    s.eta = s
                        .started_at
                        .map(|t| t + ChronoDuration::milliseconds(expected_ms));
                }
                if let Some(m) = &ev.message {
                    s.progress = Some(m.clone());
                }
            }
        }
        if first {
            r.audit(
                now,
                &agent,
                "started",
                format!("{phase} task {key} on {}", ev.worker_id),
            );
        } else if let Some(m) = &ev.message {
            r.audit(now, &agent, "progress", m.clone());
        }
    }

    /// A task completed (its output recorded): applies key-space isolation,
    /// records the stream's completion signal and evaluates the gate when
    /// the phase's tasks are all done.
    pub(crate) fn research_on_completed(&mut self, key: &str, now: DateTime<Utc>) {
        let Some((phase, stage, shard)) = self.research_phase_of_task(key) else {
            return;
        };
        let agent = self.research_agent(key);
        let space = self
            .stages
            .iter()
            .find(|s| s.name == stage)
            .and_then(|s| s.params.get("output_key_space"))
            .and_then(Value::as_str)
            .map(|t| key_space(t, shard));
        let Some(t) = self.tasks.get_mut(key) else {
            return;
        };
        let mut output = t.output.take().unwrap_or(Value::Null);
        let (accepted, refused) = split_writes(key, &mut output, space.as_deref());
        // An output of another schema_version reads as empty here; its
        // gate names the problem.
        let sources = outputs::decode::<DiscoveryOutput>(&output)
            .map_or(0, |o| o.sources.map_or(0, |s| s.len())) as u32;
        let signals: Signals = outputs::decode(&output).unwrap_or_default();
        let intervention = signals.intervention();
        let progress = signals.progress_text();
        t.output = Some(output);
        t.output_key = None;
        let gate_min = self.discovery_min_sources();
        let Some(r) = self.research.as_mut() else {
            return;
        };
        for w in refused {
            r.audit(
                now,
                &agent,
                "write_refused",
                format!("{}: {}", w.key, w.reason),
            );
            r.refuse(w);
        }
        let keys: Vec<String> = accepted.iter().map(|w| w.key.clone()).collect();
        if phase == Phase::Discovering {
            if let Some(s) = r.streams.get_mut(&(shard.unwrap_or(0) + 1)) {
                s.sources = sources;
                s.finished_at = Some(now);
                s.progress = progress.or(s.progress.take());
                s.keys = keys.clone();
                s.state = if sources >= gate_min {
                    StreamState::Complete
                } else {
                    StreamState::Insufficient
                };
            }
            r.audit(
                now,
                &agent,
                "stream_complete",
                format!("{sources} sources, {} keys written", keys.len()),
            );
        } else {
            r.audit(
                now,
                &agent,
                "complete",
                format!("{phase} task {key} done, {} keys written", keys.len()),
            );
        }
        r.pending_writes.extend(accepted);
        if let Some(why) = intervention {
            // The seed's error signal `NeedsIntervention` (and its automatic
            // escalations such as ethical concerns) from the agent itself:
            // the tier-3 path, i.e. a paused run, a checkpoint and a
            // critical alert card; a person resumes it.
            r.audit(now, &agent, "intervention_requested", why.clone());
            let spec = PauseSpec {
                reason: format!("{agent} asks for a person: {why}"),
                trigger_source: "research_agent".into(),
                tier: Some(Tier::Escalate),
                ..PauseSpec::default()
            };
            // Cannot fail: a task just completed, so the run is not finished.
            let _ = self.request_pause(spec, now);
        }
        self.research_maybe_gate(phase, now);
    }

    fn discovery_min_sources(&self) -> u32 {
        let Some(stage) = self
            .research
            .as_ref()
            .and_then(|r| r.phase_stages.get(&Phase::Discovering))
        else {
            return 0;
        };
        let params = self
            .stages
            .iter()
            .find(|s| &s.name == stage)
            .map(|s| s.params.clone())
            .unwrap_or(Value::Null);
        match Gate::from_params(Phase::Discovering, stage, &params) {
            Ok(Gate::Discovery(g)) => g.min_sources_per_stream,
            _ => 0,
        }
    }

    /// A discovery stream failed beyond its retry policy (already marked
    /// `failed` on the task).
    pub(crate) fn research_on_stream_failed(&mut self, key: &str, now: DateTime<Utc>) {
        let Some((phase, _, shard)) = self.research_phase_of_task(key) else {
            return;
        };
        let agent = self.research_agent(key);
        let error = self
            .tasks
            .get(key)
            .and_then(|t| t.error.as_ref())
            .map(|e| format!("{}: {}", e.error_type, e.message))
            .unwrap_or_else(|| "failed".into());
        let Some(r) = self.research.as_mut() else {
            return;
        };
        if let Some(s) = r.streams.get_mut(&(shard.unwrap_or(0) + 1)) {
            s.state = StreamState::Failed;
            s.finished_at = Some(now);
            s.error = Some(error.clone());
        }
        r.audit(now, &agent, "stream_failed", error);
        self.research_maybe_gate(phase, now);
    }

    /// Evaluates `phase`'s gate if it is the current phase and all its
    /// tasks finished.
    fn research_maybe_gate(&mut self, phase: Phase, now: DateTime<Utc>) {
        let Some(r) = self.research.as_ref() else {
            return;
        };
        if r.phase != phase || self.state.is_terminal() {
            return;
        }
        let Some(stage) = r.phase_stages.get(&phase).cloned() else {
            return;
        };
        let tasks: Vec<(&String, &crate::workflow::TaskRecord)> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.stage == stage)
            .collect();
        let finished = tasks
            .iter()
            .all(|(_, t)| matches!(t.state, TaskRunState::Completed | TaskRunState::Failed));
        if !finished {
            return;
        }
        let params = self
            .stages
            .iter()
            .find(|s| s.name == stage)
            .map(|s| s.params.clone())
            .unwrap_or(Value::Null);
        let decision = match Gate::from_params(phase, &stage, &params) {
            Err(e) => {
                self.research_fail(format!("gate thresholds: {e}"), false, now);
                return;
            }
            Ok(Gate::Discovery(g)) => {
                let streams: Vec<StreamResult> = tasks
                    .iter()
                    .map(|(_, t)| StreamResult {
                        stream: t.shard.unwrap_or(0) + 1,
                        outcome: match t.state {
                            TaskRunState::Completed => {
                                stream_domains(t.output.as_ref().unwrap_or(&Value::Null))
                            }
                            _ => Err(t
                                .error
                                .as_ref()
                                .map_or_else(|| "failed".into(), |e| e.error_type.as_str().into())),
                        },
                    })
                    .collect();
                g.evaluate(&streams)
            }
            Ok(gate) => match tasks.first() {
                Some((_, t)) if t.state == TaskRunState::Completed => {
                    gate.evaluate_output(t.output.as_ref().unwrap_or(&Value::Null))
                }
                _ => {
                    self.research_fail(format!("the {phase} task failed"), false, now);
                    return;
                }
            },
        };
        self.research_apply_gate(&stage, decision, now);
    }

    fn research_apply_gate(&mut self, stage: &str, d: GateDecision, now: DateTime<Utc>) {
        let Some(r) = self.research.as_mut() else {
            return;
        };
        r.audit(
            now,
            COORDINATOR,
            "quality_gate",
            format!("{}: {}", d.phase, d.summary()),
        );
        if d.phase == Phase::Discovering {
            for s in r.streams.values_mut() {
                if s.state != StreamState::Complete {
                    s.can_continue = Some(d.verdict.passed());
                    s.needs_intervention = d.escalate;
                }
            }
        }
        r.gates.insert(d.phase, d.clone());
        if !d.verdict.passed() {
            let reason = format!("{} quality gate failed: {}", d.phase, d.reasons.join("; "));
            self.research_fail(reason, d.escalate, now);
            return;
        }
        r.passed.insert(stage.to_string());
        let from = r.phase;
        let to = from.next().unwrap_or(Phase::Failed);
        match from.transition(to) {
            Ok(to) => {
                r.phase = to;
                r.phase_started_at = now;
                r.audit(now, COORDINATOR, "transition", format!("{from} → {to}"));
                if to == Phase::Complete {
                    self.state = WorkflowState::Completed;
                    self.finished_at = Some(now);
                }
                self.updated_at = now;
            }
            Err(e) => self.research_fail(e.to_string(), false, now),
        }
    }

    /// Fails the run: phase FAILED, workflow FAILED, an alert card queued
    /// (`workflow_escalated`, critical, when a person must step in).
    pub(crate) fn research_fail(&mut self, reason: String, escalate: bool, now: DateTime<Utc>) {
        let Some(r) = self.research.as_mut() else {
            return;
        };
        let from = r.phase;
        if from.is_terminal() {
            return;
        }
        r.phase = Phase::Failed;
        r.audit(
            now,
            COORDINATOR,
            "transition",
            format!("{from} → FAILED: {reason}"),
        );
        if escalate {
            r.audit(
                now,
                COORDINATOR,
                "escalation",
                format!("human intervention requested: {reason}"),
            );
        }
        r.alert = Some(ResearchAlert {
            event_type: if escalate {
                "workflow_escalated"
            } else {
                "research_failed"
            }
            .into(),
            severity: if escalate { "critical" } else { "warning" }.into(),
            reason: reason.clone(),
            sent: false,
        });
        self.state = WorkflowState::Failed;
        self.finished_at = Some(now);
        self.failure = Some(reason);
        self.updated_at = now;
    }

    /// (total deadline, current phase's deadline) while the limits apply.
    fn research_deadlines(&self) -> Option<Deadlines> {
        let r = self.research.as_ref()?;
        if r.phase.is_terminal() || self.state.is_terminal() {
            return None;
        }
        if matches!(self.state, WorkflowState::Paused | WorkflowState::Pausing) {
            return None;
        }
        let ms = |x: u64| ChronoDuration::milliseconds(x.min(i64::MAX as u64) as i64);
        let total = r
            .total_limit_ms
            .map(|l| self.created_at + ms(l.saturating_add(r.paused_ms)));
        let phase = r
            .phase_stages
            .get(&r.phase)
            .and_then(|s| self.stages.iter().find(|d| &d.name == s))
            .and_then(phase_limit_units)
            .map(|u| r.phase_started_at + ms((u * self.unit_ms as f64).round() as u64));
        Some((total, phase))
    }

    /// Whether a time limit has passed (cheap; call [`Self::research_tick`] then).
    pub fn research_due(&self, now: DateTime<Utc>) -> bool {
        self.research_deadlines()
            .is_some_and(|(t, p)| t.is_some_and(|t| now > t) || p.is_some_and(|p| now > p))
    }

    /// Applies the time limits: past the total, the run fails; past the
    /// discovery limit, unfinished streams are timed out and the gate
    /// decides with the streams that finished (seed: "all streams complete
    /// OR timeout"); past any other phase's limit, the run fails. Returns
    /// whether the record changed.
    pub fn research_tick(&mut self, now: DateTime<Utc>) -> bool {
        let Some((total, phase_deadline)) = self.research_deadlines() else {
            return false;
        };
        let Some(r) = self.research.as_ref() else {
            return false;
        };
        let phase = r.phase;
        if let Some(t) = total.filter(|t| now > *t) {
            let limit = (t - self.created_at).num_milliseconds();
            self.research_fail(
                format!("the run exceeded its total time limit of {limit} ms (in {phase})"),
                false,
                now,
            );
            return true;
        }
        let Some(p) = phase_deadline.filter(|p| now > *p) else {
            return false;
        };
        let limit = (p - r.phase_started_at).num_milliseconds();
        if phase != Phase::Discovering {
            self.research_fail(
                format!("phase {phase} exceeded its time limit of {limit} ms"),
                false,
                now,
            );
            return true;
        }
        let Some(stage) = r.phase_stages.get(&Phase::Discovering).cloned() else {
            return false;
        };
        let open: Vec<String> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.stage == stage)
            .filter(|(_, t)| !matches!(t.state, TaskRunState::Completed | TaskRunState::Failed))
            .map(|(k, _)| k.clone())
            .collect();
        for key in &open {
            let agent = self.research_agent(key);
            let message = format!("still running when DISCOVERING reached its limit of {limit} ms");
            if let Some(t) = self.tasks.get_mut(key) {
                t.state = TaskRunState::Failed;
                t.finished_at = Some(now);
                t.not_before = None;
                t.error = Some(TaskError {
                    class: ErrorClass::Transient,
                    error_type: "phase_timeout".into(),
                    message: message.clone(),
                    data_source: None,
                });
                let shard = t.shard.unwrap_or(0);
                if let Some(r) = self.research.as_mut() {
                    if let Some(s) = r.streams.get_mut(&(shard + 1)) {
                        s.state = StreamState::TimedOut;
                        s.finished_at = Some(now);
                        s.error = Some(message.clone());
                    }
                    r.audit(now, &agent, "stream_timed_out", message);
                }
            }
        }
        self.updated_at = now;
        self.research_maybe_gate(Phase::Discovering, now);
        if !self.state.is_terminal() {
            self.promote_waiting();
        }
        true
    }

    /// A pause was requested (by a person, a failure tier, a batch or the
    /// correlator): audited, as the seed audits every intervention.
    pub(crate) fn research_on_pause(&mut self, who: &str, reason: &str, now: DateTime<Utc>) {
        if let Some(r) = self.research.as_mut() {
            let phase = r.phase;
            r.audit(now, who, "pause_requested", format!("in {phase}: {reason}"));
        }
    }

    /// The run resumed after a pause requested at `paused_since`: the time
    /// limits get the paused time back, and the resume is audited.
    pub(crate) fn research_on_resume(
        &mut self,
        paused_since: Option<DateTime<Utc>>,
        renewed: &[String],
        now: DateTime<Utc>,
    ) {
        let Some(r) = self.research.as_mut() else {
            return;
        };
        if let Some(since) = paused_since {
            let paused = (now - since).num_milliseconds().max(0);
            r.paused_ms = r.paused_ms.saturating_add(paused as u64);
            // The phase may have begun during the pause (a gate passed
            // while in-flight tasks finished): give back only its part.
            let phase_part = (now - since.max(r.phase_started_at)).max(ChronoDuration::zero());
            r.phase_started_at += phase_part;
        }
        let phase = r.phase;
        let result = if renewed.is_empty() {
            format!("in {phase}; nothing restarted")
        } else {
            format!("in {phase}; restarted {}", renewed.join(", "))
        };
        r.audit(now, "api", "resumed", result);
    }

    /// A computed resume plan never restarts a discovery stream the gate
    /// already decided without (seed: failed streams are not retried).
    pub(crate) fn research_adjust_plan(&self, plan: &mut caucus_shared::messages::ResumePlan) {
        let Some(r) = self.research.as_ref() else {
            return;
        };
        let (decided, restart): (Vec<String>, Vec<String>) = std::mem::take(&mut plan.restart)
            .into_iter()
            .partition(|k| {
                self.tasks.get(k).is_some_and(|t| {
                    t.state == TaskRunState::Failed
                        && r.passed.contains(&t.stage)
                        && r.phase_of(&t.stage) == Some(Phase::Discovering)
                })
            });
        plan.restart = restart;
        plan.skip.extend(decided);
    }

    /// Whether a periodic checkpoint is due (every `interval` while running).
    pub fn research_checkpoint_due(
        &self,
        now: DateTime<Utc>,
        interval: std::time::Duration,
    ) -> bool {
        let Some(r) = self.research.as_ref() else {
            return false;
        };
        if self.state.is_terminal() || interval.is_zero() {
            return false;
        }
        let since = r.last_checkpoint_at.unwrap_or(self.created_at);
        ChronoDuration::from_std(interval).is_ok_and(|i| now - since >= i)
    }

    /// Records that checkpoint `id` was stored.
    pub fn research_checkpointed(&mut self, id: &str, now: DateTime<Utc>) {
        let Some(r) = self.research.as_mut() else {
            return;
        };
        r.checkpoints += 1;
        r.last_checkpoint_at = Some(now);
        let done = r
            .streams
            .values()
            .filter(|s| matches!(s.state, StreamState::Complete))
            .count();
        let mut summary = format!(
            "{id}: phase {}, {done}/{} streams complete",
            r.phase,
            r.streams.len()
        );
        // The seed's checkpoint also "detects stuck agents": name them.
        let stuck: Vec<&str> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.overdue && t.state == TaskRunState::Running)
            .map(|(k, _)| k.as_str())
            .collect();
        if !stuck.is_empty() {
            summary.push_str(&format!(", overdue: {}", stuck.join(", ")));
        }
        r.audit(now, COORDINATOR, "checkpoint", summary);
    }
}
