//! The facilitator process: consumers, timer, API, wired to the pure
//! [`crate::debate`] state machine and [`crate::credibility`] engine.
//!
//! State lives outside the process: debates in the `debates` KV bucket
//! (revision-checked), track records in `credibility`, expert queues and
//! sync locks in Redis. Several instances may run: their consumers share
//! durable consumers, every write is revision-checked and effects are only
//! carried out by the writer that won, so no transition happens twice.

pub mod api;
pub mod consume;
pub mod engine;
pub mod error;
pub mod experts;
pub mod regime;
pub mod spans;
pub mod store;
pub mod sync;
pub mod timer;

use std::sync::Arc;

use caucus_shared::config::{FacilitatorConfig, InvalidSetting};
use caucus_shared::nats::bind::{self, BindBudget};
use caucus_shared::nats::buckets;
use caucus_shared::service::{Exit, Service, ServiceContext};
use caucus_shared::Error;

pub use engine::Facilitator;
pub use error::{ServiceError, StartError};

use crate::credibility::CredibilityParams;
use crate::debate::Timeouts;
use crate::impact::ImpactParams;

/// KV bucket of debates (`<prefix>_debates`).
pub const DEBATES_BUCKET: &str = buckets::DEBATES;
/// KV bucket of track records (`<prefix>_credibility`).
pub const CREDIBILITY_BUCKET: &str = buckets::CREDIBILITY;

/// Checks the `[facilitator]` section.
pub fn validate_config(cfg: &FacilitatorConfig) -> Result<(), StartError> {
    let bad = |key: &'static str, problem: &str| Err(InvalidSetting::new(key, problem).into());
    if cfg.experts.is_empty() {
        return bad("facilitator.experts", "must name at least one expert");
    }
    if cfg.expert_max_concurrent == 0 {
        return bad("facilitator.expert_max_concurrent", "must be > 0");
    }
    if cfg.sync_lock_ttl <= cfg.flush_timeout {
        return bad("facilitator.sync_lock_ttl", "must exceed flush_timeout");
    }
    if cfg.expert_slot_ttl <= cfg.human_timeout {
        return bad("facilitator.expert_slot_ttl", "must exceed human_timeout");
    }
    if cfg.timer_tick.is_zero() {
        return bad("facilitator.timer_tick", "must be > 0");
    }
    Ok(CredibilityParams::from_config(cfg).validate()?)
}

/// Builds the facilitator on a started service's context.
pub async fn build(ctx: &ServiceContext) -> Result<Facilitator, Error> {
    let cfg = &ctx.config.facilitator;
    // The coordinator or `caucus init` creates the buckets
    // (caucus_shared::nats::buckets); the facilitator only binds.
    let budget = BindBudget::from_config(&ctx.config.nats);
    let debates = bind::kv(&ctx.js, &ctx.subjects, DEBATES_BUCKET, budget).await?;
    let tracks = bind::kv(&ctx.js, &ctx.subjects, CREDIBILITY_BUCKET, budget).await?;
    let state = bind::kv(&ctx.js, &ctx.subjects, regime::STATE_BUCKET, budget).await?;
    let regime = regime::CurrentRegime::open(state, &cfg.current_regime).await;
    Ok(Facilitator {
        debates: store::DebateStore::new(debates),
        tracks: store::TrackStore::new(tracks, cfg.max_track_records as usize),
        experts: experts::ExpertQueues::new(
            ctx.redis.clone(),
            ctx.subjects.prefix(),
            cfg.experts.clone(),
            cfg.expert_max_concurrent,
            cfg.expert_slot_ttl,
        )?,
        sync: sync::Snapshotter {
            nats: ctx.nats.clone(),
            js: ctx.js.clone(),
            subjects: ctx.subjects.clone(),
            redis: ctx.redis.clone(),
            lock_ttl: cfg.sync_lock_ttl,
            lock_wait: cfg.sync_lock_wait,
            flush_timeout: cfg.flush_timeout,
            from: ctx.service.clone(),
        },
        js: ctx.js.clone(),
        subjects: ctx.subjects.clone(),
        clock: ctx.clock.clone(),
        timeouts: Timeouts::from_config(cfg),
        params: CredibilityParams::from_config(cfg),
        impact: ImpactParams {
            margin_price_elasticity: cfg.margin_price_elasticity,
            risk_sensitivity: cfg.risk_sensitivity,
        },
        regime,
        precedents: Default::default(),
        name: ctx.service.clone(),
        open_debates: Default::default(),
    })
}

/// Runs the facilitator on a started service: config check, buckets,
/// API, consumers, timer; runs until a signal.
pub async fn serve(mut svc: Service) -> Result<Exit, StartError> {
    validate_config(&svc.context().config.facilitator)?;
    let fac = Arc::new(build(svc.context()).await?);
    let consumers = consume::ensure_consumers(
        &svc.context().js,
        &fac,
        svc.context().config.facilitator.ack_wait,
    )
    .await?;
    let regime_consumer = regime::ensure_consumer(
        &svc.context().js,
        &fac.subjects,
        svc.context().config.facilitator.ack_wait,
    )
    .await?;
    api::install(&mut svc, fac.clone());
    Ok(svc
        .run(move |ctx| run(ctx, fac, consumers, regime_consumer))
        .await?)
}

async fn run(
    ctx: ServiceContext,
    fac: Arc<Facilitator>,
    consumers: Vec<async_nats::jetstream::consumer::PullConsumer>,
    regime_consumer: async_nats::jetstream::consumer::PullConsumer,
) -> Result<(), std::convert::Infallible> {
    let cfg = &ctx.config.facilitator;
    ctx.tasks.spawn_named(
        "regime",
        regime::run(
            regime_consumer,
            fac.regime.clone(),
            ctx.dlq.clone(),
            ctx.config.max_body_bytes,
            ctx.shutdown.clone(),
        ),
    );
    let index = timer::DueIndex::default();
    ctx.tasks.spawn_named(
        "timer-watch",
        timer::watch(
            fac.clone(),
            index.clone(),
            cfg.timer_tick,
            ctx.shutdown.clone(),
        ),
    );
    ctx.tasks.spawn_named(
        "timer",
        timer::run(fac.clone(), index, cfg.timer_tick, ctx.shutdown.clone()),
    );
    ctx.tasks.spawn_named(
        "expert-queue-metrics",
        experts::report_load(
            fac.experts.clone(),
            crate::metrics::EXPERT_QUEUE_REFRESH,
            ctx.shutdown.clone(),
        ),
    );
    for c in consumers {
        ctx.tasks.spawn_named(
            "consume",
            consume::run(
                c,
                fac.clone(),
                ctx.dlq.clone(),
                ctx.config.max_body_bytes,
                ctx.shutdown.clone(),
                // Per-message work: tracked, not supervised (consume.rs
                // takes the plain tracker).
                ctx.tasks.tracker().clone(),
            ),
        );
    }
    ctx.shutdown.cancelled().await;
    Ok(())
}
