//! The planner: instantiates a pipeline's DAG once per item and produces a
//! capacity-aware schedule with its critical path, parallelism factor and
//! bottleneck. Pure and deterministic: the same input gives the same plan.
//!
//! Used by the coordinator to order dispatch and by `caucus plan` to show
//! what a submission would do before it runs.

mod critical_path;
pub mod gantt;
mod schedule;

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::pipeline::{
    check_capacity_overrides, validate_graph, PipelineError, PipelineSpec, StageGraph, StageKind,
};
use critical_path::{analyse, eps, StageTiming};

use schedule::{simulate, LocalTask, Schedule, Template};

// The plan is the `coordinator.plan` reply: its types live with the API.
pub use caucus_shared::api::coordinator::plan::{
    AgentUtilization, Bottleneck, Plan, PlannedTask, PLAN_SCHEMA_VERSION,
};

/// Largest number of tasks (items × tasks per item) one plan may have.
pub const MAX_PLAN_TASKS: u64 = 5_000_000;

/// Largest number of task-to-task dependencies one plan may have.
pub const MAX_PLAN_DEPENDENCIES: u64 = 50_000_000;

/// Tuning of the scheduler.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanOptions {
    /// How many upcoming completion times the look-ahead considers when
    /// deciding to hold a slot for a higher-priority task; 0 = plain list
    /// scheduling. Default 3 (the seed's "next 3 time slots").
    pub lookahead_events: usize,
}

impl Default for PlanOptions {
    fn default() -> Self {
        Self {
            lookahead_events: 3,
        }
    }
}

/// The task id of `stage` (and `shard` for fan-out stages) of `item`.
pub fn task_id(item: &str, stage: &str, shard: Option<u32>) -> String {
    match shard {
        Some(s) => format!("{item}/{stage}#{s}"),
        None => format!("{item}/{stage}"),
    }
}

/// Plans `items` through `spec` with default [`PlanOptions`].
///
/// `capacity_overrides` replaces spec capacities per agent type, and also
/// makes agent types absent from the spec's `[capacities]` known.
pub fn plan(
    items: &[String],
    spec: &PipelineSpec,
    capacity_overrides: &BTreeMap<String, u32>,
) -> Result<Plan, PipelineError> {
    plan_with_options(items, spec, capacity_overrides, &PlanOptions::default())
}

/// [`plan`] with explicit scheduler options.
pub fn plan_with_options(
    items: &[String],
    spec: &PipelineSpec,
    capacity_overrides: &BTreeMap<String, u32>,
    options: &PlanOptions,
) -> Result<Plan, PipelineError> {
    check_capacity_overrides(capacity_overrides)?;
    let known: BTreeSet<String> = capacity_overrides.keys().cloned().collect();
    let graph = validate_graph(spec, Some(&known))?;
    check_items(items)?;
    let timing = analyse(spec, &graph);
    check_size(spec, &graph, items.len())?;
    let template = build_template(spec, &graph, &timing);
    let capacity: Vec<u32> = template
        .agents
        .iter()
        .map(|a| {
            capacity_overrides
                .get(a)
                .or_else(|| spec.capacities.get(a))
                .copied()
                // validate_graph guarantees an entry; 1 is never used.
                .unwrap_or(1)
        })
        .collect();
    let lookahead = options.lookahead_events;
    let schedule = simulate(&template, items.len(), &capacity, lookahead);
    let queueing = queueing_delay(&template, &schedule);
    let bottleneck = find_bottleneck(
        &template,
        items.len(),
        &capacity,
        lookahead,
        &schedule,
        &queueing,
    );
    Ok(assemble(
        spec, items, &graph, &timing, &template, &capacity, &schedule, &queueing, bottleneck,
    ))
}

fn check_items(items: &[String]) -> Result<(), PipelineError> {
    if items.is_empty() {
        return Err(PipelineError::NoItems);
    }
    let mut seen = BTreeSet::new();
    for item in items {
        if item.is_empty() {
            return Err(PipelineError::EmptyItem);
        }
        if !seen.insert(item.as_str()) {
            return Err(PipelineError::DuplicateItem { item: item.clone() });
        }
    }
    Ok(())
}

