//! The coordinator's metrics (docs/OBSERVABILITY.md lists them all).
//! Instruments are made once, from the process's meter; recording into
//! them is a no-op when metrics are off.
//!
//! Counters and histograms are recorded where the scheduler applies an
//! event. Gauges are observable: their callbacks read a [`Snapshot`] the
//! leader's scheduler publishes on its tick, so a scrape never waits on
//! (or slows) the scheduling loop. A coordinator that does not lead shows
//! `caucus_coordinator_leader 0` and no other gauge.

use std::collections::{BTreeMap, HashMap};
use std::sync::{OnceLock, RwLock};

use opentelemetry::metrics::{Counter, Histogram, ObservableGauge};
use opentelemetry::KeyValue;

use caucus_shared::task::TaskDispatch;
use caucus_shared::telemetry::metrics::{meter, SECONDS_BUCKETS};

use crate::engine::AgentLoad;
use crate::workflow::{EventOutcome, RetryDecision, WorkflowState};

/// Every workflow state, in the order `caucus_workflows{state}` lists them.
pub(crate) const WORKFLOW_STATES: [WorkflowState; 7] = [
    WorkflowState::Pending,
    WorkflowState::Running,
    WorkflowState::Pausing,
    WorkflowState::Paused,
    WorkflowState::Resuming,
    WorkflowState::Completed,
    WorkflowState::Failed,
];

/// How an attempt ended, as `caucus_tasks_completed_total{outcome}` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttemptEnd {
    /// The task completed.
    Completed,
    /// The task failed beyond its retry policy.
    Failed,
    /// The attempt failed and another one follows.
    Retried,
}

impl AttemptEnd {
    /// The label value.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            AttemptEnd::Completed => "completed",
            AttemptEnd::Failed => "failed",
            AttemptEnd::Retried => "retried",
        }
    }

    /// How an applied event ended its attempt (`None`: it did not).
    pub(crate) fn of(outcome: &EventOutcome) -> Option<AttemptEnd> {
        match outcome {
            EventOutcome::Completed { .. } => Some(AttemptEnd::Completed),
            EventOutcome::Failed(RetryDecision::Retry { .. }) => Some(AttemptEnd::Retried),
            EventOutcome::Failed(_) => Some(AttemptEnd::Failed),
            EventOutcome::Started | EventOutcome::Ignored(_) => None,
        }
    }
}

/// One agent type's gauges.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AgentGauges {
    /// `agent_type=<name>`, built once per snapshot.
    label: KeyValue,
    /// Ready and backing-off tasks held by the coordinator.
    queue_depth: u64,
    /// How long the oldest ready task has waited.
    oldest_wait_seconds: f64,
    /// Capacity from the workers' registrations.
    slots: u64,
    /// Tasks dispatched or running.
    in_use: u64,
}

/// What the gauges show: the leader's state at its last refresh.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Snapshot {
    agents: Vec<AgentGauges>,
    workflows: Vec<(&'static str, u64)>,
    gates_open: u64,
}

impl Snapshot {
    /// The gauges of a leader with `load` per agent type, capacities
    /// `caps`, `workflows` by state and `gates_open` open gates. Every
    /// agent type either map names gets its gauges (a type with capacity
    /// and no work shows zeros), and every state is listed (zeros too).
    pub(crate) fn new(
        load: &BTreeMap<String, AgentLoad>,
        caps: &HashMap<String, usize>,
        workflows: &HashMap<WorkflowState, u64>,
        gates_open: u64,
    ) -> Snapshot {
        let mut names: Vec<&String> = load.keys().chain(caps.keys()).collect();
        names.sort();
        names.dedup();
        let agents = names
            .into_iter()
            .map(|a| {
                let l = load.get(a).cloned().unwrap_or_default();
                AgentGauges {
                    label: KeyValue::new("agent_type", a.clone()),
                    queue_depth: l.ready as u64,
                    oldest_wait_seconds: l.oldest_wait_ms as f64 / 1000.0,
                    slots: caps.get(a).copied().unwrap_or(0) as u64,
                    in_use: l.in_flight as u64,
                }
            })
            .collect();
        Snapshot {
            agents,
            workflows: WORKFLOW_STATES
                .iter()
                .map(|s| (s.as_str(), workflows.get(s).copied().unwrap_or(0)))
                .collect(),
            gates_open,
        }
    }
}

