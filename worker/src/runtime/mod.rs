//! The worker process: registers its slots per agent type in Redis, and for
//! every slot loops "take a lease → pull one task → run it → report → ack".
//! It pulls only while it holds a lease, so cluster-wide capacity is never
//! exceeded; a killed worker's leases and registration lapse after one lease
//! period and JetStream redelivers its unacknowledged task.

mod heartbeat;
mod lease;
mod pull;
mod report;
mod slot;
mod started;
pub(crate) mod task_span;

use std::sync::Arc;

use async_nats::jetstream;
use tokio_util::sync::CancellationToken;

use caucus_shared::clock::SharedClock;
use caucus_shared::config::Config;
use caucus_shared::nats::bind::{self, BindBudget};
use caucus_shared::nats::consumers;
use caucus_shared::nats::dlq::Dlq;
use caucus_shared::redis::{CapacitySemaphore, RedisPool, SyncGate};
use caucus_shared::service::Tasks;
use caucus_shared::subjects::Subjects;

use crate::handler::{Handler, HandlerSpec};
use crate::messages::debates::DebateAgent;
use crate::messages::{inbox, Broadcasts};

pub use report::Reporter;

/// Everything a worker needs.
#[derive(Clone)]
pub struct WorkerDeps {
    /// Effective configuration.
    pub config: Arc<Config>,
    /// Subject builder.
    pub subjects: Subjects,
    /// JetStream context.
    pub js: jetstream::Context,
    /// Redis pool.
    pub redis: RedisPool,
    /// Cancelled on the first SIGTERM: stop pulling, finish in-flight work.
    pub shutdown: CancellationToken,
    /// Clock for event timestamps.
    pub clock: SharedClock,
    /// This process's id (registration and lease holder prefix).
    pub worker_id: String,
    /// What runs the tasks.
    pub handler: Handler,
    /// The built-in analysts' data set; with it, the worker also answers
    /// the messages addressed to its agent types (flushes, debates).
    pub dataset: Option<Arc<caucus_agents::analysts::Dataset>>,
    /// What `health` reports; each agent type's heartbeat marks its own
    /// component (`heartbeat:<agent type>`).
    pub health: caucus_shared::health::Health,
    /// The process's tracked, supervised tasks (shutdown waits for them).
    pub tasks: Tasks,
}