/// Rejects plans whose task or dependency count would exhaust memory,
/// before anything of that size is allocated.
fn check_size(spec: &PipelineSpec, graph: &StageGraph, items: usize) -> Result<(), PipelineError> {
    let items = items as u64;
    let per_item: u64 = spec.stages.iter().map(|s| u64::from(s.copies())).sum();
    let tasks = items.saturating_mul(per_item);
    if tasks > MAX_PLAN_TASKS {
        return Err(PipelineError::TooLarge {
            what: "tasks",
            count: tasks,
            limit: MAX_PLAN_TASKS,
        });
    }
    // Fan-out to fan-out dependencies multiply: every copy waits for every copy.
    let per_item_edges: u64 = (0..spec.stages.len())
        .flat_map(|s| graph.dependents(s).into_iter().map(move |d| (s, d)))
        .map(|(s, d)| u64::from(spec.stages[s].copies()) * u64::from(spec.stages[d].copies()))
        .sum();
    let edges = items.saturating_mul(per_item_edges);
    if edges > MAX_PLAN_DEPENDENCIES {
        return Err(PipelineError::TooLarge {
            what: "task dependencies",
            count: edges,
            limit: MAX_PLAN_DEPENDENCIES,
        });
    }
    Ok(())
}

fn build_template(spec: &PipelineSpec, graph: &StageGraph, timing: &StageTiming) -> Template {
    let agents: Vec<String> = spec
        .stages
        .iter()
        .filter(|s| s.kind == StageKind::Task)
        .filter_map(|s| s.agent.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    // Dense rank of remaining-path lengths, longest first.
    let mut tails: Vec<f64> = timing.tail.clone();
    tails.sort_by(|a, b| b.total_cmp(a));
    tails.dedup();
    let rank_of = |tail: f64| tails.iter().position(|&t| t == tail).unwrap_or(0) as u32;

    let mut first_local = Vec::with_capacity(spec.stages.len());
    let mut tasks = Vec::new();
    for (s, stage) in spec.stages.iter().enumerate() {
        first_local.push(tasks.len());
        let agent = match stage.kind {
            StageKind::Task => stage
                .agent
                .as_ref()
                .and_then(|a| agents.binary_search(a).ok()),
            StageKind::Gate => None,
        };
        let npred: u32 = graph
            .dependencies(s)
            .into_iter()
            .map(|d| spec.stages[d].copies())
            .sum();
        for copy in 0..stage.copies() {
            tasks.push(LocalTask {
                stage: s,
                shard: stage.fan_out.map(|_| copy),
                duration: timing.duration[s],
                tail: timing.tail[s],
                rank: rank_of(timing.tail[s]),
                agent,
                npred,
            });
        }
    }
    let mut succ_start = Vec::with_capacity(tasks.len() + 1);
    let mut succ = Vec::new();
    for task in &tasks {
        succ_start.push(succ.len());
        for d in graph.dependents(task.stage) {
            let first = first_local[d];
            succ.extend((first..first + spec.stages[d].copies() as usize).map(|l| l as u32));
        }
    }
    succ_start.push(succ.len());
    Template {
        tasks,
        succ_start,
        succ,
        agents,
    }
}

/// Total ready-to-start wait per agent type.
fn queueing_delay(template: &Template, schedule: &Schedule) -> Vec<f64> {
    let l = template.tasks.len();
    let mut wait = vec![0.0; template.agents.len()];
    for g in 0..schedule.start.len() {
        if let Some(a) = template.tasks[g % l].agent {
            wait[a] += schedule.start[g] - schedule.ready[g];
        }
    }
    wait
}

/// Re-plans with one more slot per agent type and picks the one that helps
/// most (ties: most queueing); if none helps, the one that queues most.
fn find_bottleneck(
    template: &Template,
    items: usize,
    capacity: &[u32],
    lookahead: usize,
    schedule: &Schedule,
    queueing: &[f64],
) -> Option<Bottleneck> {
    let makespan = schedule.makespan;
    let tol = eps(makespan);
    let mut best: Option<Bottleneck> = None;
    for (a, name) in template.agents.iter().enumerate() {
        // A type whose tasks never waited starts every task the moment it is
        // ready; one more slot cannot change any decision, so skip the re-plan.
        let with_one_more = if queueing[a] > 0.0 {
            let mut more = capacity.to_vec();
            more[a] = more[a].saturating_add(1);
            simulate(template, items, &more, lookahead).makespan
        } else {
            makespan
        };
        let candidate = Bottleneck {
            agent_type: name.clone(),
            capacity: capacity[a],
            makespan_with_one_more_slot: with_one_more,
            gain: makespan - with_one_more,
            queueing_delay: queueing[a],
        };
        let better = match &best {
            None => true,
            Some(b) => {
                let helps = candidate.gain > tol;
                let b_helps = b.gain > tol;
                if helps != b_helps {
                    helps
                } else if helps && (candidate.gain - b.gain).abs() > tol {
                    candidate.gain > b.gain
                } else {
                    candidate.queueing_delay > b.queueing_delay + tol
                }
            }
        };
        if better {
            best = Some(candidate);
        }
    }
    best.filter(|b| b.gain > tol || b.queueing_delay > tol)
}

#[allow(clippy::too_many_arguments)]
fn assemble(
    spec: &PipelineSpec,
    items: &[String],
    graph: &StageGraph,
    timing: &StageTiming,
    template: &Template,
    capacity: &[u32],
    schedule: &Schedule,
    queueing: &[f64],
    bottleneck: Option<Bottleneck>,
) -> Plan {
    let l = template.tasks.len();
    let stage_name = |s: usize| spec.stages[s].name.clone();
    let mut tasks = Vec::with_capacity(schedule.start.len());
    let mut busy = vec![0.0; template.agents.len()];
    let mut count = vec![0usize; template.agents.len()];
    let mut sequential_time = 0.0;
    for (g, (&start, &end)) in schedule.start.iter().zip(&schedule.end).enumerate() {
        let local = &template.tasks[g % l];
        let item = &items[g / l];
        let stage = &spec.stages[local.stage];
        sequential_time += local.duration;
        if let Some(a) = local.agent {
            busy[a] += local.duration;
            count[a] += 1;
        }
        tasks.push(PlannedTask {
            task_id: task_id(item, &stage.name, local.shard),
            item: item.clone(),
            stage: stage.name.clone(),
            shard: local.shard,
            kind: stage.kind,
            agent_type: local.agent.map(|a| template.agents[a].clone()),
            ready: schedule.ready[g],
            start,
            end,
            slot: local.agent.map(|_| schedule.slot[g]),
            on_critical_path: timing.critical[local.stage],
        });
    }
    let makespan = schedule.makespan;
    let utilization = template
        .agents
        .iter()
        .enumerate()
        .map(|(a, name)| {
            let denom = capacity[a] as f64 * makespan;
            (
                name.clone(),
                AgentUtilization {
                    capacity: capacity[a],
                    tasks: count[a],
                    busy_time: busy[a],
                    utilization: if denom > 0.0 { busy[a] / denom } else { 0.0 },
                    queueing_delay: queueing[a],
                },
            )
        })
        .collect();
    let critical_path: Vec<String> = timing.path.iter().map(|&s| stage_name(s)).collect();
    let critical_path_tasks = timing
        .path
        .iter()
        .map(|&s| {
            task_id(
                &items[0],
                &spec.stages[s].name,
                spec.stages[s].fan_out.map(|_| 0),
            )
        })
        .collect();
    Plan {
        schema_version: PLAN_SCHEMA_VERSION,
        pipeline: spec.name.clone(),
        items: items.to_vec(),
        makespan,
        critical_path,
        critical_path_tasks,
        critical_path_length: timing.length,
        topological_order: graph.order().iter().map(|&s| stage_name(s)).collect(),
        sequential_time,
        parallelism_factor: if makespan > 0.0 {
            sequential_time / makespan
        } else {
            1.0
        },
        bottleneck,
        capacities: template
            .agents
            .iter()
            .cloned()
            .zip(capacity.iter().copied())
            .collect(),
        utilization,
        tasks,
    }
}
