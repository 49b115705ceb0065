//! The report: the four checks with their evidence, plus what the run did.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Duration as TimeDelta, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::analysis::{
    self, AgentConcurrency, DuplicateCompletion, Ev, EventSources, KvTracker, LostWorkflow, Outages,
};
use crate::cluster::{Death, Journal};
use crate::observe::Submitted;
use crate::plan::{FaultKind, Timing};

/// Everything observed, for [`build`].
pub struct Inputs {
    pub seed: u64,
    pub opts_workflows: usize,
    pub duration: Duration,
    pub task_ms: u64,
    pub timing: Timing,
    pub capacity: BTreeMap<String, usize>,
    pub faults_secs: f64,
    pub t0: DateTime<Utc>,
    pub submitted: Submitted,
    pub tracked: Vec<(String, String)>,
    pub finals: HashMap<String, Value>,
    pub kv: KvTracker,
    pub tapped: Vec<Ev>,
    pub stored: Vec<Ev>,
    pub outages: Outages,
    pub journal: Journal,
    /// `agent_failure_event`s on `caucus.failures.>` (subject, envelope).
    pub failures: Vec<(String, Value)>,
    /// Messages on `caucus.control.>` (pause requests, batch triggers, …).
    pub control: Vec<(String, Value)>,
    pub run_dir: Option<PathBuf>,
}

/// One check: how many, whether it failed, the cases.
#[derive(Debug, Serialize)]
pub struct Check<T> {
    pub count: usize,
    pub violated: bool,
    pub cases: Vec<T>,
}

impl<T> Check<T> {
    fn of(cases: Vec<T>) -> Self {
        Check {
            count: cases.len(),
            violated: !cases.is_empty(),
            cases,
        }
    }
}

/// Peaks per agent type.
#[derive(Debug, Serialize)]
pub struct CapacityCheck {
    pub violated: bool,
    pub agents: BTreeMap<String, AgentConcurrency>,
}

