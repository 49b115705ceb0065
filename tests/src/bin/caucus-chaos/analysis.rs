//! The four checks, as pure functions of what was observed from outside:
//! task events (the `CAUCUS_EVENTS` stream plus a live tap of the event
//! subjects), the revisions of the stored workflow records (the KV stream
//! of `caucus_workflows`), the coordinator's final `status` answers, and the
//! tool's own journal of what it killed, paused or flushed and when.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::{DateTime, Duration as TimeDelta, Utc};
use serde::Serialize;
use serde_json::Value;

use caucus_shared::task::TaskStatus;

/// One task event as seen on the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct Ev {
    /// `<workflow_id>/<task key>`.
    pub task_id: String,
    /// Its workflow.
    pub workflow_id: String,
    /// Agent type that ran it.
    pub agent_type: String,
    /// Attempt number.
    pub attempt: u32,
    /// started / progress / completed / failed.
    pub status: TaskStatus,
    /// The reporting worker (its instance id).
    pub worker_id: String,
    /// When the attempt started on that worker.
    pub started_at: Option<DateTime<Utc>>,
    /// When the worker emitted the event.
    pub at: DateTime<Utc>,
    /// When it reached NATS: the tap's receive time or the stream's store
    /// time, whichever is earlier.
    pub seen_at: DateTime<Utc>,
}

impl Ev {
    fn key(
        &self,
    ) -> (
        String,
        u32,
        &'static str,
        String,
        Option<DateTime<Utc>>,
        DateTime<Utc>,
    ) {
        (
            self.task_id.clone(),
            self.attempt,
            self.status.as_str(),
            self.worker_id.clone(),
            self.started_at,
            self.at,
        )
    }
}

/// How many events came from where.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EventSources {
    /// Distinct events in all.
    pub distinct: usize,
    /// Stored in the stream.
    pub stored: usize,
    /// Seen only by the tap: dropped by the stream's de-duplication (a
    /// second execution of the same attempt reporting the same status).
    pub tap_only: usize,
    /// Stored but missed by the tap (published while the tool was
    /// reconnecting).
    pub stream_only: usize,
}

/// Union of the tapped and the stored events (identical events once).
pub fn merge(tap: Vec<Ev>, stream: Vec<Ev>) -> (Vec<Ev>, EventSources) {
    let mut by_key: HashMap<_, (Ev, bool, bool)> = HashMap::new();
    for (ev, from_tap) in tap
        .into_iter()
        .map(|e| (e, true))
        .chain(stream.into_iter().map(|e| (e, false)))
    {
        let entry = by_key
            .entry(ev.key())
            .or_insert_with(|| (ev.clone(), false, false));
        entry.0.seen_at = entry.0.seen_at.min(ev.seen_at);
        if from_tap {
            entry.1 = true;
        } else {
            entry.2 = true;
        }
    }
    let mut src = EventSources::default();
    let mut out = Vec::with_capacity(by_key.len());
    for (_, (ev, tap, stored)) in by_key {
        src.distinct += 1;
        src.stored += usize::from(stored);
        src.tap_only += usize::from(tap && !stored);
        src.stream_only += usize::from(stored && !tap);
        out.push(ev);
    }
    out.sort_by(|a, b| a.seen_at.cmp(&b.seen_at).then(a.task_id.cmp(&b.task_id)));
    (out, src)
}

// ---------------------------------------------------------------------------
// Stored workflow records

/// What the revisions of one task in the stored record showed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct KvTask {
    /// Completed in the last revision seen.
    #[serde(skip)]
    completed_now: bool,
    /// Times a revision showed it completed after one that did not (or as
    /// the first revision seen).
    pub entered_completed: u32,
    /// Distinct `attempt@finished_at` of its completed revisions.
    pub completions: BTreeSet<String>,
    /// Attempts it was completed at.
    pub completed_attempts: BTreeSet<u32>,
    /// Times a revision showed it not completed after one that did.
    pub regressions: u32,
}

