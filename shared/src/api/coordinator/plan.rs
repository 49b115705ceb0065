//! `plan`: the dry-run schedule of items through a pipeline, with its
//! critical path, makespan and bottleneck (the planner's [`Plan`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::{Operation, OperationDoc};
use crate::pipeline::StageKind;

/// `coordinator.plan`: a dry run; nothing is stored or dispatched.
pub struct PlanOp;

impl Operation for PlanOp {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "plan";
    const SUMMARY: &'static str = "dry run: schedule, critical path, makespan, bottleneck";
    const ERRORS: &'static [&'static str] = &["invalid_pipeline", "unknown_pipeline"];
    type Request = PlanRequest;
    type Reply = PlanReply;
}

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[OperationDoc::of::<PlanOp>()];

/// The `plan` request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    /// The items to plan (1 to 100,000 of 1–200 characters).
    pub items: Vec<String>,
    /// A built-in pipeline's name, or an inline spec (`PipelineSpec` as
    /// JSON); required (absent is answered `bad_request`, naming it).
    #[serde(default)]
    pub pipeline: Value,
    /// Capacity per agent type, replacing the spec's (also makes agent
    /// types absent from the spec's `[capacities]` known).
    #[serde(default)]
    pub capacities: BTreeMap<String, u32>,
}

/// The `plan` reply: the plan and its text Gantt chart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanReply {
    /// The plan.
    #[serde(flatten)]
    pub plan: Plan,
    /// The plan as a text Gantt chart, 60 columns wide.
    pub gantt: String,
}

/// Version of the [`Plan`] wire shape.
pub const PLAN_SCHEMA_VERSION: u32 = 1;

/// A schedule for a set of items run through one pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Version of this shape (currently 1).
    pub schema_version: u32,
    /// Name of the pipeline planned.
    pub pipeline: String,
    /// The items, in submission order (the order also breaks ties).
    pub items: Vec<String>,
    /// Time from the first start to the last end, in time units.
    pub makespan: f64,
    /// Stage names of one item's critical path (longest path by expected duration).
    pub critical_path: Vec<String>,
    /// Task ids of that path for the first item (shard 0 for fan-out stages).
    pub critical_path_tasks: Vec<String>,
    /// Length of the critical path: the makespan with unlimited capacity.
    pub critical_path_length: f64,
    /// Stage names in a topological order (dependencies first, ties by declaration).
    pub topological_order: Vec<String>,
    /// Sum of all task durations: the time if everything ran one at a time.
    pub sequential_time: f64,
    /// `sequential_time / makespan` (1.0 when the makespan is 0).
    pub parallelism_factor: f64,
    /// The agent type whose capacity limits the plan most; absent when no
    /// task ever waits for capacity and no extra slot would help.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<Bottleneck>,
    /// Effective capacity per agent type used (spec defaults with overrides applied).
    pub capacities: BTreeMap<String, u32>,
    /// Load per agent type that has tasks in this plan.
    pub utilization: BTreeMap<String, AgentUtilization>,
    /// Every task, grouped by item (item order, then stage declaration order, then shard).
    pub tasks: Vec<PlannedTask>,
}

/// The agent type that limits the plan most.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bottleneck {
    /// The agent type.
    pub agent_type: String,
    /// Its capacity in this plan.
    pub capacity: u32,
    /// Makespan when this agent type gets one more slot, in time units.
    pub makespan_with_one_more_slot: f64,
    /// `makespan - makespan_with_one_more_slot` (0 or less when the extra slot does not help).
    pub gain: f64,
    /// Total time its tasks spent ready but waiting for a slot, in time units.
    pub queueing_delay: f64,
}

/// Load of one agent type over the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentUtilization {
    /// Capacity used for planning.
    pub capacity: u32,
    /// Number of tasks of this type.
    pub tasks: usize,
    /// Sum of the durations of those tasks, in time units.
    pub busy_time: f64,
    /// `busy_time / (capacity × makespan)`, in 0..=1.
    pub utilization: f64,
    /// Total time its tasks spent ready but waiting for a slot, in time units.
    pub queueing_delay: f64,
}

/// One scheduled task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedTask {
    /// `<item>/<stage>`, or `<item>/<stage>#<shard>` for fan-out stages.
    pub task_id: String,
    /// The item this task belongs to.
    pub item: String,
    /// The stage it instantiates.
    pub stage: String,
    /// Shard index (0-based) for fan-out stages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<u32>,
    /// `task` or `gate`.
    pub kind: StageKind,
    /// Agent type that runs it; absent for gates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    /// When its last dependency completes, in time units from the start.
    pub ready: f64,
    /// Planned start, in time units from the start.
    pub start: f64,
    /// Planned end, in time units from the start.
    pub end: f64,
    /// 0-based lane within its agent type's capacity; absent for gates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<u32>,
    /// Whether the stage has zero slack, i.e. lies on a longest path of its item.
    pub on_critical_path: bool,
}