/// One injected fault.
#[derive(Debug, Serialize)]
pub struct FaultOut {
    /// Seconds after the start of the fault window.
    pub at_s: f64,
    pub kind: FaultKind,
    pub target: String,
    /// How long it lasted (restart and readiness included).
    pub ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What was submitted.
#[derive(Debug, Serialize)]
pub struct Submissions {
    pub acknowledged: usize,
    /// Whether the submits carried idempotency keys (else items were
    /// looked up after an ambiguous failure).
    pub idempotency_keys: bool,
    /// Submit requests that failed in a way that may have stored them.
    pub ambiguous: u32,
    /// Items never accepted before the submit deadline.
    pub never_accepted: Vec<String>,
    /// Stored records nobody acknowledged to the submitter that did not
    /// complete (not counted as lost).
    pub unacknowledged_unfinished: Vec<LostWorkflow>,
}

/// Counts behind the checks.
#[derive(Debug, Serialize)]
pub struct Observed {
    pub events: EventSources,
    pub failed_events: usize,
    /// Tasks that ran to completion in more than one attempt while the
    /// record completed only one (a retry of a silent attempt).
    pub tasks_completed_in_two_attempts: usize,
    pub executions: usize,
    pub kv_revisions: u64,
    pub kv_unreadable: u64,
    pub incarnations: usize,
    pub not_ready: Vec<String>,
    /// Failure events (`caucus.failures.>`) per error type: what the
    /// correlator saw.
    pub failures_by_type: BTreeMap<String, usize>,
    /// Control messages (`caucus.control.<type>`) per type, e.g.
    /// `batch_trigger` when the correlator asked for a batch pause.
    pub control_by_type: BTreeMap<String, usize>,
}

/// The whole report (`--json`).
#[derive(Debug, Serialize)]
pub struct Report {
    /// All four checks hold and every item was accepted.
    pub ok: bool,
    pub seed: u64,
    pub workflows: usize,
    #[serde(with = "crate::plan::ms")]
    pub duration: Duration,
    pub task_ms: u64,
    pub timing: Timing,
    /// Length of the fault window as run.
    pub faults_secs: f64,
    pub faults: Vec<FaultOut>,
    pub lost_workflows: Check<LostWorkflow>,
    pub duplicate_completions: Check<DuplicateCompletion>,
    pub capacity: CapacityCheck,
    pub unasked_deaths: Check<Death>,
    pub submissions: Submissions,
    pub observed: Observed,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_dir: Option<PathBuf>,
}

/// Runs the checks.
pub fn build(i: Inputs) -> Report {
    let (events, sources) = analysis::merge(i.tapped, i.stored);
    let lost = analysis::lost(&i.tracked, &i.finals);

    let mut final_tasks: HashMap<String, (String, u32)> = HashMap::new();
    for (id, w) in &i.finals {
        for (key, t) in w["tasks"].as_object().into_iter().flatten() {
            final_tasks.insert(
                format!("{id}/{key}"),
                (
                    t["state"].as_str().unwrap_or_default().to_string(),
                    t["attempt"].as_u64().unwrap_or(0) as u32,
                ),
            );
        }
    }
    let (dups, reruns) = analysis::duplicate_completions(&events, &i.kv, &final_tasks);

    let task = TimeDelta::milliseconds(i.task_ms as i64);
    let execs = analysis::executions(&events, &i.outages, task);
    let agents = analysis::concurrency(&execs, &i.capacity);
    let capacity = CapacityCheck {
        violated: agents.values().any(|a| a.violated),
        agents,
    };

    let acked: std::collections::HashSet<&String> = i.tracked.iter().map(|(id, _)| id).collect();
    let unacked: Vec<(String, String)> =
        i.kv.workflows
            .iter()
            .filter(|(id, _)| !acked.contains(id))
            .map(|(id, w)| (id.clone(), w.item.clone()))
            .collect();
    let unacknowledged_unfinished = analysis::lost(&unacked, &i.finals);

    let deaths = Check::of(i.journal.deaths.clone());
    let lost_workflows = Check::of(lost);
    let duplicate_completions = Check::of(dups);
    let never_accepted = i.submitted.unsubmitted.clone();
    let ok = !lost_workflows.violated
        && !duplicate_completions.violated
        && !capacity.violated
        && !deaths.violated
        && never_accepted.is_empty();
    let faults = i
        .journal
        .faults
        .iter()
        .map(|f| FaultOut {
            at_s: (f.start - i.t0).num_milliseconds() as f64 / 1000.0,
            kind: f.kind,
            target: f.target.clone(),
            ms: (f.end - f.start).num_milliseconds(),
            note: f.note.clone(),
        })
        .collect();
    Report {
        ok,
        seed: i.seed,
        workflows: i.opts_workflows,
        duration: i.duration,
        task_ms: i.task_ms,
        timing: i.timing,
        faults_secs: i.faults_secs,
        faults,
        lost_workflows,
        duplicate_completions,
        capacity,
        unasked_deaths: deaths,
        submissions: Submissions {
            acknowledged: i.tracked.len(),
            idempotency_keys: i.submitted.keyed,
            ambiguous: i.submitted.ambiguous,
            never_accepted,
            unacknowledged_unfinished,
        },
        observed: Observed {
            failed_events: events
                .iter()
                .filter(|e| e.status == caucus_shared::task::TaskStatus::Failed)
                .count(),
            events: sources,
            tasks_completed_in_two_attempts: reruns,
            executions: execs.len(),
            kv_revisions: i.kv.revisions,
            kv_unreadable: i.kv.unreadable,
            incarnations: i.journal.incarnations.len(),
            not_ready: i.journal.not_ready.clone(),
            failures_by_type: count_by(&i.failures, |(_, b)| {
                b["content"]["error_type"]
                    .as_str()
                    .unwrap_or("?")
                    .to_string()
            }),
            control_by_type: count_by(&i.control, |(s, _)| {
                s.rsplit('.').next().unwrap_or("?").to_string()
            }),
        },
        run_dir: i.run_dir,
    }
}

fn count_by<T>(items: &[T], key: impl Fn(&T) -> String) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for i in items {
        *out.entry(key(i)).or_default() += 1;
    }
    out
}

fn verdict(violated: bool) -> &'static str {
    if violated {
        "FAIL"
    } else {
        "ok"
    }
}