/// The last revision seen of one workflow record.
#[derive(Debug, Clone, Default, Serialize)]
pub struct KvWorkflow {
    /// The item.
    pub item: String,
    /// Its state in that revision.
    pub state: String,
}

/// Follows the revisions of the workflow records as they are written.
#[derive(Debug, Clone, Default)]
pub struct KvTracker {
    /// Revisions read.
    pub revisions: u64,
    /// Revisions whose body was not a workflow record.
    pub unreadable: u64,
    /// Per task id.
    pub tasks: BTreeMap<String, KvTask>,
    /// Per workflow id.
    pub workflows: BTreeMap<String, KvWorkflow>,
}

impl KvTracker {
    /// One revision of `workflow_id`'s record.
    pub fn observe(&mut self, workflow_id: &str, record: &Value) {
        self.revisions += 1;
        let Some(tasks) = record["tasks"].as_object() else {
            self.unreadable += 1;
            return;
        };
        self.workflows.insert(
            workflow_id.to_string(),
            KvWorkflow {
                item: record["item"].as_str().unwrap_or_default().to_string(),
                state: record["state"].as_str().unwrap_or_default().to_string(),
            },
        );
        for (key, t) in tasks {
            let entry = self
                .tasks
                .entry(format!("{workflow_id}/{key}"))
                .or_default();
            let completed = t["state"] == "completed";
            if completed {
                if !entry.completed_now {
                    entry.entered_completed += 1;
                }
                entry
                    .completed_attempts
                    .insert(t["attempt"].as_u64().unwrap_or(0) as u32);
                entry.completions.insert(format!(
                    "{}@{}",
                    t["attempt"],
                    t["finished_at"].as_str().unwrap_or("-")
                ));
            } else if entry.completed_now {
                entry.regressions += 1;
            }
            entry.completed_now = completed;
        }
    }
}

// ---------------------------------------------------------------------------
// Lost workflows