/// The partitions this process serves, each with its scheduler's last
/// snapshot (`None` until the first): `caucus_coordinator_leader` is 1
/// while it serves any, and the gauges show their sum.
static SERVED: RwLock<BTreeMap<u32, Option<Snapshot>>> = RwLock::new(BTreeMap::new());

/// Whether this process leads (serves a partition).
fn leading() -> bool {
    SERVED.read().map(|s| !s.is_empty()).unwrap_or(false)
}

/// Runs `f` over the served partitions' snapshots summed, if any.
fn with_snapshot(f: impl FnOnce(&Snapshot)) {
    let Ok(served) = SERVED.read() else { return };
    let mut snaps = served.values().flatten();
    let Some(first) = snaps.next() else { return };
    let mut sum = first.clone();
    for s in snaps {
        sum.add(s);
    }
    f(&sum);
}

impl Snapshot {
    /// Adds another partition's figures: queues, work and workflows add
    /// up, the oldest wait is the oldest, capacity is the one Redis's.
    fn add(&mut self, other: &Snapshot) {
        for o in &other.agents {
            match self.agents.iter_mut().find(|a| a.label == o.label) {
                Some(a) => {
                    a.queue_depth += o.queue_depth;
                    a.in_use += o.in_use;
                    a.oldest_wait_seconds = a.oldest_wait_seconds.max(o.oldest_wait_seconds);
                    a.slots = a.slots.max(o.slots);
                }
                None => self.agents.push(o.clone()),
            }
        }
        for (state, n) in &other.workflows {
            if let Some(mine) = self.workflows.iter_mut().find(|(s, _)| s == state) {
                mine.1 += n;
            }
        }
        self.gates_open += other.gates_open;
    }
}

struct Instruments {
    dispatched: Counter<u64>,
    attempts: Counter<u64>,
    dispatch_latency: Histogram<f64>,
    task_duration: Histogram<f64>,
    submitted: Counter<u64>,
    finished: Counter<u64>,
    /// Kept so the callbacks stay registered for the process's life.
    _gauges: Vec<Gauge>,
}

/// An observable gauge of either measurement type.
enum Gauge {
    U64(ObservableGauge<u64>),
    F64(ObservableGauge<f64>),
}

fn instruments() -> &'static Instruments {
    static I: OnceLock<Instruments> = OnceLock::new();
    I.get_or_init(|| make(&meter()))
}

fn make(m: &opentelemetry::metrics::Meter) -> Instruments {
    let seconds = |name: &'static str, description: &'static str| {
        m.f64_histogram(name)
            .with_description(description)
            .with_boundaries(SECONDS_BUCKETS.to_vec())
            .build()
    };
    let per_agent_u64 =
        |name: &'static str, description: &'static str, pick: fn(&AgentGauges) -> u64| {
            Gauge::U64(
                m.u64_observable_gauge(name)
                    .with_description(description)
                    .with_callback(move |o| {
                        with_snapshot(|s| {
                            for a in &s.agents {
                                o.observe(pick(a), std::slice::from_ref(&a.label));
                            }
                        })
                    })
                    .build(),
            )
        };
    let gauges = vec![
        per_agent_u64(
            "caucus_task_queue_depth",
            "Ready and backing-off tasks the coordinator holds, by agent type",
            |a| a.queue_depth,
        ),
        per_agent_u64(
            "caucus_capacity_slots",
            "Capacity registered by the workers, by agent type",
            |a| a.slots,
        ),
        per_agent_u64(
            "caucus_capacity_in_use",
            "Tasks dispatched or running, by agent type",
            |a| a.in_use,
        ),
        Gauge::F64(
            m.f64_observable_gauge("caucus_task_oldest_wait_seconds")
                .with_description("How long the oldest ready task has waited, by agent type")
                .with_callback(|o| {
                    with_snapshot(|s| {
                        for a in &s.agents {
                            o.observe(a.oldest_wait_seconds, std::slice::from_ref(&a.label));
                        }
                    })
                })
                .build(),
        ),
        Gauge::U64(
            m.u64_observable_gauge("caucus_workflows")
                .with_description("Workflows the leader holds, by state")
                .with_callback(|o| {
                    with_snapshot(|s| {
                        for (state, n) in &s.workflows {
                            o.observe(*n, &[KeyValue::new("state", *state)]);
                        }
                    })
                })
                .build(),
        ),
        Gauge::U64(
            m.u64_observable_gauge("caucus_gates_open")
                .with_description("Gates waiting for a person's decision")
                .with_callback(|o| with_snapshot(|s| o.observe(s.gates_open, &[])))
                .build(),
        ),
        Gauge::U64(
            m.u64_observable_gauge("caucus_coordinator_leader")
                .with_description("1 while this coordinator leads, else 0")
                .with_callback(|o| o.observe(u64::from(leading()), &[]))
                .build(),
        ),
    ];
    Instruments {
        dispatched: m
            .u64_counter("caucus_tasks_dispatched")
            .with_description("Task attempts published to a work queue, by agent type")
            .build(),
        attempts: m
            .u64_counter("caucus_tasks_completed")
            .with_description(
                "Task attempts ended, by agent type and outcome (completed, failed beyond the retry policy, retried)",
            )
            .build(),
        dispatch_latency: seconds(
            "caucus_dispatch_latency_seconds",
            "From a task attempt joining the ready queue to its start on a worker",
        ),
        task_duration: seconds(
            "caucus_task_duration_seconds",
            "From a task's start on a worker to its completion",
        ),
        submitted: m
            .u64_counter("caucus_workflows_submitted")
            .with_description("Workflows the leader took over from a submission")
            .build(),
        finished: m
            .u64_counter("caucus_workflows_finished")
            .with_description("Workflows that finished, by state (completed, failed)")
            .build(),
        _gauges: gauges,
    }
}