/// At most `n` cases, then how many more.
fn some<T>(cases: &[T], n: usize, mut line: impl FnMut(&T) -> String) -> String {
    let mut s = String::new();
    for c in cases.iter().take(n) {
        let _ = writeln!(s, "      {}", line(c));
    }
    if cases.len() > n {
        let _ = writeln!(s, "      … and {} more (--json lists all)", cases.len() - n);
    }
    s
}

/// The human-readable summary.
pub fn summary(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "caucus-chaos: seed {}, {} workflows, {} faults over {:.1}s, tasks of {} ms",
        r.seed,
        r.workflows,
        r.faults.len(),
        r.faults_secs,
        r.task_ms
    );
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for f in &r.faults {
        *kinds.entry(f.kind.name()).or_default() += 1;
    }
    let _ = writeln!(
        s,
        "  faults: {}",
        kinds
            .iter()
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        s,
        "  lost workflows (acknowledged, not completed): {} of {}  {}",
        r.lost_workflows.count,
        r.submissions.acknowledged,
        verdict(r.lost_workflows.violated)
    );
    s += &some(&r.lost_workflows.cases, 10, |l| {
        format!(
            "{} {} [{}]: {}{}",
            l.item,
            l.workflow_id,
            l.state,
            l.unfinished.join("; "),
            l.why
                .as_ref()
                .map(|w| format!(" — {w}"))
                .unwrap_or_default()
        )
    });
    let _ = writeln!(
        s,
        "  tasks whose completion was applied more than once: {}  {}",
        r.duplicate_completions.count,
        verdict(r.duplicate_completions.violated)
    );
    s += &some(&r.duplicate_completions.cases, 10, |d| {
        format!("{}: {}", d.task_id, d.evidence.join("; "))
    });
    let _ = writeln!(
        s,
        "  peak concurrent executions / capacity per agent type:  {}",
        verdict(r.capacity.violated)
    );
    for (agent, a) in &r.capacity.agents {
        let _ = writeln!(
            s,
            "      {agent:<10} {}/{}{}   ({} executions: {} ended by a kill, {} end modelled, {} partly frozen)",
            a.peak,
            a.capacity,
            if a.violated { " OVER" } else { "" },
            a.executions,
            a.ended_by_kill,
            a.ended_by_model,
            a.frozen
        );
        if a.violated {
            s += &some(&a.at_peak, 8, |x| format!("  {x}"));
        }
    }
    let _ = writeln!(
        s,
        "  processes that died unasked: {}  {}",
        r.unasked_deaths.count,
        verdict(r.unasked_deaths.violated)
    );
    s += &some(&r.unasked_deaths.cases, 10, |d| {
        format!(
            "{} (start {}) {}: {}",
            d.name,
            d.incarnation,
            d.status,
            d.log_tail.last().map(String::as_str).unwrap_or("")
        )
    });
    if !r.submissions.never_accepted.is_empty() {
        let _ = writeln!(
            s,
            "  items never accepted by submit: {}  FAIL",
            r.submissions.never_accepted.join(", ")
        );
    }
    let _ = writeln!(
        s,
        "  observed: {} task events ({} stored, {} seen only live = de-duplicated by the stream, {} missed live), \
         {} failed; {} executions; {} task(s) completed in two attempts (retry of a silent attempt, recorded once); \
         {} record revisions; {} process starts; {} ambiguous submits; {} unacknowledged records unfinished",
        r.observed.events.distinct,
        r.observed.events.stored,
        r.observed.events.tap_only,
        r.observed.events.stream_only,
        r.observed.failed_events,
        r.observed.executions,
        r.observed.tasks_completed_in_two_attempts,
        r.observed.kv_revisions,
        r.observed.incarnations,
        r.submissions.ambiguous,
        r.submissions.unacknowledged_unfinished.len()
    );
    let list = |m: &BTreeMap<String, usize>| {
        m.iter()
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !r.observed.failures_by_type.is_empty() || !r.observed.control_by_type.is_empty() {
        let _ = writeln!(
            s,
            "  failure events: [{}]; control messages: [{}]",
            list(&r.observed.failures_by_type),
            list(&r.observed.control_by_type)
        );
    }
    for n in &r.observed.not_ready {
        let _ = writeln!(s, "  warning: {n}");
    }
    let _ = writeln!(
        s,
        "RESULT: {} (seed {})",
        if r.ok { "PASS" } else { "FAIL" },
        r.seed
    );
    s
}
