//! The coordinator's control API: `submit`, `status`, `plan`, `workers`.

use std::time::Duration;

use caucus_shared::api::coordinator::status::{Status, StatusReply, StatusRequest};
use caucus_shared::api::coordinator::submit::{
    Submission, Submit, SubmitReply, SubmitRequest, SubmittedWorkflow,
};
use caucus_shared::clock::SharedClock;
use caucus_shared::nats::api::ApiError;
use caucus_shared::nats::trace;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::commands::{
    ask, parse_status_cursor, Command, SchedulerHandle, StatusFilter, STATUS_MAX_LIMIT,
};
use super::pipelines::{resolve, stages_of};
use super::submissions::{
    check_key, chunks, fingerprint, new_submission_id, submission_id_for_key, summary, workflow_id,
    SubmissionRecord, SubmissionState, Submissions, SUBMISSION_SCHEMA_VERSION, SUMMARY_IDS,
};
use crate::workflow::{instantiate, LevelReviewMode, LevelReviewPolicy};

/// Items per submit request, at most.
pub const MAX_ITEMS: usize = 100_000;
/// Length of one item name, at most.
pub const MAX_ITEM_LEN: usize = 200;

pub(super) fn check_items(items: &[String]) -> Result<(), ApiError> {
    if items.is_empty() {
        return Err(ApiError::bad_request("`items` must name at least one item"));
    }
    if items.len() > MAX_ITEMS {
        return Err(ApiError::bad_request(format!(
            "{} items in one request; the limit is {MAX_ITEMS}",
            items.len()
        )));
    }
    for i in items {
        if i.trim().is_empty() || i.len() > MAX_ITEM_LEN {
            return Err(ApiError::bad_request(format!(
                "item `{i}` must be 1..={MAX_ITEM_LEN} characters"
            )));
        }
    }
    Ok(())
}

/// What `submit` needs besides the request.
#[derive(Clone)]
pub struct SubmitSettings {
    /// `coordinator.time_unit`.
    pub default_unit: Duration,
    /// `coordinator.level_review_mode` / `_agent`.
    pub review_defaults: (LevelReviewMode, String),
    /// The research rules' settings.
    pub research: crate::research::ResearchSettings,
    /// `coordinator.submit_chunk`.
    pub chunk: usize,
}

impl From<&caucus_shared::config::CoordinatorConfig> for SubmitSettings {
    fn from(cfg: &caucus_shared::config::CoordinatorConfig) -> Self {
        SubmitSettings {
            default_unit: cfg.time_unit,
            review_defaults: (cfg.level_review_mode, cfg.level_review_agent.clone()),
            research: cfg.into(),
            chunk: cfg.submit_chunk,
        }
    }
}

/// `coordinator.submit`: `{items, pipeline, time_unit_ms?, auto_approve_gates?,
/// idempotency_key?}` → the submission's summary with the first
/// [`SUMMARY_IDS`] workflow ids (the rest: `coordinator.submission`).
///
/// Workflow records are stored here, in steps of `settings.chunk`, and
/// each step is handed to the scheduler in one command, so the scheduler
/// goes on dispatching between steps. A keyed submission found complete is
/// answered from its record; one found half-created is finished.
pub async fn submit(
    req: SubmitRequest,
    target: impl FnOnce() -> Result<super::submit_to::SubmitTo, ApiError>,
    clock: SharedClock,
    settings: SubmitSettings,
    subs: Submissions,
) -> Result<SubmitReply, ApiError> {
    submit_with(req, target, clock, settings, subs, |_| {}).await
}

/// [`submit`], with `adjust` applied to each workflow record after it is
/// instantiated and before it is stored (the internal entry point: a
/// `request` envelope raises its task's queue priority this way). `adjust`
/// must depend only on the request, so a retry builds the same records.
pub async fn submit_with(
    req: SubmitRequest,
    target: impl FnOnce() -> Result<super::submit_to::SubmitTo, ApiError>,
    clock: SharedClock,
    settings: SubmitSettings,
    subs: Submissions,
    adjust: impl Fn(&mut crate::workflow::WorkflowRecord),
) -> Result<SubmitReply, ApiError> {
    // The root of every workflow this submission creates: a child of the
    // current span (the API server's `api` span, itself a child of the
    // caller's `traceparent`; or a request's consumer span).
    let span = tracing::info_span!(
        "submit",
        caucus.items = req.items.len(),
        caucus.submission_id = tracing::field::Empty
    );
    submit_in_span(req, target, clock, settings, subs, adjust)
        .instrument(span)
        .await
}

