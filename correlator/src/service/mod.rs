//! The `caucus-correlator` process.
//!
//! **Two instances: active/standby, with idempotent effects underneath.**
//! Only the holder of the Redis lock `correlator-leader` consumes failures.
//! Active/active is not an option with one durable consumer: its messages
//! are shared out between the instances, so neither engine would see every
//! failure of a signature. A standby takes over within one
//! `correlator.leader_lease` of the leader's death. Should two instances
//! ever both act (a lease lost to a pause, Redis restarted empty), every
//! side effect is still idempotent by id: the record is created create-only
//! under the deterministic correlation id and the messages carry
//! `Nats-Msg-Id`s, so a batch is never triggered twice (see
//! [`crate::effects`]).
//!
//! Each leadership term: a fresh engine, the start-up replay
//! ([`replay`]), then the live loop ([`consume`]) until shutdown or lost
//! leadership. The API ([`api`]) is answered by every instance from KV.

pub mod api;
pub mod consume;
pub mod leader;
pub mod replay;
pub mod settings;

use async_nats::jetstream;
use tokio_util::sync::CancellationToken;

use caucus_shared::api::correlator::{Alerts, Correlations};
use caucus_shared::nats::bind::{self, BindBudget};
use caucus_shared::redis::OwnedLock;
use caucus_shared::service::{Service, ServiceContext};
use caucus_shared::subjects::{StreamKind, Subjects};
use caucus_shared::Config;

use crate::effects::Effects;
use crate::engine::{Correlator, CorrelatorError};
use crate::processor::{ProcessError, Processor};
use crate::store::{CorrelationStore, CORRELATIONS_BUCKET};

