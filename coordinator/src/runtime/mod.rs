//! The coordinator process: while it holds the leadership lock it loads the
//! unfinished workflows from KV, consumes task events, dispatches ready
//! tasks within the capacities read from Redis, and answers the control API.

pub mod api;
pub mod batch;
pub mod broadcasts;
mod capacity;
pub mod checkpoints;
pub mod commands;
pub mod control;
pub mod control_api;
mod control_call;
pub mod control_stream;
pub mod events;
pub mod gates;
pub mod gates_api;
mod gates_package;
pub mod inbound;
pub mod index_groups;
pub mod leader;
pub(crate) mod metrics;
pub mod partition;
pub mod partitions_api;
pub mod pause;
pub mod pipelines;
pub mod plan_api;
pub(crate) mod publish;
pub mod requests;
pub mod resolutions;
pub mod route;
pub mod scaling;
pub mod scheduler;
mod status_merge;
pub mod store;
pub mod submissions;
pub mod submit_to;
pub mod term_tasks;
pub mod topology;
pub mod undeliverable;
pub mod views;
pub mod workers_api;

use std::sync::Arc;

use async_nats::jetstream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use caucus_shared::clock::SharedClock;
use caucus_shared::config::{Config, InvalidSetting};
use caucus_shared::nats::dlq::Dlq;
use caucus_shared::nats::topology::ensure_kv;
use caucus_shared::redis::{OwnedLock, RedisPool};
use caucus_shared::service::Tasks;
use caucus_shared::subjects::Subjects;

use commands::{Capacities, SchedulerHandle};
use scheduler::Scheduler;
use store::{StoreError, WorkflowStore};
use term_tasks::TermTasks;

pub use store::WORKFLOWS_BUCKET;

/// Everything the coordinator needs.
#[derive(Clone)]
pub struct CoordinatorDeps {
    /// Effective configuration.
    pub config: Arc<Config>,
    /// Subject builder.
    pub subjects: Subjects,
    /// JetStream context.
    pub js: jetstream::Context,
    /// Redis pool.
    pub redis: RedisPool,
    /// Cancelled on shutdown.
    pub shutdown: CancellationToken,
    /// Clock.
    pub clock: SharedClock,
    /// This instance's id (leadership token).
    pub instance_id: String,
    /// What `health` reports; the leadership loop marks its component.
    pub health: caucus_shared::health::Health,
    /// The process's tracked, supervised tasks.
    pub tasks: Tasks,
}