async fn submit_in_span(
    req: SubmitRequest,
    target: impl FnOnce() -> Result<super::submit_to::SubmitTo, ApiError>,
    clock: SharedClock,
    settings: SubmitSettings,
    subs: Submissions,
    adjust: impl Fn(&mut crate::workflow::WorkflowRecord),
) -> Result<SubmitReply, ApiError> {
    check_items(&req.items)?;
    if let Some(k) = &req.idempotency_key {
        check_key(k)?;
    }
    let spec = resolve(&req.pipeline)?;
    // One shared stage list for every workflow of this submission.
    let stages = std::sync::Arc::new(stages_of(&spec)?);
    let review = LevelReviewPolicy::resolve(
        spec.level_review.as_ref(),
        &spec.capacities,
        settings.review_defaults.0,
        &settings.review_defaults.1,
    )
    .map_err(|e| ApiError::new("invalid_pipeline", e))?;
    let target = target()?;
    let unit_ms = req
        .time_unit_ms
        .unwrap_or(settings.default_unit.as_millis() as u64)
        .max(1);
    let print = fingerprint(&req.items, &req.pipeline, unit_ms, req.auto_approve_gates);
    let submission_id = match &req.idempotency_key {
        Some(k) => submission_id_for_key(k),
        None => new_submission_id(),
    };
    let root = tracing::Span::current();
    root.record("caucus.submission_id", submission_id.as_str());
    let (trace_parent, trace_state) = trace::traceparent_of(&root.context()).unzip();
    let trace_state = trace_state.flatten();
    let _running = subs.lock(&submission_id).await;
    let now = clock.now();
    let fresh = SubmissionRecord {
        schema_version: SUBMISSION_SCHEMA_VERSION,
        submission_id: submission_id.clone(),
        idempotency_key: req.idempotency_key.clone(),
        fingerprint: print.clone(),
        pipeline: spec.name.clone(),
        count: req.items.len(),
        created: 0,
        state: SubmissionState::Creating,
        created_at: now,
        updated_at: now,
    };
    let mut sub = match subs.create(&fresh).await? {
        Some(_) => fresh,
        // Stored before: a retry (or one racing it on another instance).
        None => match subs.get(&submission_id).await? {
            Some((found, _)) => found,
            None => {
                return Err(ApiError::new(
                    "store_failed",
                    format!("submission {submission_id} exists and cannot be read; retry"),
                ))
            }
        },
    };
    if sub.fingerprint != print {
        return Err(ApiError::new(
            "idempotency_conflict",
            format!(
                "idempotency key `{}` was used for another request (submission {}, {} item(s), pipeline {}); use a new key",
                req.idempotency_key.as_deref().unwrap_or_default(),
                sub.submission_id,
                sub.count,
                sub.pipeline
            ),
        ));
    }
    let replayed = sub.state == SubmissionState::Complete;
    let (mut created, mut existing) = (0usize, 0usize);
    if !replayed {
        let mut grant = target.begin().await?;
        for range in chunks(sub.created, sub.count, settings.chunk) {
            let mut records = Vec::with_capacity(range.len());
            for i in range.clone() {
                let mut rec = instantiate(
                    workflow_id(&submission_id, i),
                    req.items[i].clone(),
                    spec.name.clone(),
                    stages.clone(),
                    unit_ms,
                    sub.created_at,
                )
                .with_level_review(review.clone());
                rec.auto_approve_gates = req.auto_approve_gates;
                rec.epoch = grant.epoch;
                rec.trace_parent = trace_parent.clone();
                rec.trace_state = trace_state.clone();
                crate::research::attach(&mut rec, spec.timeout, &settings.research, clock.now())
                    .map_err(|e| ApiError::new("invalid_pipeline", e.to_string()))?;
                adjust(&mut rec);
                records.push(rec);
            }
            let step = Submissions::store_workflows(&grant.store, records, grant.partitions).await;
            created += step.created;
            existing += step.existing;
            let stored = step.records.len();
            let adopted = target.adopt(step.records, step.groups).await;
            let failure = match (&adopted, step.error) {
                (Ok(_), None) => None,
                (Ok(_), Some(e)) => Some(e),
                (Err(e), _) => Some(e.clone()),
            };
            if let Some(e) = failure {
                let held = if adopted.is_ok() { stored } else { 0 };
                tracing::error!(submission_id = %submission_id, error = %e, "submission stopped half-way");
                return Err(ApiError::new(
                    "store_failed",
                    format!(
                        "submission {submission_id}: {} of {} workflows stored and running ({e}); {}",
                        sub.created + held,
                        sub.count,
                        if req.idempotency_key.is_some() {
                            "retry with the same idempotency_key to finish it"
                        } else {
                            "submit with an idempotency_key to make retries safe"
                        }
                    ),
                ));
            }
            if let Ok(Some(g)) = adopted {
                grant = g;
            }
            sub.created = range.end;
            sub.updated_at = clock.now();
            if range.end < sub.count {
                // Progress, so a retry after a crash starts here; losing
                // it costs only re-reading records that exist.
                if let Err(e) = subs.put(&sub).await {
                    tracing::warn!(submission_id = %submission_id, error = %e, "submission progress not stored");
                }
            }
        }
        sub.state = SubmissionState::Complete;
        sub.updated_at = clock.now();
        subs.put(&sub).await?;
    }
    let first = SUMMARY_IDS.min(sub.count);
    let summary = summary(&sub, 0..first);
    let workflows = summary
        .workflow_ids
        .iter()
        .zip(&req.items)
        .map(|(id, item)| SubmittedWorkflow {
            workflow_id: id.clone(),
            item: item.clone(),
        })
        .collect();
    Ok(SubmitReply {
        summary,
        workflows,
        created,
        existing,
        replayed,
    })
}