/// A workflow the system accepted that did not complete.
#[derive(Debug, Clone, Serialize)]
pub struct LostWorkflow {
    /// Its id.
    pub workflow_id: String,
    /// Its item.
    pub item: String,
    /// Its state per the coordinator, or `unknown` when `status` does not
    /// list it.
    pub state: String,
    /// Unfinished tasks: `stage: state (attempt n[, last error])`.
    pub unfinished: Vec<String>,
    /// The record's `failure` and `pause` (trigger and reason), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// `tracked` (id, item) whose final `status` entry is not completed.
pub fn lost(tracked: &[(String, String)], finals: &HashMap<String, Value>) -> Vec<LostWorkflow> {
    let mut out = Vec::new();
    for (id, item) in tracked {
        let Some(w) = finals.get(id) else {
            out.push(LostWorkflow {
                workflow_id: id.clone(),
                item: item.clone(),
                state: "unknown".into(),
                unfinished: vec!["the coordinator's status does not list it".into()],
                why: None,
            });
            continue;
        };
        if w["state"] == "completed" {
            continue;
        }
        let mut unfinished = Vec::new();
        if let Some(tasks) = w["tasks"].as_object() {
            for (stage, t) in tasks {
                if t["state"] != "completed" {
                    let err = match t["error"]["error_type"].as_str() {
                        Some(e) => format!(", last error {e}"),
                        None => String::new(),
                    };
                    unfinished.push(format!(
                        "{stage}: {} (attempt {}{err})",
                        t["state"].as_str().unwrap_or("?"),
                        t["attempt"]
                    ));
                }
            }
        }
        let mut why = Vec::new();
        if let Some(f) = w["failure"].as_str() {
            why.push(format!("failure: {f}"));
        }
        if let Some(r) = w["pause"]["reason"].as_str() {
            why.push(format!(
                "paused by {}: {r}",
                w["pause"]["trigger_source"].as_str().unwrap_or("?")
            ));
        }
        out.push(LostWorkflow {
            workflow_id: id.clone(),
            item: item.clone(),
            state: w["state"].as_str().unwrap_or("?").to_string(),
            unfinished,
            why: (!why.is_empty()).then(|| why.join("; ")),
        });
    }
    out
}

// ---------------------------------------------------------------------------
// Completions applied more than once

/// A task with evidence that its completion was applied more than once.
#[derive(Debug, Clone, Serialize)]
pub struct DuplicateCompletion {
    /// `<workflow_id>/<task key>`.
    pub task_id: String,
    /// What showed it.
    pub evidence: Vec<String>,
}

/// Tasks whose completion was recorded more than once, and (second) how
/// many tasks ran to completion in more than one attempt without that (a
/// retry of an attempt that went silent, whose late completion the record
/// ignored: work done twice, applied once). `finals` maps task ids to the
/// final record's `(state, attempt)` from `status`.
pub fn duplicate_completions(
    events: &[Ev],
    kv: &KvTracker,
    finals: &HashMap<String, (String, u32)>,
) -> (Vec<DuplicateCompletion>, usize) {
    let mut completed: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    for e in events {
        if e.status == TaskStatus::Completed {
            completed.entry(&e.task_id).or_default().insert(e.attempt);
        }
    }
    let mut evidence: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut note =
        |task: &str, line: String| evidence.entry(task.to_string()).or_default().push(line);
    let mut rerun = 0;
    for (task, attempts) in &completed {
        let recorded = kv.tasks.get(*task).map(|t| &t.completed_attempts);
        if let Some(first) = recorded.and_then(|r| r.iter().next()) {
            for later in attempts.range(first + 1..) {
                note(
                    task,
                    format!(
                        "attempt {later} ran to completion after the record had completed \
                         attempt {first}: it was dispatched again"
                    ),
                );
            }
        }
        if attempts.len() > 1 {
            rerun += 1;
        }
    }
    for (task, (state, fin)) in finals {
        let Some(t) = kv.tasks.get(task) else {
            continue;
        };
        if let Some(first) = t.completed_attempts.iter().next() {
            if state != "completed" {
                note(
                    task,
                    format!("the record completed attempt {first}, but its final state is {state}"),
                );
            } else if fin > first {
                note(
                    task,
                    format!(
                        "the record's final attempt {fin} replaced its completed attempt {first}"
                    ),
                );
            }
        }
    }
    for (task, t) in &kv.tasks {
        if t.entered_completed > 1 {
            note(
                task,
                format!(
                    "the stored record became `completed` {} times",
                    t.entered_completed
                ),
            );
        }
        if t.completions.len() > 1 {
            let list: Vec<&str> = t.completions.iter().map(String::as_str).collect();
            note(
                task,
                format!(
                    "the stored completion changed (attempt@finished_at): {}",
                    list.join(", ")
                ),
            );
        }
        if t.regressions > 0 {
            note(
                task,
                format!(
                    "the stored record went back from `completed` {} time(s)",
                    t.regressions
                ),
            );
        }
    }
    let dups = evidence
        .into_iter()
        .map(|(task_id, evidence)| DuplicateCompletion { task_id, evidence })
        .collect();
    (dups, rerun)
}

// ---------------------------------------------------------------------------
// Concurrency per agent type

/// What the tool did that bears on executions.
#[derive(Debug, Clone, Default)]
pub struct Outages {
    /// Worker instance id → when it was SIGKILLed.
    pub kills: HashMap<String, DateTime<Utc>>,
    /// (worker instance id, SIGSTOP, SIGCONT).
    pub pauses: Vec<(String, DateTime<Utc>, DateTime<Utc>)>,
}

/// How an execution's end was known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndBy {
    /// Its completed or failed event.
    Event,
    /// Its worker was SIGKILLed.
    Killed,
    /// No end seen and the worker lived on (a run cancelled because its
    /// lease was lost reports nothing): when the handler's fixed run time
    /// was over, or when its worker woke if it was stopped then.
    Model,
}

