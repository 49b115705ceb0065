//! `coordinator.run_pattern` and `coordinator.pattern_status`.
//!
//! Any coordinator instance can run a pattern (leader or standby): a run
//! touches no workflow state, only its own record in `pattern_runs`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, OnceCell};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use caucus_shared::api::coordinator::patterns::{
    PatternRunReply, PatternStatusRequest, CODE_STORE_FAILED,
};
use caucus_shared::clock::SharedClock;
use caucus_shared::nats::api::ApiError;
use caucus_shared::nats::topology::ensure_kv;
use caucus_shared::service::ServiceContext;
use caucus_shared::subjects::Subjects;

use super::nats_caller::{workflow_id, NatsCaller};
use super::record::{PatternRun, RunState, RunStore, Summary, PATTERN_RUNS_BUCKET};
use super::runner::{self, AgentCaller};
use super::spec::{PatternSpec, RunRequest};

/// Longest per-call time limit a request may ask for (1 hour).
pub const MAX_CALL_TIMEOUT_MS: u64 = 3_600_000;

/// What the pattern routes share.
#[derive(Clone)]
pub struct PatternService {
    nats: async_nats::Client,
    js: async_nats::jetstream::Context,
    subjects: Subjects,
    clock: SharedClock,
    replicas: usize,
    default_timeout: Duration,
    shutdown: CancellationToken,
    tasks: TaskTracker,
    store: Arc<OnceCell<RunStore>>,
}

impl PatternService {
    /// Built from the service context (before it runs).
    pub fn new(ctx: &ServiceContext) -> Self {
        PatternService {
            nats: ctx.nats.clone(),
            js: ctx.js.clone(),
            subjects: ctx.subjects.clone(),
            clock: ctx.clock.clone(),
            replicas: ctx.config.nats.replicas,
            default_timeout: ctx.config.coordinator.pattern_call_timeout,
            shutdown: ctx.shutdown.clone(),
            tasks: ctx.tasks.tracker().clone(),
            store: Arc::new(OnceCell::new()),
        }
    }

    async fn store(&self) -> Result<RunStore, ApiError> {
        self.store
            .get_or_try_init(|| async {
                ensure_kv(
                    &self.js,
                    &self.subjects,
                    PATTERN_RUNS_BUCKET,
                    1,
                    Duration::ZERO,
                    self.replicas,
                )
                .await
                .map(RunStore::new)
                .map_err(|e| ApiError::new(CODE_STORE_FAILED, e.to_string()))
            })
            .await
            .cloned()
    }

    /// `run_pattern`: validates, records the run, runs it; replies with the
    /// finished record, or at once with the running one when `wait` is false.
    pub async fn run_pattern(&self, req: RunRequest) -> Result<PatternRunReply, ApiError> {
        let spec =
            PatternSpec::from_request(&req).map_err(|e| ApiError::bad_request(e.to_string()))?;
        if let Some(i) = &req.item {
            if i.trim().is_empty() || i.len() > 200 {
                return Err(ApiError::bad_request("`item` must be 1..=200 characters"));
            }
        }
        let timeout = match req.call_timeout_ms {
            Some(0) => return Err(ApiError::bad_request("`call_timeout_ms` must be positive")),
            Some(ms) if ms > MAX_CALL_TIMEOUT_MS => {
                return Err(ApiError::bad_request(format!(
                    "`call_timeout_ms` is {ms}; the limit is {MAX_CALL_TIMEOUT_MS}"
                )))
            }
            Some(ms) => Duration::from_millis(ms),
            None => self.default_timeout,
        };
        let store = self.store().await?;
        let run_id = uuid::Uuid::now_v7().to_string();
        let record = PatternRun {
            schema_version: super::record::RUN_SCHEMA_VERSION,
            workflow_id: workflow_id(&run_id),
            run_id: run_id.clone(),
            pattern: spec.pattern.kind().as_str().to_string(),
            agents: spec.agents.clone(),
            task: spec.task.clone(),
            params: spec.params(),
            state: RunState::Running,
            rounds: Vec::new(),
            summary: Summary::default(),
            consensus_reached: None,
            stopped: None,
            error: None,
            started_at: self.clock.now(),
            finished_at: None,
        };
        store
            .put(&record)
            .await
            .map_err(|e| ApiError::new(CODE_STORE_FAILED, e.to_string()))?;
        let caller = NatsCaller::new(
            self.nats.clone(),
            self.subjects.clone(),
            self.clock.clone(),
            run_id.clone(),
            req.item.clone(),
            timeout,
        );
        let span = tracing::info_span!(
            "pattern_run",
            run_id = %run_id,
            pattern = record.pattern.as_str(),
            agents = spec.agents.len()
        );
        let job = execute(
            caller,
            spec,
            record.clone(),
            store,
            self.clock.clone(),
            self.shutdown.clone(),
        )
        .instrument(span);
        if req.wait {
            Ok(PatternRunReply::from(&job.await))
        } else {
            self.tasks.spawn(job);
            Ok(PatternRunReply::from(&record))
        }
    }

    /// `pattern_status`: `{run_id}` → the record as it stands.
    pub async fn pattern_status(
        &self,
        req: PatternStatusRequest,
    ) -> Result<PatternRunReply, ApiError> {
        let ok = !req.run_id.is_empty()
            && req.run_id.len() <= 64
            && req
                .run_id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok {
            return Err(ApiError::bad_request(format!(
                "`run_id` `{}` is not a run id",
                req.run_id
            )));
        }
        let store = self.store().await?;
        match store.get(&req.run_id).await {
            Ok(Some(r)) => Ok(PatternRunReply::from(&r)),
            Ok(None) => Err(ApiError::not_found(format!(
                "no pattern run `{}`",
                req.run_id
            ))),
            Err(e) => Err(ApiError::internal(e.to_string())),
        }
    }
}

/// Runs `spec`, saving the record after every round and at the end. On
/// shutdown the run stops and is recorded as failed with the rounds so far.
pub async fn execute<C: AgentCaller>(
    caller: C,
    spec: PatternSpec,
    mut record: PatternRun,
    store: RunStore,
    clock: SharedClock,
    shutdown: CancellationToken,
) -> PatternRun {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let run = runner::run(&caller, &spec, clock.clone(), Some(tx));
    tokio::pin!(run);
    let outcome = loop {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => break None,
            Some(round) = rx.recv() => {
                record.push_round(round);
                if let Err(e) = store.put(&record).await {
                    tracing::warn!(run_id = %record.run_id, error = %e, "round not recorded; the final record will carry it");
                }
            }
            o = &mut run => break Some(o),
        }
    };
    while let Ok(round) = rx.try_recv() {
        record.push_round(round);
    }
    match outcome {
        Some(o) => {
            record.state = RunState::Completed;
            record.consensus_reached = o.consensus_reached;
            record.stopped = o.stopped;
        }
        None => {
            record.state = RunState::Failed;
            record.error = Some("the coordinator shut down during the run".into());
        }
    }
    record.finished_at = Some(clock.now());
    tracing::info!(
        run_id = %record.run_id,
        state = ?record.state,
        results = record.summary.results,
        failed = record.summary.failed,
        "pattern run finished"
    );
    if let Err(e) = store.put(&record).await {
        tracing::error!(run_id = %record.run_id, error = %e, "final pattern record not stored");
    }
    record
}