/// Errors that stop the correlator.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The `[correlator]` settings are invalid.
    #[error("[correlator] {0}")]
    Config(#[from] CorrelatorError),
    /// The `correlations` bucket could not be created or opened.
    #[error("bucket {CORRELATIONS_BUCKET}: {0}")]
    Store(#[source] caucus_shared::Error),
    /// The leader lock's name or this instance's token is unusable.
    #[error("leader lock: {0}")]
    Lock(#[source] caucus_shared::Error),
    /// The durable failure consumer could not be created or updated.
    #[error(transparent)]
    Consumer(caucus_shared::Error),
    /// The service scaffolding failed (connect, signals, API).
    #[error(transparent)]
    Service(#[from] caucus_shared::Error),
}

/// Binds to the `correlations` bucket (created by the coordinator or
/// `caucus init`), waiting for it within the `[nats]` bind budget.
pub async fn open_store(
    js: &jetstream::Context,
    subjects: &Subjects,
    config: &Config,
) -> Result<CorrelationStore, ServiceError> {
    // The coordinator or `caucus init` creates the bucket
    // (caucus_shared::nats::buckets); the correlator only binds.
    let budget = BindBudget::from_config(&config.nats);
    let kv = bind::kv(js, subjects, CORRELATIONS_BUCKET, budget)
        .await
        .map_err(ServiceError::Store)?;
    Ok(CorrelationStore::new(kv))
}

/// Registers `correlator.correlations` and `correlator.alerts`.
pub fn routes(svc: &mut Service, store: CorrelationStore) {
    let ctx = svc.context().clone();
    let s = store.clone();
    svc.op::<Correlations, _, _>(move |q| api::correlations(s.clone(), q));
    let severity = ctx.config.correlator.alert_severity.clone();
    let subjects = ctx.subjects.clone();
    svc.op::<Alerts, _, _>(move |q| {
        api::alerts(store.clone(), subjects.clone(), severity.clone(), q)
    });
}

/// The whole process on a started service: opens the store, registers
/// the API and runs [`run`] until shutdown.
pub async fn serve(mut svc: Service) -> Result<caucus_shared::service::Exit, ServiceError> {
    let ctx = svc.context().clone();
    let store = open_store(&ctx.js, &ctx.subjects, &ctx.config).await?;
    routes(&mut svc, store);
    Ok(svc.run(run).await?)
}

/// Runs until shutdown: stand by, lead, stand by again if leadership is lost.
pub async fn run(ctx: ServiceContext) -> Result<(), ServiceError> {
    let cfg = ctx.config.correlator.clone();
    let settings = settings::engine_settings(&cfg)?;
    let store = open_store(&ctx.js, &ctx.subjects, &ctx.config).await?;
    let lock = OwnedLock::new(
        ctx.redis.clone(),
        ctx.subjects.prefix(),
        leader::LEADER_LOCK,
        &ctx.instance_id,
    )
    .map_err(ServiceError::Lock)?;
    let mut durable =
        consume::ensure_consumer(&ctx.js, &ctx.subjects, cfg.ack_wait, cfg.fetch_batch)
            .await
            .map_err(ServiceError::Consumer)?;
    let effects = Effects::new(
        ctx.js.clone(),
        ctx.subjects.clone(),
        store.clone(),
        &cfg.alert_severity,
        &ctx.instance_id,
        ctx.clock.clone(),
    );
    let deps = consume::LoopDeps {
        dlq: ctx.dlq.clone(),
        max_bytes: ctx.config.max_body_bytes,
        fetch_batch: cfg.fetch_batch,
        expire_interval: cfg.expire_interval,
        clock: ctx.clock.clone(),
        stream_name: ctx.subjects.stream(StreamKind::Failures),
    };
    while !ctx.shutdown.is_cancelled() {
        // The correlator's effects are idempotent by id, so its epoch only
        // needs to rise while Redis remembers it (floor 0).
        let Some(held) =
            leader::acquire(&lock, cfg.leader_lease, 0, &ctx.shutdown, &ctx.health).await
        else {
            break;
        };
        tracing::info!(instance_id = %ctx.instance_id, epoch = held.epoch(), "leading");
        let term = ctx.shutdown.child_token();
        let keeper = ctx.tasks.spawn_named(
            "leader-keeper",
            leader::keep(
                lock.clone(),
                held.clone(),
                cfg.leader_lease,
                ctx.shutdown.clone(),
                ctx.health.clone(),
            ),
        );
        let watcher = {
            let (lost, term) = (held.lost().clone(), term.clone());
            ctx.tasks.spawn_named("term-watcher", async move {
                tokio::select! {
                    _ = lost.cancelled() => term.cancel(),
                    _ = term.cancelled() => {}
                }
            })
        };
        let engine = Correlator::new(settings.clone())?;
        let mut processor =
            Processor::new(engine, effects.clone(), cfg.max_tracked_ids, term.clone())
                .with_flush_interval(cfg.record_flush_interval);
        match lead(
            &ctx,
            &cfg,
            &store,
            &mut durable,
            &mut processor,
            &deps,
            &term,
        )
        .await
        {
            Ok(()) | Err(LeadError::Process(ProcessError::Stopped)) => {}
            Err(e) => {
                tracing::error!(error = %e, "correlator term failed; retrying");
                tokio::select! {
                    _ = ctx.shutdown.cancelled() => {}
                    _ = tokio::time::sleep(cfg.leader_lease / 4) => {}
                }
            }
        }
        term.cancel();
        let _ = watcher.await;
        if ctx.shutdown.is_cancelled() {
            let _ = keeper.await;
            break;
        }
        held.step_down("term ended");
        let _ = keeper.await;
        tracing::warn!("stepped down; standing by");
    }
    Ok(())
}

#[derive(Debug, thiserror::Error)]
enum LeadError {
    #[error(transparent)]
    Replay(#[from] replay::ReplayError),
    #[error(transparent)]
    Process(#[from] ProcessError),
}

/// One leadership term: replay, then consume until `term` ends.
async fn lead(
    ctx: &ServiceContext,
    cfg: &caucus_shared::config::CorrelatorConfig,
    store: &CorrelationStore,
    durable: &mut jetstream::consumer::PullConsumer,
    processor: &mut Processor,
    deps: &consume::LoopDeps,
    term: &CancellationToken,
) -> Result<(), LeadError> {
    let mut stream = replay::failures_stream(&ctx.js, &ctx.subjects).await?;
    let started = std::time::Instant::now();
    if let Some(plan) = replay::plan(&mut stream, durable, store, cfg, ctx.clock.now()).await? {
        let read = replay::run(
            &stream,
            &ctx.subjects,
            plan,
            processor,
            ctx.config.max_body_bytes,
            term,
        )
        .await?;
        let s = processor.stats();
        tracing::info!(
            from = %plan.start, until_seq = plan.until_seq, read,
            detected = s.detected, open = processor.engine().open_correlations().len(),
            ms = started.elapsed().as_millis() as u64,
            "replayed recent failures"
        );
    }
    tracing::info!("consuming failures");
    consume::run(durable, processor, deps, term).await?;
    Ok(())
}