/// Registers `status` (the leader answers; with several partitions, the
/// owners of the workflows asked for, or every partition for a list).
pub fn status_route(svc: &mut caucus_shared::service::Service, router: &super::route::Router) {
    router.register::<Status, _, _>(|h, req| async move { status(req, || Ok(h)).await });
    let health = svc.context().health.clone();
    let router = router.clone();
    svc.op::<Status, _, _>(move |req| {
        let (router, health) = (router.clone(), health.clone());
        async move {
            if router.schedulers().count() <= 1 {
                return status(req, || super::leader_only(router.schedulers(), &health)).await;
            }
            super::status_merge::status(&router, req).await
        }
    });
}

/// Registers `submit` (the leader answers) and `submission` (any
/// instance answers: it reads KV).
pub fn submit_routes(svc: &mut caucus_shared::service::Service, router: &super::route::Router) {
    use super::submit_to::SubmitTo;
    let ctx = svc.context().clone();
    let cfg = &ctx.config.coordinator;
    let settings = SubmitSettings::from(cfg);
    let subs = Submissions::new(
        ctx.js.clone(),
        ctx.subjects.clone(),
        cfg.submission_ttl,
        &ctx.config.nats,
    );
    super::submit_to::register(router);
    // With several partitions the records are created here, in this
    // instance's handle on the workflows bucket (opened on first use).
    let store: std::sync::Arc<tokio::sync::OnceCell<super::store::WorkflowStore>> =
        Default::default();
    {
        let subs = subs.clone();
        let clock = ctx.clock.clone();
        let health = ctx.health.clone();
        let router = router.clone();
        let (js, subjects) = (ctx.js.clone(), ctx.subjects.clone());
        let (nats, retain) = (ctx.config.nats.clone(), cfg.retain_history);
        svc.op::<Submit, _, _>(move |req| {
            let (router, store, clock, settings, subs, health) = (
                router.clone(),
                store.clone(),
                clock.clone(),
                settings.clone(),
                subs.clone(),
                health.clone(),
            );
            let (js, subjects, nats) = (js.clone(), subjects.clone(), nats.clone());
            async move {
                let target = if router.schedulers().count() <= 1 {
                    super::leader_only(router.schedulers(), &health).map(SubmitTo::Scheduler)
                } else {
                    store
                        .get_or_try_init(|| {
                            super::store::WorkflowStore::open(&js, &subjects, &nats, retain)
                        })
                        .await
                        .map(|store| SubmitTo::Partitions {
                            router: router.clone(),
                            store: store.clone(),
                        })
                        .map_err(|e| ApiError::new("store_failed", e.to_string()))
                };
                submit(req, move || target, clock, settings, subs).await
            }
        });
    }
    svc.op::<Submission, _, _>(move |req| {
        let subs = subs.clone();
        async move { super::submissions::page(req, &subs).await }
    });
}

/// `coordinator.status`: `{ids?, states?, tasks?, limit?, cursor?}`. With
/// `ids`, exactly those workflows (task outputs with `tasks`); without, a
/// page of at most `limit` workflows without outputs and `next_cursor`.
pub async fn status(
    req: StatusRequest,
    scheduler: impl FnOnce() -> Result<SchedulerHandle, ApiError>,
) -> Result<StatusReply, ApiError> {
    let filter = StatusFilter {
        ids: req.ids,
        states: req.states,
        tasks: req.tasks,
        limit: req.limit,
        cursor: req.cursor,
    };
    for s in &filter.states {
        if crate::workflow::WorkflowState::parse(s).is_none() {
            return Err(ApiError::bad_request(format!(
                "unknown state `{s}` (pending, running, pausing, paused, resuming, completed, failed)"
            )));
        }
    }
    if let Some(l) = filter.limit {
        if !(1..=STATUS_MAX_LIMIT).contains(&l) {
            return Err(ApiError::bad_request(format!(
                "`limit` must be 1..={STATUS_MAX_LIMIT}, not {l}"
            )));
        }
    }
    if let Some(c) = &filter.cursor {
        if parse_status_cursor(c).is_none() {
            return Err(ApiError::bad_request(format!(
                "`cursor` `{c}` is not a `next_cursor` of a status reply"
            )));
        }
    }
    let scheduler = scheduler()?;
    Ok(ask(&scheduler, |reply| Command::Status { filter, reply }).await?)
}