/// Errors that stop a worker from starting.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// No agent type configured.
    #[error("no agent type given: pass --agent TYPE[,TYPE] (or set CAUCUS_WORKER_AGENTS)")]
    NoAgents,
    /// `worker.handler` names no handler.
    #[error(transparent)]
    Handler(#[from] crate::handler::HandlerSpecError),
    /// The built-in analysts' data set could not be loaded.
    #[error(transparent)]
    Dataset(#[from] caucus_agents::DatasetError),
    /// The `http:` handlers' client could not be built (`worker.http_ca_file`).
    #[error(transparent)]
    HttpClient(#[from] crate::handler::HttpClientError),
    /// The broadcast consumer could not be started.
    #[error("broadcasts: {0}")]
    Broadcasts(#[source] caucus_shared::Error),
    /// An inbox or task consumer does not exist (the coordinator or
    /// `caucus init` creates it) or could not be bound.
    #[error(transparent)]
    Consumer(caucus_shared::Error),
    /// An agent type's pull inbox could not be subscribed.
    #[error("pull inbox of {agent_type}: {source}")]
    Pull {
        /// The agent type.
        agent_type: String,
        /// What failed.
        #[source]
        source: async_nats::SubscribeError,
    },
    /// An agent type's capacity could not be set up in Redis.
    #[error("capacity of {agent_type}: {source}")]
    Capacity {
        /// The agent type.
        agent_type: String,
        /// What failed.
        #[source]
        source: caucus_shared::Error,
    },
}

/// Runs the worker until `deps.shutdown`, then drains: in-flight tasks
/// finish (the caller bounds this with the shutdown grace), leases are
/// released and the registration removed.
pub async fn run(deps: WorkerDeps) -> Result<(), WorkerError> {
    let cfg = deps.config.clone();
    let tracker = &deps.tasks.clone();
    if cfg.worker.agents.is_empty() {
        return Err(WorkerError::NoAgents);
    }
    let dlq = Dlq::new(deps.js.clone(), deps.subjects.clone());
    let reporter = Reporter::new(
        deps.js.clone(),
        deps.subjects.clone(),
        deps.clock.clone(),
        deps.worker_id.clone(),
        // Findings wait while their agent's debate sync lock is held.
        SyncGate::new(
            deps.js.clone(),
            deps.redis.clone(),
            deps.subjects.clone(),
            cfg.worker.sync_lock_wait,
        ),
    );
    // Broadcasts first: the first task must already see the current regime.
    // `noop` and `sleep:` (load tests) never read their inputs, so they
    // skip the per-task broadcast check.
    let reads_inputs = !matches!(
        deps.handler.spec(),
        HandlerSpec::Noop | HandlerSpec::Sleep(_)
    );
    let broadcasts = if reads_inputs {
        Some(
            Broadcasts::start(
                &deps.js,
                &deps.subjects,
                dlq.clone(),
                cfg.max_body_bytes,
                cfg.worker.broadcast_wait,
                deps.shutdown.clone(),
                tracker,
            )
            .await
            .map_err(WorkerError::Broadcasts)?,
        )
    } else {
        None
    };
    // Capacity first: the coordinator creates an agent type's consumers
    // when it sees the type registered, and they are bound below.
    let stop_heartbeat = CancellationToken::new();
    let mut sems = Vec::new();
    for agent in &cfg.worker.agents {
        let capacity_err = |source| WorkerError::Capacity {
            agent_type: agent.clone(),
            source,
        };
        let sem = CapacitySemaphore::new(deps.redis.clone(), deps.subjects.prefix(), agent)
            .map_err(capacity_err)?;
        if let Some(cap) = cfg.worker.capacity_cap.get(agent) {
            sem.set_cap(Some(*cap)).await.map_err(capacity_err)?;
        }
        let capacity = sem
            .register_worker(&deps.worker_id, cfg.worker.slots, cfg.worker.lease_ttl)
            .await
            .map_err(capacity_err)?;
        tracing::info!(agent_type = %agent, slots = cfg.worker.slots, capacity, "registered");
        crate::metrics::instruments().slots(agent, cfg.worker.slots);
        tracker.spawn_named(
            "heartbeat",
            heartbeat::run(
                sem.clone(),
                deps.worker_id.clone(),
                cfg.worker.slots,
                cfg.worker.capacity_cap.get(agent).copied(),
                cfg.worker.lease_ttl,
                cfg.worker.heartbeat_interval,
                stop_heartbeat.clone(),
                deps.health.clone(),
            ),
        );
        sems.push(sem);
    }
    // Deregistering last keeps capacity truthful; it also runs when a
    // consumer below never appears and the worker gives up.
    let deregister = {
        let sems = sems.clone();
        let worker_id = deps.worker_id.clone();
        let stop_heartbeat = stop_heartbeat.clone();
        move || async move {
            stop_heartbeat.cancel();
            for s in sems {
                let _ = s.deregister_worker(&worker_id).await;
                crate::metrics::instruments().slots(s.agent_type(), 0);
            }
        }
    };
    let bound = bind_and_start(&deps, &dlq, &reporter, &broadcasts, &sems).await;
    if let Err(e) = bound {
        deregister().await;
        return Err(e);
    }
    deps.shutdown.cancelled().await;
    // Slots stop pulling now; the caller waits for the tracker (bounded by
    // the shutdown grace).
    tracker.spawn_named("deregister", deregister());
    Ok(())
}

/// Binds each agent type's inbox (with the built-in data set) and task
/// consumer, created by the coordinator or `caucus init`, and starts the
/// inbox readers and the slots.
async fn bind_and_start(
    deps: &WorkerDeps,
    dlq: &Dlq,
    reporter: &Reporter,
    broadcasts: &Option<Broadcasts>,
    sems: &[CapacitySemaphore],
) -> Result<(), WorkerError> {
    let cfg = &deps.config;
    let tracker = &deps.tasks;
    let budget = BindBudget::from_config(&cfg.nats);
    if let Some(data) = &deps.dataset {
        for agent in &cfg.worker.agents {
            let spec = consumers::inbox_consumer(&deps.subjects, agent, cfg.worker.ack_wait);
            let consumer = bind::consumer(&deps.js, &spec, budget)
                .await
                .map_err(WorkerError::Consumer)?;
            let debater = Arc::new(DebateAgent {
                agent_type: agent.clone(),
                nats: deps.js.client(),
                js: deps.js.clone(),
                subjects: deps.subjects.clone(),
                data: data.clone(),
                evidence_wait: cfg.worker.debate_evidence_wait,
            });
            tracker.spawn_named(
                "inbox",
                inbox::run(
                    consumer,
                    debater,
                    dlq.clone(),
                    cfg.max_body_bytes,
                    deps.shutdown.clone(),
                    tracker.clone(),
                ),
            );
        }
    }
    for (agent, sem) in cfg.worker.agents.iter().zip(sems) {
        let spec = consumers::task_consumer(
            &deps.subjects,
            agent,
            cfg.worker.ack_wait,
            cfg.worker.max_deliver,
        );
        let consumer = bind::consumer(&deps.js, &spec, budget)
            .await
            .map_err(WorkerError::Consumer)?;
        let puller = pull::Puller::start(
            &deps.js,
            &consumer,
            agent,
            cfg.worker.fetch_wait,
            deps.shutdown.clone(),
            tracker,
        )
        .await
        .map_err(|source| WorkerError::Pull {
            agent_type: agent.clone(),
            source,
        })?;
        for slot in 0..cfg.worker.slots {
            let s = slot::Slot {
                deps: deps.clone(),
                agent_type: agent.clone(),
                index: slot,
                sem: sem.clone(),
                puller: puller.clone(),
                dlq: dlq.clone(),
                reporter: reporter.clone(),
                broadcasts: broadcasts.clone(),
            };
            tracker.spawn_named("slot", s.run());
        }
    }
    Ok(())
}