/// Makes the instruments now (call once metrics are installed), so a
/// standby shows `caucus_coordinator_leader 0` before any work.
pub(crate) fn register() {
    let _ = instruments();
}

/// This process serves partition `p` from now on (the only one, 0, with
/// one partition); its gauges show once the scheduler publishes a snapshot.
pub(crate) fn lead(p: u32) {
    if let Ok(mut s) = SERVED.write() {
        s.entry(p).or_insert(None);
    }
}

/// This process no longer serves partition `p`: its gauges go (all of
/// them once it serves none).
pub(crate) fn stand_by(p: u32) {
    if let Ok(mut s) = SERVED.write() {
        s.remove(&p);
    }
}

/// Publishes partition `p`'s current gauges (ignored unless it is served,
/// so a scheduler outside a tenure never shows figures).
pub(crate) fn publish(p: u32, snapshot: Snapshot) {
    if let Ok(mut s) = SERVED.write() {
        if let Some(slot) = s.get_mut(&p) {
            *slot = Some(snapshot);
        }
    }
}

/// Counts a pump's dispatches (`caucus_tasks_dispatched_total`).
pub(crate) fn dispatched(dispatches: &[TaskDispatch]) {
    let i = instruments();
    for d in dispatches {
        i.dispatched
            .add(1, &[KeyValue::new("agent_type", d.agent_type.clone())]);
    }
}

/// Counts an attempt's end (`caucus_tasks_completed_total`).
pub(crate) fn attempt_ended(agent_type: &str, end: AttemptEnd) {
    instruments().attempts.add(
        1,
        &[
            KeyValue::new("agent_type", agent_type.to_string()),
            KeyValue::new("outcome", end.as_str()),
        ],
    );
}

/// Records an attempt's queue wait, ready → started
/// (`caucus_dispatch_latency_seconds`).
pub(crate) fn dispatch_latency(agent_type: &str, seconds: f64) {
    instruments().dispatch_latency.record(
        seconds,
        &[KeyValue::new("agent_type", agent_type.to_string())],
    );
}

/// Records a completed task's run time, started → completed
/// (`caucus_task_duration_seconds`).
pub(crate) fn task_duration(agent_type: &str, seconds: f64) {
    instruments().task_duration.record(
        seconds,
        &[KeyValue::new("agent_type", agent_type.to_string())],
    );
}

/// Counts workflows taken over from submissions.
pub(crate) fn workflows_submitted(n: u64) {
    if n > 0 {
        instruments().submitted.add(n, &[]);
    }
}