/// Errors that stop the coordinator (all at set-up: once it runs, failures
/// end a leadership term, not the process).
#[derive(Debug, thiserror::Error)]
pub enum CoordinatorError {
    /// The `[coordinator]` settings break a rule.
    #[error(transparent)]
    Config(#[from] InvalidSetting),
    /// The workflow buckets could not be created or opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A KV bucket could not be created or opened.
    #[error("bucket {bucket}: {source}")]
    Bucket {
        /// The bucket's name (without the prefix).
        bucket: &'static str,
        /// What failed.
        #[source]
        source: caucus_shared::Error,
    },
    /// The leader lock's name or this instance's token is unusable.
    #[error("leader lock: {0}")]
    Lock(#[source] caucus_shared::Error),
    /// A durable consumer could not be created or updated.
    #[error(transparent)]
    Consumer(caucus_shared::Error),
}

/// The schedulers of the partitions this instance holds (the leader's
/// alone with one partition; none while standing by).
pub type SharedScheduler = Arc<route::Schedulers>;

/// Opens the workflow store.
pub async fn open_store(deps: &CoordinatorDeps) -> Result<WorkflowStore, CoordinatorError> {
    WorkflowStore::open(
        &deps.js,
        &deps.subjects,
        &deps.config.nats,
        deps.config.coordinator.retain_history,
    )
    .await
    .map_err(CoordinatorError::Store)
}

async fn open_kv(
    deps: &CoordinatorDeps,
    bucket: &'static str,
) -> Result<async_nats::jetstream::kv::Store, CoordinatorError> {
    ensure_kv(
        &deps.js,
        &deps.subjects,
        bucket,
        1,
        std::time::Duration::ZERO,
        deps.config.nats.replicas,
    )
    .await
    .map_err(|source| CoordinatorError::Bucket { bucket, source })
}

/// What every term of this process shares: the stores, opened once.
#[derive(Clone)]
struct TermShared {
    store: WorkflowStore,
    checkpoints_kv: async_nats::jetstream::kv::Store,
    batches_kv: async_nats::jetstream::kv::Store,
    research_kv: async_nats::jetstream::kv::Store,
    responses: inbound::ResponseStore,
    /// Reaches every partition (several partitions only).
    router: route::Router,
    /// Capacities read once for every partition's term (several
    /// partitions only).
    caps: Option<Capacities>,
}

/// Runs until shutdown: with one partition, stand by, lead, and stand by
/// again if leadership is lost; with several, serve the partitions this
/// instance holds (docs/PARTITIONS.md).
pub async fn run(deps: CoordinatorDeps, current: SharedScheduler) -> Result<(), CoordinatorError> {
    let cfg = &deps.config.coordinator;
    cfg.validate()?;
    current.set_count(cfg.partitions);
    // Before standing by: a standby shows `caucus_coordinator_leader 0`.
    metrics::register();
    // The buckets and consumers the restricted services bind to (the
    // streams were created by `Service::start`).
    let known = topology::administer(&deps)
        .await
        .map_err(CoordinatorError::Consumer)?;
    deps.tasks
        .spawn_named("topology", topology::watch(deps.clone(), known));
    // Set up concurrently: the API answers `standby` until this is done.
    let (store, checkpoints_kv, batches_kv, research_kv) = tokio::try_join!(
        open_store(&deps),
        open_kv(&deps, checkpoints::CHECKPOINTS_BUCKET),
        open_kv(&deps, batch::BATCHES_BUCKET),
        open_kv(&deps, crate::research::runtime::RESEARCH_BUCKET)
    )?;
    let responses = inbound::ResponseStore::new(
        ensure_kv(
            &deps.js,
            &deps.subjects,
            inbound::RESPONSES_BUCKET,
            1,
            cfg.findings_lookback,
            deps.config.nats.replicas,
        )
        .await
        .map_err(|source| CoordinatorError::Bucket {
            bucket: inbound::RESPONSES_BUCKET,
            source,
        })?,
    );
    let shared = TermShared {
        store,
        checkpoints_kv,
        batches_kv,
        research_kv,
        responses,
        router: route::Router::new(
            current.clone(),
            deps.js.client(),
            deps.subjects.clone(),
            deps.config.nats.request_timeout,
        ),
        caps: None,
    };
    if cfg.partitions > 1 {
        return serve_partitions(deps, shared, current).await;
    }
    let lock = OwnedLock::new(
        deps.redis.clone(),
        deps.subjects.prefix(),
        leader::LEADER_LOCK,
        &deps.instance_id,
    )
    .map_err(CoordinatorError::Lock)?;
    // The highest fencing epoch this instance has seen in the records: a
    // Redis that lost its data restarts its counter, and epochs must still
    // rise (docs/RELIABILITY.md).
    let mut floor = 0u64;
    while !deps.shutdown.is_cancelled() {
        let Some(held) =
            leader::acquire(&lock, cfg.leader_lease, floor, &deps.shutdown, &deps.health).await
        else {
            break;
        };
        tracing::info!(instance_id = %deps.instance_id, epoch = held.epoch(), "leading");
        let keeper = deps.tasks.spawn_named(
            "leader-keeper",
            leader::keep(
                lock.clone(),
                held.clone(),
                cfg.leader_lease,
                deps.shutdown.clone(),
                deps.health.clone(),
            ),
        );
        let served = serve(
            &deps,
            &shared,
            partition::Partition::ONLY,
            &held,
            &lock,
            &current,
        )
        .await;
        floor = floor.max(served);
        if deps.shutdown.is_cancelled() {
            let _ = keeper.await;
            break;
        }
        held.step_down("term ended");
        let _ = keeper.await;
        floor = floor.max(held.epoch());
        tracing::warn!("stepped down; standing by");
    }
    Ok(())
}

/// Several partitions: divides them with the other coordinators and runs
/// one term per partition held, dropping its tenure (which releases the
/// partition) once the term is over.
async fn serve_partitions(
    deps: CoordinatorDeps,
    shared: TermShared,
    current: SharedScheduler,
) -> Result<(), CoordinatorError> {
    use caucus_shared::redis::partitions::{divide, PartitionPlan};
    let cfg = &deps.config.coordinator;
    let count = cfg.partitions;
    let plan = PartitionPlan {
        group: PARTITION_GROUP.into(),
        locks: (0..count)
            .map(|p| leader::partition_lock(p, count))
            .collect(),
        lease: cfg.leader_lease,
    };
    // One capacity reader for every partition's term.
    let caps = capacity::first(&deps.redis, deps.subjects.prefix()).await;
    {
        let slots = current.clone();
        deps.tasks.spawn_named(
            "capacity",
            capacity::run(
                deps.redis.clone(),
                deps.subjects.prefix().to_string(),
                caps.clone(),
                cfg.tick,
                move || {
                    for (_, h) in slots.held() {
                        capacity::poke(&h);
                    }
                },
                deps.shutdown.clone(),
            ),
        );
    }
    let shared = TermShared {
        caps: Some(caps),
        ..shared
    };
    let (tx, mut rx) = mpsc::channel(count as usize);
    let divider = {
        let (pool, prefix, token) = (
            deps.redis.clone(),
            deps.subjects.prefix().to_string(),
            deps.instance_id.clone(),
        );
        let (shutdown, health) = (deps.shutdown.clone(), deps.health.clone());
        deps.tasks.spawn_named("partitions", async move {
            if let Err(e) = divide(pool, &prefix, &token, plan, tx, shutdown, health).await {
                tracing::error!(error = %e, "cannot divide the partitions");
            }
        })
    };
    while let Some(tenure) = rx.recv().await {
        let part = partition::Partition {
            index: tenure.partition(),
            count,
        };
        let (deps, shared, current) = (deps.clone(), shared.clone(), current.clone());
        deps.tasks.clone().spawn_named("partition", async move {
            tracing::info!(
                partition = part.index,
                epoch = tenure.lease().epoch(),
                "serving partition"
            );
            serve(
                &deps,
                &shared,
                part,
                tenure.lease(),
                tenure.lock(),
                &current,
            )
            .await;
            tenure.lease().step_down("partition term ended");
            tracing::warn!(partition = part.index, "partition given up");
            drop(tenure);
        });
    }
    let _ = divider.await;
    Ok(())
}

/// The member group of coordinators sharing partitions.
pub const PARTITION_GROUP: &str = "partitions:coordinator";

/// One term: loads partition `part`'s unfinished workflows and schedules
/// them while `held` is valid. Returns the highest epoch found in the
/// records (the floor of the next term's epoch).
async fn serve(
    deps: &CoordinatorDeps,
    shared: &TermShared,
    part: partition::Partition,
    held: &caucus_shared::redis::leadership::LeaderLease,
    lock: &OwnedLock,
    slot: &SharedScheduler,
) -> u64 {
    let cfg = &deps.config.coordinator;
    let ack_wait = deps.config.worker.ack_wait;
    let term = CancellationToken::new();
    let stop = {
        let lost = held.lost().clone();
        let shutdown = deps.shutdown.clone();
        let term = term.clone();
        deps.tasks.spawn_named("term-stop", async move {
            tokio::select! {
                _ = lost.cancelled() => {}
                _ = shutdown.cancelled() => {}
                // A failed runtime task ended the term.
                _ = term.cancelled() => {}
            }
            term.cancel();
        })
    };
    // Findings, messages and control commands are read by one term:
    // partition 0's, under the names of one partition; findings reach
    // every partition from there (docs/PARTITIONS.md, item 5).
    let inbound_here = part.index == 0;
    let only = partition::Partition::ONLY;
    let inbound_consumers = async {
        if !inbound_here {
            return Ok((None, None));
        }
        let (f, m) = tokio::try_join!(
            inbound::findings::ensure_consumer(&deps.js, &deps.subjects, ack_wait, only),
            inbound::messages::ensure_consumer(&deps.js, &deps.subjects, ack_wait, only),
        )?;
        Ok((Some(f), Some(m)))
    };
    let consumers = tokio::try_join!(
        events::ensure_consumer(&deps.js, &deps.subjects, ack_wait, part),
        broadcasts::ensure_consumer(&deps.js, &deps.subjects, ack_wait, part),
        inbound_consumers,
    )
    .map(|(e, b, (f, m))| (e, b, f, m));
    let (consumer, bcast_consumer, findings_consumer, messages_consumer) = match consumers {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, partition = part.index, "cannot create this term's consumers; stepping down");
            held.step_down("cannot create the term's consumers");
            let _ = stop.await;
            return 0;
        }
    };
    let store = &shared.store;
    // With several partitions the process reads capacities once for all
    // (serve_partitions); with one, the term reads them.
    let own_caps = shared.caps.is_none();
    let caps: Capacities = match &shared.caps {
        Some(c) => c.clone(),
        None => capacity::first(&deps.redis, deps.subjects.prefix()).await,
    };
    let mut sched = Scheduler::new(
        store.clone(),
        deps.js.clone(),
        deps.subjects.clone(),
        caps.clone(),
        deps.clock.clone(),
        cfg.clone(),
    )
    .with_partition(part)
    .with_control(control::Control {
        pauses: pause::PauseManager::new(
            deps.js.clone(),
            deps.subjects.clone(),
            checkpoints::CheckpointStore::new(shared.checkpoints_kv.clone()),
            cfg.pause_reminders.clone(),
            cfg.pause_escalate_from,
        ),
        batches: batch::BatchManager::new(
            shared.batches_kv.clone(),
            cfg.batch_concurrency,
            cfg.batch_failure_ratio,
        )
        .with_partition(part, deps.redis.clone(), deps.subjects.prefix()),
    })
    .with_research(crate::research::runtime::ResearchRuntime::new(
        deps.js.clone(),
        deps.subjects.clone(),
        shared.research_kv.clone(),
        checkpoints::CheckpointStore::new(shared.checkpoints_kv.clone()),
        cfg.into(),
    ))
    .with_requests(requests::RequestAnswers::new(deps))
    .with_lease(held.clone())
    .with_tasks(deps.tasks.clone())
    .with_silence(deps.config.worker.ack_wait + deps.config.worker.lease_ttl);
    let floor = match sched.load().await {
        Ok((n, max_epoch)) => {
            if !held.raise_above(lock, max_epoch).await {
                let _ = stop.await;
                return max_epoch;
            }
            if let Err(e) = store.note_epoch(part, held.epoch()).await {
                tracing::warn!(error = %e, "cannot note this tenure's epoch in the index");
            }
            tracing::info!(
                workflows = n,
                epoch = held.epoch(),
                partition = part.index,
                "loaded unfinished workflows"
            );
            max_epoch
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot load workflows; retrying leadership");
            held.step_down("cannot load workflows");
            let _ = stop.await;
            return 0;
        }
    };
    sched.set_findings(fill_findings(deps).await);
    let (tx, rx) = mpsc::channel(1024);
    sched.set_handle(tx.clone());
    slot.set(part.index, Some(tx.clone()));
    metrics::lead(part.index);
    // The term's tasks run in one set: one that ends early or panics
    // ends the term (its work would silently stop otherwise: no events
    // applied, no capacity read) and is reported in health.
    let mut tasks = TermTasks::new(term.clone(), deps.health.clone());
    if own_caps {
        let poke = tx.clone();
        tasks.spawn(
            "capacity",
            capacity::run(
                deps.redis.clone(),
                deps.subjects.prefix().to_string(),
                caps,
                cfg.tick,
                move || capacity::poke(&poke),
                term.clone(),
            ),
        );
    }
    tasks.spawn(
        "events",
        events::run(
            consumer,
            Dlq::new(deps.js.clone(), deps.subjects.clone()),
            deps.config.max_body_bytes,
            cfg.event_batch,
            tx.clone(),
            term.clone(),
        ),
    );
    if inbound_here {
        tasks.spawn(
            "control",
            control_stream::run(
                deps.js.clone(),
                deps.subjects.clone(),
                ack_wait,
                Dlq::new(deps.js.clone(), deps.subjects.clone()),
                deps.config.max_body_bytes,
                tx.clone(),
                (part.count > 1).then(|| shared.router.clone()),
                term.clone(),
            ),
        );
    }
    tasks.spawn(
        "broadcasts",
        broadcasts::run(
            bcast_consumer,
            Dlq::new(deps.js.clone(), deps.subjects.clone()),
            deps.config.max_body_bytes,
            deps.clock.clone(),
            tx.clone(),
            term.clone(),
        ),
    );
    tasks.spawn(
        "resolutions",
        resolutions::run(
            deps.js.clone(),
            deps.subjects.clone(),
            ack_wait,
            deps.config.nats.request_timeout,
            Dlq::new(deps.js.clone(), deps.subjects.clone()),
            deps.config.max_body_bytes,
            tx.clone(),
            part,
            term.clone(),
        ),
    );
    tasks.spawn(
        "undeliverable",
        undeliverable::run(
            deps.js.clone(),
            deps.subjects.clone(),
            tx.clone(),
            term.clone(),
        ),
    );
    let inbound = inbound::Inbound {
        js: deps.js.clone(),
        subjects: deps.subjects.clone(),
        dlq: Dlq::new(deps.js.clone(), deps.subjects.clone()),
        max_bytes: deps.config.max_body_bytes,
        clock: deps.clock.clone(),
        scheduler: tx.clone(),
        responses: shared.responses.clone(),
        pending: Default::default(),
        timeouts: cfg.response_timeout,
        partitions: (part.count > 1).then(|| shared.router.clone()),
        requests: requests::RequestIntake::new(
            deps,
            store.clone(),
            if part.count > 1 {
                submit_to::SubmitTo::Partitions {
                    router: shared.router.clone(),
                    store: store.clone(),
                }
            } else {
                submit_to::SubmitTo::Scheduler(tx.clone())
            },
        ),
    };
    if let (Some(findings), Some(messages)) = (findings_consumer, messages_consumer) {
        tasks.spawn(
            "findings",
            inbound::findings::run(findings, inbound.clone(), term.clone()),
        );
        tasks.spawn(
            "messages",
            inbound::messages::run(messages, inbound.clone(), term.clone()),
        );
        tasks.spawn("responses", inbound::watch(inbound, cfg.tick, term.clone()));
    }
    drop(tx);
    let scheduling = async {
        sched.run(rx, term.clone()).await;
        // At once, not after the other tasks: the API must not hand
        // requests to a scheduler that stopped.
        slot.set(part.index, None);
        metrics::stand_by(part.index);
    };
    tokio::join!(scheduling, tasks.supervise());
    let _ = stop.await;
    floor
}

