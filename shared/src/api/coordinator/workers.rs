//! `workers`: registered workers, capacity, queue depth and the live
//! bottleneck, per agent type.

use serde::{Deserialize, Serialize};

use crate::api::{Empty, Operation, OperationDoc};

/// `coordinator.workers`: any instance answers; the leader adds its
/// scheduler's queues (ready, in flight, oldest wait).
pub struct Workers;

impl Operation for Workers {
    const SERVICE: &'static str = super::SERVICE;
    const NAME: &'static str = "workers";
    const SUMMARY: &'static str = "registered workers, capacity, queue depth, live bottleneck";
    const ERRORS: &'static [&'static str] = &[CODE_UNAVAILABLE];
    type Request = Empty;
    type Reply = WorkersReply;
}

/// Error code of a coordinator shutting down mid-request.
const CODE_UNAVAILABLE: &str = "unavailable";

/// The operations of this file, for [`crate::api::catalog`].
pub(super) const DOCS: &[OperationDoc] = &[OperationDoc::of::<Workers>()];

/// The `workers` reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkersReply {
    /// Live agent types (a registered worker, a lease or a waiting task),
    /// by name.
    pub agents: Vec<AgentWorkers>,
    /// The agent type whose oldest ready task waited longest; `null` when
    /// no ready task waits.
    pub bottleneck: Option<LiveBottleneck>,
}

/// One agent type in the `workers` reply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentWorkers {
    /// The agent type.
    pub agent_type: String,
    /// Slots of its live workers, capped by `cap`.
    pub capacity: u32,
    /// The configured cap on its capacity; `null` when uncapped.
    #[serde(default)]
    pub cap: Option<u32>,
    /// Leases held now (Redis).
    #[serde(default)]
    pub in_use: u32,
    /// Messages pending on its task consumer.
    #[serde(default)]
    pub queue_depth: u64,
    /// Tasks the scheduler holds ready (0 on a standby).
    #[serde(default)]
    pub ready: u64,
    /// Tasks the scheduler has in flight (0 on a standby).
    #[serde(default)]
    pub in_flight: u64,
    /// How long its oldest ready task has waited, in ms.
    #[serde(default)]
    pub oldest_wait_ms: i64,
    /// No lease is granted while > 0 (ms left): Redis (re)started empty
    /// and running tasks are re-registering theirs (PROTOCOL.md §5).
    #[serde(default)]
    pub recovering_ms: u64,
    /// Its registered workers.
    #[serde(default)]
    pub workers: Vec<WorkerSlots>,
}

/// One registered worker of an agent type.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerSlots {
    /// The worker's id.
    pub worker_id: String,
    /// Slots it registered for this agent type.
    pub slots: u32,
    /// Time left on its registration, in ms.
    #[serde(default)]
    pub expires_in_ms: i64,
    /// Its registration was not renewed for at least two heartbeats.
    #[serde(default)]
    pub heartbeat_missed: bool,
}

/// The live bottleneck: the agent type whose oldest ready task waited
/// longest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveBottleneck {
    /// The agent type.
    pub agent_type: String,
    /// How long its oldest ready task has waited, in ms.
    pub oldest_wait_ms: i64,
    /// Its ready tasks.
    pub ready: u64,
    /// Slots that would clear the queue (its ready tasks, at most 64).
    pub more_slots: u64,
}