/// Counts a workflow that reached a terminal state.
pub(crate) fn workflow_finished(state: WorkflowState) {
    instruments()
        .finished
        .add(1, &[KeyValue::new("state", state.as_str())]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use caucus_shared::config::TelemetryConfig;
    use caucus_shared::telemetry::metrics::{encode, install};

    /// The gauges read the published snapshot while leading, and show only
    /// `caucus_coordinator_leader 0` once standing by (no stale per-agent
    /// series left behind). One test: the snapshot and the installed
    /// provider are process-wide.
    #[test]
    fn gauges_follow_the_snapshot_and_leadership() {
        let cfg = TelemetryConfig {
            metrics_addr: Some("127.0.0.1:0".into()),
            ..TelemetryConfig::default()
        };
        let _provider = install(&cfg, "caucus-coordinator").unwrap().unwrap();
        // Made from the installed provider (the process-wide instruments
        // may already exist as no-ops, made by another test).
        let _i = make(&meter());

        stand_by(0);
        let t = encode();
        assert!(t.contains("caucus_coordinator_leader 0"), "{t}");
        assert!(!t.contains("caucus_task_queue_depth"), "{t}");

        let mut load = BTreeMap::new();
        load.insert(
            "valuation".to_string(),
            AgentLoad {
                ready: 25,
                in_flight: 2,
                oldest_wait_ms: 12_500,
            },
        );
        let caps = HashMap::from([("valuation".to_string(), 2), ("report".to_string(), 1)]);
        let states = HashMap::from([(WorkflowState::Running, 3), (WorkflowState::Completed, 1)]);
        lead(0);
        publish(0, Snapshot::new(&load, &caps, &states, 4));
        let t = encode();
        for line in [
            "caucus_coordinator_leader 1",
            "caucus_task_queue_depth{agent_type=\"valuation\"} 25",
            "caucus_task_queue_depth{agent_type=\"report\"} 0",
            "caucus_task_oldest_wait_seconds{agent_type=\"valuation\"} 12.5",
            "caucus_capacity_slots{agent_type=\"valuation\"} 2",
            "caucus_capacity_slots{agent_type=\"report\"} 1",
            "caucus_capacity_in_use{agent_type=\"valuation\"} 2",
            "caucus_workflows{state=\"running\"} 3",
            "caucus_workflows{state=\"completed\"} 1",
            "caucus_workflows{state=\"paused\"} 0",
            "caucus_gates_open 4",
        ] {
            assert!(t.contains(line), "{line} missing in\n{t}");
        }

        // A second partition served by this process adds its figures.
        lead(5);
        publish(5, Snapshot::new(&load, &caps, &states, 1));
        let t = encode();
        for line in [
            "caucus_task_queue_depth{agent_type=\"valuation\"} 50",
            "caucus_task_oldest_wait_seconds{agent_type=\"valuation\"} 12.5",
            "caucus_capacity_slots{agent_type=\"valuation\"} 2",
            "caucus_capacity_in_use{agent_type=\"valuation\"} 4",
            "caucus_workflows{state=\"running\"} 6",
            "caucus_gates_open 5",
        ] {
            assert!(t.contains(line), "{line} missing in\n{t}");
        }
        stand_by(0);
        let t = encode();
        assert!(t.contains("caucus_coordinator_leader 1"), "{t}");
        assert!(t.contains("caucus_gates_open 1"), "{t}");

        stand_by(5);
        let t = encode();
        assert!(t.contains("caucus_coordinator_leader 0"), "{t}");
        for gone in [
            "caucus_task_queue_depth",
            "caucus_capacity_slots",
            "caucus_workflows",
            "caucus_gates_open",
        ] {
            assert!(!t.contains(gone), "{gone} still shown on standby:\n{t}");
        }
    }

    #[test]
    fn attempt_ends_are_named_by_the_retry_decision() {
        let retry = EventOutcome::Failed(RetryDecision::Retry {
            attempt: 2,
            at: chrono::Utc::now(),
        });
        let halt = EventOutcome::Failed(RetryDecision::Halt {
            tier: crate::workflow::Tier::Retry,
            rule: "r".into(),
        });
        let done = EventOutcome::Completed {
            newly_ready: vec![],
            workflow_completed: false,
        };
        assert_eq!(AttemptEnd::of(&retry), Some(AttemptEnd::Retried));
        assert_eq!(AttemptEnd::of(&halt), Some(AttemptEnd::Failed));
        assert_eq!(AttemptEnd::of(&done), Some(AttemptEnd::Completed));
        assert_eq!(AttemptEnd::of(&EventOutcome::Started), None);
        assert_eq!(AttemptEnd::of(&EventOutcome::Ignored("x")), None);
    }
}