/// The findings index of a new term, filled from the stream's last
/// `coordinator.findings_lookback` (empty, with a warning, when the stream
/// cannot be read: findings stored from now on still reach tasks).
async fn fill_findings(deps: &CoordinatorDeps) -> inbound::FindingsIndex {
    let cfg = &deps.config.coordinator;
    let mut index = inbound::FindingsIndex::new(
        cfg.findings_items,
        inbound::TaskLimits {
            count: cfg.findings_per_task,
            bytes: cfg.findings_bytes_per_task,
        },
    );
    let since = deps.clock.now()
        - chrono::Duration::from_std(cfg.findings_lookback).unwrap_or(chrono::Duration::MAX);
    if let Err(e) = inbound::replay::fill(
        &deps.js,
        &deps.subjects,
        since,
        deps.config.max_body_bytes,
        deps.config.nats.request_timeout,
        &mut index,
    )
    .await
    {
        tracing::warn!(error = %e, "findings index not filled from the stream; new findings still reach tasks");
    }
    index
}

/// Builds the deps from a service context.
pub fn deps_from(ctx: &caucus_shared::service::ServiceContext) -> CoordinatorDeps {
    CoordinatorDeps {
        config: ctx.config.clone(),
        subjects: ctx.subjects.clone(),
        js: ctx.js.clone(),
        redis: ctx.redis.clone(),
        shutdown: ctx.shutdown.clone(),
        clock: ctx.clock.clone(),
        instance_id: ctx.instance_id.clone(),
        health: ctx.health.clone(),
        tasks: ctx.tasks.clone(),
    }
}