/// One run of one task attempt on one worker.
#[derive(Debug, Clone, Serialize)]
pub struct Execution {
    /// The task.
    pub task_id: String,
    /// The attempt.
    pub attempt: u32,
    /// The worker instance.
    pub worker_id: String,
    /// Its agent type.
    pub agent_type: String,
    /// Start (the worker's `started_at`).
    pub start: DateTime<Utc>,
    /// End.
    pub end: DateTime<Utc>,
    /// How the end is known.
    pub end_by: EndBy,
    /// Spans within it during which its worker was stopped (SIGSTOP).
    pub frozen: Vec<(DateTime<Utc>, DateTime<Utc>)>,
    /// When its handler's work was over: `end`, or the SIGSTOP of its
    /// worker when the handler's (wall-clock) sleep ran out before the
    /// SIGCONT: waking, the worker only reports it.
    pub worked_until: DateTime<Utc>,
}

impl Execution {
    /// The spans it ran: start to `worked_until` without the frozen ones.
    pub fn running(&self) -> Vec<(DateTime<Utc>, DateTime<Utc>)> {
        let mut out = Vec::new();
        let mut from = self.start;
        for (p, c) in &self.frozen {
            if *p > from {
                out.push((from, (*p).min(self.worked_until)));
            }
            from = from.max(*c);
        }
        if self.worked_until > from {
            out.push((from, self.worked_until));
        }
        out.retain(|(a, b)| b > a);
        out
    }
}

/// Reconstructs every execution from the events: one per (task, attempt,
/// worker, started_at). `task` is the handler's fixed run time.
pub fn executions(events: &[Ev], out: &Outages, task: TimeDelta) -> Vec<Execution> {
    type Key = (String, u32, String, DateTime<Utc>);
    struct Acc {
        agent_type: String,
        end: Option<DateTime<Utc>>,
        started_seen: Option<DateTime<Utc>>,
    }
    let mut groups: BTreeMap<Key, Acc> = BTreeMap::new();
    for e in events {
        if e.status == TaskStatus::Progress {
            continue;
        }
        let start = e.started_at.unwrap_or(e.at);
        let acc = groups
            .entry((e.task_id.clone(), e.attempt, e.worker_id.clone(), start))
            .or_insert(Acc {
                agent_type: e.agent_type.clone(),
                end: None,
                started_seen: None,
            });
        match e.status {
            TaskStatus::Started => {
                acc.started_seen = Some(acc.started_seen.map_or(e.seen_at, |s| s.min(e.seen_at)))
            }
            _ => acc.end = Some(acc.end.map_or(e.at, |x| x.min(e.at))),
        }
    }
    // The handler starts once its `started` event is stored.
    let slack = TimeDelta::milliseconds(100);
    groups
        .into_iter()
        .map(|((task_id, attempt, worker_id, start), acc)| {
            let mut pauses: Vec<(DateTime<Utc>, DateTime<Utc>)> = out
                .pauses
                .iter()
                .filter(|(w, _, _)| *w == worker_id)
                .map(|(_, p, c)| (*p, *c))
                .collect();
            pauses.sort();
            // A sleep is wall-clock time: it is over at anchor + task,
            // whether or not its worker was stopped meanwhile.
            let anchor = acc.started_seen.map_or(start, |s| s.max(start));
            let sleep_over = anchor + task + slack;
            let (end, end_by) = match acc.end {
                Some(end) => (end.max(start), EndBy::Event),
                None => {
                    // Over at anchor + task, unless the worker was stopped
                    // then: it ends (completes or is cancelled) as it wakes.
                    let mut end = sleep_over;
                    for (p, c) in &pauses {
                        if *p <= end && end < *c {
                            end = *c;
                        }
                    }
                    match out.kills.get(&worker_id) {
                        Some(k) if *k >= start && *k < end => (*k, EndBy::Killed),
                        _ => (end, EndBy::Model),
                    }
                }
            };
            let frozen: Vec<_> = pauses
                .into_iter()
                .filter(|(p, c)| *p < end && *c > start)
                .map(|(p, c)| (p.max(start), c.min(end)))
                .collect();
            let worked_until = frozen
                .iter()
                .find(|(_, c)| sleep_over <= *c)
                .map_or(end, |(p, _)| (*p).min(end));
            Execution {
                task_id,
                attempt,
                worker_id,
                agent_type: acc.agent_type,
                start,
                end,
                end_by,
                frozen,
                worked_until,
            }
        })
        .collect()
}