/// The scheduler while this instance leads. Otherwise `unavailable` naming
/// the cause when leadership cannot even be contended for (Redis
/// unreachable), and `standby` only when it can (another instance leads, or
/// this one is still starting).
pub(crate) fn leader_only(
    slot: &SharedScheduler,
    health: &caucus_shared::health::Health,
) -> Result<SchedulerHandle, caucus_shared::nats::ApiError> {
    if let Some(s) = slot.leader() {
        return Ok(s);
    }
    use caucus_shared::health::{LEADERSHIP, REDIS};
    if let Some(why) = health.reason(LEADERSHIP).or_else(|| health.reason(REDIS)) {
        return Err(caucus_shared::nats::ApiError::new(
            "unavailable",
            format!("this coordinator cannot lead: {why}"),
        ));
    }
    Err(caucus_shared::nats::ApiError::new(
        "standby",
        "this coordinator is standing by (not the leader); retry: the request goes to another instance",
    ))
}

/// Registers the coordinator's API routes on `svc`, one area at a time;
/// returns the router they share (for `scaling`).
pub fn routes(svc: &mut caucus_shared::service::Service, slot: SharedScheduler) -> route::Router {
    let ctx = svc.context().clone();
    let router = route::Router::new(
        slot.clone(),
        ctx.nats.clone(),
        ctx.subjects.clone(),
        ctx.config.nats.request_timeout,
    );
    inbound::hold::register(&router);
    // Forwarded requests (several partitions only; harmless with one).
    ctx.tasks
        .spawn_named("partition-api", router.clone().serve(ctx.shutdown.clone()));
    // `submit` and `submission` (runtime/submissions.rs).
    api::submit_routes(svc, &router);
    api::status_route(svc, &router);
    plan_api::route(svc);
    workers_api::route(svc, &router);
    partitions_api::route(svc, &router);
    crate::research::runtime::audit_route(svc);
    control_api::routes(svc, &router);
    crate::patterns::register(svc);
    gates_api::routes(svc, &router);
    router
}