/// Most intervals open at one instant, and the first instant it happens
/// (an interval ending at t does not overlap one starting at t).
pub fn peak(intervals: &[(DateTime<Utc>, DateTime<Utc>)]) -> (usize, Option<DateTime<Utc>>) {
    let mut points: Vec<(DateTime<Utc>, i32)> = Vec::with_capacity(intervals.len() * 2);
    for (s, e) in intervals {
        if e > s {
            points.push((*s, 1));
            points.push((*e, -1));
        }
    }
    points.sort();
    let (mut cur, mut max, mut at) = (0i32, 0i32, None);
    for (t, d) in points {
        cur += d;
        if cur > max {
            max = cur;
            at = Some(t);
        }
    }
    (max as usize, at)
}

/// A stretch of time, start to end.
type Span = (DateTime<Utc>, DateTime<Utc>);

/// Concurrency of one agent type.
#[derive(Debug, Clone, Serialize)]
pub struct AgentConcurrency {
    /// Cluster capacity: the workers' slots, capped by `worker.capacity_cap`.
    pub capacity: usize,
    /// Most executions running at one instant.
    pub peak: usize,
    /// The first instant it happened.
    pub peak_at: Option<DateTime<Utc>>,
    /// The executions running then (when over capacity).
    pub at_peak: Vec<String>,
    /// Executions in all.
    pub executions: usize,
    /// Ended by a SIGKILL of their worker.
    pub ended_by_kill: usize,
    /// End not seen; modelled.
    pub ended_by_model: usize,
    /// Partly frozen (their worker was stopped during them).
    pub frozen: usize,
    /// `peak > capacity`.
    pub violated: bool,
}

/// Per agent type, the peak against `capacity`.
pub fn concurrency(
    execs: &[Execution],
    capacity: &BTreeMap<String, usize>,
) -> BTreeMap<String, AgentConcurrency> {
    let mut out = BTreeMap::new();
    for (agent, cap) in capacity {
        let mine: Vec<&Execution> = execs.iter().filter(|e| &e.agent_type == agent).collect();
        let spans: Vec<(&Execution, Span)> = mine
            .iter()
            .flat_map(|e| e.running().into_iter().map(move |s| (*e, s)))
            .collect();
        let intervals: Vec<_> = spans.iter().map(|(_, s)| *s).collect();
        let (peak, peak_at) = peak(&intervals);
        let violated = peak > *cap;
        let at_peak = match peak_at.filter(|_| violated) {
            Some(t) => spans
                .iter()
                .filter(|(_, (s, e))| *s <= t && t < *e)
                .map(|(x, _)| {
                    format!(
                        "{}@{} on {} ({} → {}, end by {:?}{})",
                        x.task_id,
                        x.attempt,
                        x.worker_id,
                        x.start.format("%H:%M:%S%.3f"),
                        x.end.format("%H:%M:%S%.3f"),
                        x.end_by,
                        if x.frozen.is_empty() {
                            ""
                        } else {
                            ", frozen part of it"
                        }
                    )
                })
                .collect(),
            None => Vec::new(),
        };
        out.insert(
            agent.clone(),
            AgentConcurrency {
                capacity: *cap,
                peak,
                peak_at,
                at_peak,
                executions: mine.len(),
                ended_by_kill: mine.iter().filter(|e| e.end_by == EndBy::Killed).count(),
                ended_by_model: mine.iter().filter(|e| e.end_by == EndBy::Model).count(),
                frozen: mine.iter().filter(|e| !e.frozen.is_empty()).count(),
                violated,
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_700_000_000_000 + ms).unwrap()
    }

    fn ev(task: &str, attempt: u32, status: TaskStatus, worker: &str, start: i64, at: i64) -> Ev {
        Ev {
            task_id: task.into(),
            workflow_id: task.split('/').next().unwrap().into(),
            agent_type: "valuation".into(),
            attempt,
            status,
            worker_id: worker.into(),
            started_at: Some(t(start)),
            at: t(at),
            seen_at: t(at),
        }
    }

    fn ms(n: i64) -> TimeDelta {
        TimeDelta::milliseconds(n)
    }

    fn rec(state: &str, attempt: u32, fin: &str) -> Value {
        json!({"item": "A", "state": "running", "tasks": {
            "x": {"state": state, "attempt": attempt, "finished_at": fin},
            "y": {"state": "waiting", "attempt": 0}}})
    }

    #[test]
    fn merge_counts_what_only_the_tap_saw() {
        let a = ev("w/x", 1, TaskStatus::Started, "w1", 0, 0);
        let b = ev("w/x", 1, TaskStatus::Completed, "w1", 0, 300);
        let dup = ev("w/x", 1, TaskStatus::Completed, "w2", 50, 350);
        let (all, src) = merge(vec![a.clone(), b.clone(), dup], vec![a, b]);
        assert_eq!(all.len(), 3);
        assert_eq!((src.stored, src.tap_only, src.stream_only), (2, 1, 0));
    }

    #[test]
    fn a_retry_of_a_silent_attempt_is_work_done_twice_not_applied_twice() {
        // Attempt 1 went silent (frozen worker), the coordinator retried;
        // the record only ever completed attempt 2.
        let evs = vec![
            ev("w/x", 1, TaskStatus::Completed, "w1", 0, 3000),
            ev("w/x", 2, TaskStatus::Completed, "w2", 2500, 2800),
        ];
        let mut kv = KvTracker::default();
        kv.observe("w", &rec("dispatched", 2, ""));
        kv.observe("w", &rec("completed", 2, "t2"));
        let finals = HashMap::from([("w/x".to_string(), ("completed".to_string(), 2))]);
        let (d, rerun) = duplicate_completions(&evs, &kv, &finals);
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(rerun, 1);
    }

    #[test]
    fn a_task_dispatched_again_after_its_completion_was_recorded_is_a_duplicate() {
        let evs = vec![
            ev("w/x", 1, TaskStatus::Completed, "w1", 0, 300),
            ev("w/x", 2, TaskStatus::Completed, "w2", 400, 700),
        ];
        let mut kv = KvTracker::default();
        kv.observe("w", &rec("completed", 1, "t1"));
        let finals = HashMap::from([("w/x".to_string(), ("completed".to_string(), 2))]);
        let (d, _) = duplicate_completions(&evs, &kv, &finals);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].task_id, "w/x");
        assert_eq!(d[0].evidence.len(), 2, "{d:?}");
    }

    #[test]
    fn the_stored_record_completing_twice_is_a_duplicate() {
        let mut kv = KvTracker::default();
        kv.observe("w", &rec("running", 1, ""));
        kv.observe("w", &rec("completed", 1, "t1"));
        kv.observe("w", &rec("completed", 1, "t1"));
        let (d, _) = duplicate_completions(&[], &kv, &HashMap::new());
        assert!(d.is_empty(), "{d:?}");
        kv.observe("w", &rec("running", 1, ""));
        kv.observe("w", &rec("completed", 1, "t2"));
        let (d, _) = duplicate_completions(&[], &kv, &HashMap::new());
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].evidence.len(), 3, "{d:?}");
        assert_eq!(kv.workflows["w"].item, "A");
    }

    #[test]
    fn lost_names_unfinished_and_unknown_workflows() {
        let tracked = vec![
            ("a".to_string(), "A".to_string()),
            ("b".to_string(), "B".to_string()),
            ("c".to_string(), "C".to_string()),
        ];
        let finals = HashMap::from([
            ("a".to_string(), json!({"state": "completed"})),
            (
                "b".to_string(),
                json!({"state": "running", "tasks": {
                    "valuation": {"state": "dispatched", "attempt": 1},
                    "screening": {"state": "completed", "attempt": 1}}}),
            ),
        ]);
        let l = lost(&tracked, &finals);
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].unfinished, vec!["valuation: dispatched (attempt 1)"]);
        assert_eq!(l[1].state, "unknown");
    }

    #[test]
    fn a_killed_workers_execution_ends_at_the_kill() {
        let evs = vec![ev("w/x", 1, TaskStatus::Started, "w1", 0, 0)];
        let mut out = Outages::default();
        out.kills.insert("w1".into(), t(120));
        let x = executions(&evs, &out, ms(300));
        assert_eq!((x[0].end, x[0].end_by), (t(120), EndBy::Killed));
        // Killed long after the handler must have finished: modelled end.
        out.kills.insert("w1".into(), t(5000));
        let x = executions(&evs, &out, ms(300));
        assert_eq!((x[0].end, x[0].end_by), (t(400), EndBy::Model));
    }

    #[test]
    fn a_stopped_worker_runs_nothing_while_stopped() {
        let evs = vec![
            // No end seen: it ends as the worker wakes (the sleep is over).
            ev("w/x", 1, TaskStatus::Started, "w1", 0, 0),
            // Completed after the wake-up.
            ev("w/y", 1, TaskStatus::Completed, "w1", 50, 3120),
        ];
        let out = Outages {
            pauses: vec![("w1".into(), t(100), t(3100))],
            ..Default::default()
        };
        let x = executions(&evs, &out, ms(300));
        assert_eq!((x[0].end, x[0].end_by), (t(3100), EndBy::Model));
        assert_eq!(x[0].running(), vec![(t(0), t(100))]);
        // Its sleep ran out while it was stopped: waking, it only reports.
        assert_eq!(x[1].running(), vec![(t(50), t(100))]);
        // A sleep not over at the SIGCONT goes on after it.
        let long = executions(
            &[ev("w/z", 1, TaskStatus::Completed, "w1", 0, 5200)],
            &out,
            ms(5000),
        );
        assert_eq!(long[0].running(), vec![(t(0), t(100)), (t(3100), t(5200))]);
        // Two others take the slots while it is stopped: never three at once.
        let mut all = x.clone();
        for (i, w) in ["w2", "w3"].iter().enumerate() {
            let task = format!("w/o{i}");
            let e = ev(&task, 1, TaskStatus::Completed, w, 500, 3100);
            all.extend(executions(&[e], &out, ms(300)));
        }
        let cap = BTreeMap::from([("valuation".to_string(), 2)]);
        let c = &concurrency(&all, &cap)["valuation"];
        assert_eq!((c.peak, c.frozen, c.violated), (2, 2, false));
    }

    #[test]
    fn three_executions_over_a_capacity_of_two_is_a_violation() {
        let mut evs = Vec::new();
        for (i, w) in ["w1", "w2", "w3"].iter().enumerate() {
            let task = format!("w/t{i}");
            evs.push(ev(&task, 1, TaskStatus::Completed, w, i as i64 * 10, 300));
        }
        let x = executions(&evs, &Outages::default(), ms(300));
        let cap = BTreeMap::from([("valuation".to_string(), 2)]);
        let c = &concurrency(&x, &cap)["valuation"];
        assert_eq!((c.peak, c.violated), (3, true));
        assert_eq!(c.at_peak.len(), 3);
        assert_eq!(c.peak_at, Some(t(20)));
    }

    #[test]
    fn back_to_back_executions_do_not_overlap() {
        let (p, _) = peak(&[(t(0), t(10)), (t(10), t(20)), (t(20), t(20))]);
        assert_eq!(p, 1);
    }
}
