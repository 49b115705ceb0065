//! The BatchManager: pause and resume many workflows as one operation.
//!
//! Batches live in the KV bucket `batches` (written by the leader only,
//! with revision checks). A batch pause pauses the latest workflow of each
//! item in waves of `max_concurrency`, stopping if more than the failure
//! ratio of a wave fails. A batch resume moves the paused items to a queue
//! and [`BatchManager::drive`] resumes them in order (gate time-outs
//! first, then the oldest pause) while fewer than `concurrency_limit` of
//! them are resumed-and-unfinished and the capacity rule allows
//! ([`logic::capacity_blocker`]); it stops the batch if more than the
//! failure ratio of the resumes fail (the workflow pauses again).

pub mod logic;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use async_nats::jetstream::kv;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};

use caucus_shared::messages::BatchTrigger;
use caucus_shared::nats::ApiError;

use crate::engine::Engine;
use crate::workflow::{
    InFlightPolicy, PauseOutcome, PauseSpec, TaskRunState, WorkflowRecord, WorkflowState,
};
use logic::{
    capacity_blocker, BatchItem, BatchRecord, BatchState, ItemState, BATCH_SCHEMA_VERSION,
};

/// KV bucket of batches.
pub const BATCHES_BUCKET: &str = "batches";

/// `coordinator.batch_pause` body.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchPauseArgs {
    /// Items: the latest workflow of each is paused.
    #[serde(default)]
    pub items: Vec<String>,
    /// Or workflows by id.
    #[serde(default)]
    pub workflow_ids: Vec<String>,
    /// Why.
    #[serde(default)]
    pub reason: Option<String>,
    /// Pauses per wave (default 5).
    #[serde(default)]
    pub max_concurrency: Option<u32>,
    /// Batch id (default: a new UUID).
    #[serde(default)]
    pub batch_id: Option<String>,
    /// Correlation link.
    #[serde(default)]
    pub correlation_id: Option<String>,
}

/// `coordinator.batch_resume` body.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchResumeArgs {
    /// The batch to resume.
    #[serde(default)]
    pub batch_id: Option<String>,
    /// Or items (their latest paused workflows, as a new batch).
    #[serde(default)]
    pub items: Vec<String>,
    /// Resumed-and-unfinished workflows at once (default 5).
    #[serde(default)]
    pub concurrency_limit: Option<u32>,
    /// In-flight tasks: `wait` (default) or `restart`.
    #[serde(default)]
    pub in_flight: InFlightPolicy,
}

fn valid_id(id: &str) -> Result<(), ApiError> {
    let ok = !id.is_empty()
        && id.len() <= 200
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '='));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "batch id `{id}` must be 1..=200 of A-Z a-z 0-9 - _ ="
        )))
    }
}

/// Batch id of a correlation: `corr-<id>` with other characters as `_`.
pub fn batch_id_for_correlation(correlation_id: &str) -> String {
    let clean: String = correlation_id
        .chars()
        .take(190)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '=') {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("corr-{clean}")
}

/// The latest workflow of each item held by the engine.
fn latest_by_item(engine: &Engine) -> HashMap<&str, &WorkflowRecord> {
    let mut m: HashMap<&str, &WorkflowRecord> = HashMap::new();
    for r in engine.workflows() {
        let e = m.entry(r.item.as_str()).or_insert(r);
        if (r.created_at, &r.workflow_id) > (e.created_at, &e.workflow_id) {
            *e = r;
        }
    }
    m
}

/// Agent types a workflow needs right after its resume (its first ready
/// tasks), or in flight if none.
fn first_wave_agents(
    rec: &WorkflowRecord,
    policy: InFlightPolicy,
    now: DateTime<Utc>,
) -> Vec<String> {
    let mut probe = rec.clone();
    let plan = probe.resume_plan(policy, now);
    if probe.resume(&plan, now).is_err() {
        return Vec::new();
    }
    let set: BTreeSet<String> = probe
        .tasks
        .values()
        .filter(|t| t.state == TaskRunState::Ready)
        .map(|t| t.agent_type.clone())
        .collect();
    set.into_iter().collect()
}

/// Agent types a running workflow currently occupies or waits for.
fn busy_agents(rec: &WorkflowRecord) -> BTreeSet<String> {
    rec.tasks
        .values()
        .filter(|t| {
            matches!(
                t.state,
                TaskRunState::Ready | TaskRunState::Dispatched | TaskRunState::Running
            )
        })
        .map(|t| t.agent_type.clone())
        .collect()
}

/// Batches held by the leader.
pub struct BatchManager {
    kv: kv::Store,
    batches: BTreeMap<String, (BatchRecord, Option<u64>)>,
    dirty: BTreeSet<String>,
    default_concurrency: u32,
    ratio: f64,
}

impl BatchManager {
    /// Over the `batches` bucket.
    pub fn new(kv: kv::Store, default_concurrency: u32, ratio: f64) -> Self {
        BatchManager {
            kv,
            batches: BTreeMap::new(),
            dirty: BTreeSet::new(),
            default_concurrency: default_concurrency.max(1),
            ratio,
        }
    }

    /// Loads every stored batch.
    pub async fn load(&mut self) -> Result<usize, String> {
        let mut keys = self.kv.keys().await.map_err(|e| format!("batches: {e}"))?;
        let mut ids = Vec::new();
        while let Some(k) = keys.next().await {
            ids.push(k.map_err(|e| format!("batches: {e}"))?);
        }
        for id in ids {
            match self.kv.entry(&id).await {
                Ok(Some(e)) if e.operation == kv::Operation::Put => {
                    match serde_json::from_slice::<BatchRecord>(&e.value) {
                        Ok(b) => {
                            self.batches.insert(id, (b, Some(e.revision)));
                        }
                        Err(err) => {
                            tracing::error!(batch_id = %id, error = %err, "skipping unreadable batch")
                        }
                    }
                }
                Ok(_) => {}
                Err(e) => return Err(format!("batch {id}: {e}")),
            }
        }
        Ok(self.batches.len())
    }

    /// Writes changed batches (revision-checked).
    pub async fn persist(&mut self) {
        let ids: Vec<String> = std::mem::take(&mut self.dirty).into_iter().collect();
        for id in ids {
            let Some((rec, rev)) = self.batches.get(&id) else {
                continue;
            };
            let body = Bytes::from(serde_json::to_vec(rec).expect("batch serialises"));
            let r = match rev {
                Some(rev) => self
                    .kv
                    .update(&id, body, *rev)
                    .await
                    .map_err(|e| e.to_string()),
                None => self.kv.create(&id, body).await.map_err(|e| e.to_string()),
            };
            match r {
                Ok(new_rev) => {
                    if let Some(e) = self.batches.get_mut(&id) {
                        e.1 = Some(new_rev);
                    }
                }
                Err(e) => {
                    tracing::warn!(batch_id = %id, error = %e, "cannot store batch; will retry");
                    self.dirty.insert(id);
                }
            }
        }
    }

    /// `{batch_id, state, total, paused, resumed, failed, skipped, …}`.
    pub fn status(&self, batch_id: &str) -> Result<Value, ApiError> {
        let (b, _) = self
            .batches
            .get(batch_id)
            .ok_or_else(|| ApiError::not_found(format!("no batch `{batch_id}`")))?;
        Ok(status_json(b))
    }

    /// A batch pause (API, `batch_pause_request`).
    pub fn pause(
        &mut self,
        args: BatchPauseArgs,
        engine: &mut Engine,
        dirty: &mut HashSet<String>,
        now: DateTime<Utc>,
    ) -> Result<Value, ApiError> {
        if args.items.is_empty() && args.workflow_ids.is_empty() {
            return Err(ApiError::bad_request(
                "name the `items` or `workflow_ids` to pause",
            ));
        }
        if args.max_concurrency == Some(0) {
            return Err(ApiError::bad_request("max_concurrency must be at least 1"));
        }
        let batch_id = match args.batch_id {
            Some(id) => {
                valid_id(&id)?;
                id
            }
            None => uuid::Uuid::now_v7().to_string(),
        };
        let reason = args
            .reason
            .unwrap_or_else(|| "batch pause requested".to_string());
        let targets = resolve_targets(&args.items, &args.workflow_ids, engine);
        self.add_and_pause(
            &batch_id,
            reason,
            args.correlation_id,
            args.max_concurrency.unwrap_or(self.default_concurrency),
            "batch",
            targets,
            engine,
            dirty,
            now,
        )?;
        self.status(&batch_id)
    }

    /// A correlator's `batch_trigger`: one batch per correlation id; later
    /// triggers add items. Only running or pending workflows are paused;
    /// items already pausing or paused are linked as paused.
    pub fn trigger(
        &mut self,
        t: BatchTrigger,
        engine: &mut Engine,
        dirty: &mut HashSet<String>,
        now: DateTime<Utc>,
    ) -> Result<Value, ApiError> {
        let batch_id = match &t.batch_id {
            Some(id) => {
                valid_id(id)?;
                id.clone()
            }
            None => batch_id_for_correlation(&t.correlation_id),
        };
        let targets = resolve_targets(&t.stock_ids, &[], engine);
        let reason = if t.root_cause.trim().is_empty() {
            format!("correlated failures ({})", t.correlation_id)
        } else {
            t.root_cause.clone()
        };
        self.add_and_pause(
            &batch_id,
            reason,
            Some(t.correlation_id.clone()),
            self.default_concurrency,
            "correlator",
            targets,
            engine,
            dirty,
            now,
        )?;
        self.status(&batch_id)
    }

    #[allow(clippy::too_many_arguments)]
    fn add_and_pause(
        &mut self,
        batch_id: &str,
        reason: String,
        correlation_id: Option<String>,
        max_concurrency: u32,
        trigger_source: &str,
        targets: Vec<(String, Option<String>)>,
        engine: &mut Engine,
        dirty: &mut HashSet<String>,
        now: DateTime<Utc>,
    ) -> Result<(), ApiError> {
        let ratio = self.ratio;
        let entry = self.batches.entry(batch_id.to_string()).or_insert_with(|| {
            (
                BatchRecord {
                    schema_version: BATCH_SCHEMA_VERSION,
                    batch_id: batch_id.to_string(),
                    reason: reason.clone(),
                    correlation_id: correlation_id.clone(),
                    state: BatchState::Pausing,
                    max_concurrency: max_concurrency.max(1),
                    concurrency_limit: max_concurrency.max(1),
                    in_flight: InFlightPolicy::Wait,
                    items: Vec::new(),
                    stop_reason: None,
                    created_at: now,
                    updated_at: now,
                },
                None,
            )
        });
        let b = &mut entry.0;
        if b.state == BatchState::Stopped {
            return Err(ApiError::new(
                "batch_stopped",
                format!(
                    "batch {batch_id} was stopped ({}); start a new batch",
                    b.stop_reason.clone().unwrap_or_default()
                ),
            ));
        }
        let known: BTreeSet<String> = b.items.iter().map(|i| i.item.clone()).collect();
        let new: Vec<(String, Option<String>)> = targets
            .into_iter()
            .filter(|(item, _)| !known.contains(item))
            .collect();
        let spec = PauseSpec {
            reason: b.reason.clone(),
            trigger_source: trigger_source.to_string(),
            batch_id: Some(batch_id.to_string()),
            correlation_id: b.correlation_id.clone(),
            ..PauseSpec::default()
        };
        for wave in new.chunks(b.max_concurrency.max(1) as usize) {
            if b.pause_should_stop(ratio) {
                b.state = BatchState::Stopped;
                b.stop_reason = Some(format!(
                    "more than {:.0} % of the pause operations failed",
                    ratio * 100.0
                ));
                for (item, wf) in wave {
                    b.items.push(BatchItem {
                        item: item.clone(),
                        workflow_id: wf.clone(),
                        state: ItemState::Skipped,
                        error: Some("not paused: the batch stopped".into()),
                        paused_at: None,
                        gate_timeout: false,
                        resumed_from_pause: None,
                    });
                }
                continue;
            }
            for (item, wf) in wave {
                let mut bi = BatchItem {
                    item: item.clone(),
                    workflow_id: wf.clone(),
                    state: ItemState::Failed,
                    error: None,
                    paused_at: None,
                    gate_timeout: false,
                    resumed_from_pause: None,
                };
                match wf {
                    None => bi.error = Some(format!("no workflow for item `{item}`")),
                    Some(id) => match engine.pause(id, spec.clone(), now) {
                        None => bi.error = Some(format!("workflow {id} is not held")),
                        Some(Err(e)) if e.from.is_terminal() => {
                            bi.state = ItemState::Skipped;
                            bi.error = Some(format!("nothing to pause: workflow {}", e.from));
                        }
                        Some(Err(e)) => bi.error = Some(e.to_string()),
                        Some(Ok(o)) => {
                            dirty.insert(id.clone());
                            let rec = engine.get(id);
                            bi.state = if rec.is_some_and(|r| r.state == WorkflowState::Paused) {
                                ItemState::Paused
                            } else {
                                ItemState::Pausing
                            };
                            bi.paused_at = rec.and_then(|r| r.paused_at());
                            bi.gate_timeout = rec
                                .and_then(|r| r.pause.as_ref())
                                .is_some_and(|p| p.is_gate_timeout());
                            if o == PauseOutcome::AlreadyPaused {
                                tracing::info!(workflow_id = %id, batch_id, "already paused; linked to the batch");
                            }
                        }
                    },
                }
                b.items.push(bi);
            }
        }
        if b.state != BatchState::Stopped && b.pause_should_stop(ratio) {
            b.state = BatchState::Stopped;
            b.stop_reason = Some(format!(
                "more than {:.0} % of the pause operations failed",
                ratio * 100.0
            ));
        }
        b.refresh_state();
        b.updated_at = now;
        self.dirty.insert(batch_id.to_string());
        Ok(())
    }

    /// A batch resume: by id, or by items (a new batch of their latest
    /// paused workflows). Returns the batch status; the resumes themselves
    /// happen in [`BatchManager::drive`].
    pub fn resume(
        &mut self,
        args: BatchResumeArgs,
        engine: &Engine,
        now: DateTime<Utc>,
    ) -> Result<String, ApiError> {
        if args.concurrency_limit == Some(0) {
            return Err(ApiError::bad_request(
                "concurrency_limit must be at least 1",
            ));
        }
        let limit = args.concurrency_limit.unwrap_or(self.default_concurrency);
        let batch_id = match (&args.batch_id, args.items.is_empty()) {
            (Some(id), _) => {
                if !self.batches.contains_key(id) {
                    return Err(ApiError::not_found(format!("no batch `{id}`")));
                }
                id.clone()
            }
            (None, false) => {
                let id = format!("resume-{}", uuid::Uuid::now_v7());
                let latest = latest_by_item(engine);
                let items = args
                    .items
                    .iter()
                    .map(|item| {
                        let rec = latest.get(item.as_str());
                        let (state, error) = match rec.map(|r| r.state) {
                            None => (
                                ItemState::Failed,
                                Some(format!("no workflow for item `{item}`")),
                            ),
                            Some(WorkflowState::Paused) => (ItemState::Paused, None),
                            Some(WorkflowState::Pausing) => (ItemState::Pausing, None),
                            Some(s) => (
                                ItemState::Skipped,
                                Some(format!("not paused: workflow {s}")),
                            ),
                        };
                        BatchItem {
                            item: item.clone(),
                            workflow_id: rec.map(|r| r.workflow_id.clone()),
                            state,
                            error,
                            paused_at: rec.and_then(|r| r.paused_at()),
                            gate_timeout: rec
                                .and_then(|r| r.pause.as_ref())
                                .is_some_and(|p| p.is_gate_timeout()),
                            resumed_from_pause: None,
                        }
                    })
                    .collect();
                self.batches.insert(
                    id.clone(),
                    (
                        BatchRecord {
                            schema_version: BATCH_SCHEMA_VERSION,
                            batch_id: id.clone(),
                            reason: "resume requested".into(),
                            correlation_id: None,
                            state: BatchState::Paused,
                            max_concurrency: limit,
                            concurrency_limit: limit,
                            in_flight: args.in_flight,
                            items,
                            stop_reason: None,
                            created_at: now,
                            updated_at: now,
                        },
                        None,
                    ),
                );
                id
            }
            (None, true) => {
                return Err(ApiError::bad_request(
                    "name a `batch_id` or the `items` to resume",
                ))
            }
        };
        let b = &mut self.batches.get_mut(&batch_id).expect("present").0;
        if b.state == BatchState::Stopped {
            // A person resuming a stopped batch takes responsibility again.
            b.state = BatchState::Paused;
            b.stop_reason = None;
            for i in b.items.iter_mut() {
                if i.state == ItemState::ResumeFailed {
                    i.state = ItemState::Paused;
                }
            }
        }
        b.concurrency_limit = limit;
        b.in_flight = args.in_flight;
        for i in b.items.iter_mut() {
            if matches!(i.state, ItemState::Paused | ItemState::Pausing) {
                i.state = ItemState::ResumeQueued;
            }
        }
        b.refresh_state();
        b.updated_at = now;
        self.dirty.insert(batch_id.clone());
        Ok(batch_id)
    }

    /// Follows the workflows of every active batch and starts the resumes
    /// that are due. Returns the workflows resumed.
    pub fn drive(
        &mut self,
        engine: &mut Engine,
        capacity: &HashMap<String, usize>,
        dirty: &mut HashSet<String>,
        now: DateTime<Utc>,
    ) -> Vec<String> {
        let mut resumed = Vec::new();
        let ratio = self.ratio;
        // Agent types held by resumed-and-unfinished workflows of any batch.
        let mut active: HashMap<String, usize> = HashMap::new();
        for (b, _) in self.batches.values() {
            for i in b.items.iter().filter(|i| i.state == ItemState::Resuming) {
                if let Some(r) = i.workflow_id.as_deref().and_then(|id| engine.get(id)) {
                    for a in busy_agents(r) {
                        *active.entry(a).or_default() += 1;
                    }
                }
            }
        }
        for (id, (b, _)) in self.batches.iter_mut() {
            if matches!(b.state, BatchState::Completed) {
                continue;
            }
            let before = b.clone();
            follow(b, engine);
            if b.state == BatchState::Resuming && b.resume_should_stop(ratio) {
                b.state = BatchState::Stopped;
                b.stop_reason = Some(format!(
                    "more than {:.0} % of the resumes failed",
                    ratio * 100.0
                ));
                for i in b.items.iter_mut() {
                    if i.state == ItemState::ResumeQueued {
                        i.state = ItemState::Paused;
                    }
                }
            }
            if b.state != BatchState::Stopped {
                let mut running = b
                    .items
                    .iter()
                    .filter(|i| i.state == ItemState::Resuming)
                    .count();
                for idx in b.resume_order() {
                    if running >= b.concurrency_limit as usize {
                        break;
                    }
                    let Some(wf) = b.items[idx].workflow_id.clone() else {
                        continue;
                    };
                    let Some(rec) = engine.get(&wf) else {
                        b.items[idx].state = ItemState::ResumeFailed;
                        b.items[idx].error = Some(format!("workflow {wf} is not held"));
                        continue;
                    };
                    match rec.state {
                        WorkflowState::Pausing => break, // keep the order: wait for it
                        WorkflowState::Paused => {}
                        s => {
                            // Resumed by someone else, or finished meanwhile.
                            b.items[idx].state = if s == WorkflowState::Completed {
                                ItemState::Resumed
                            } else {
                                ItemState::Resuming
                            };
                            continue;
                        }
                    }
                    let needs = first_wave_agents(rec, b.in_flight, now);
                    if let Some(full) = capacity_blocker(&needs, &active, capacity) {
                        tracing::debug!(batch_id = %id, workflow_id = %wf, agent_type = %full, "resume waits for capacity");
                        break;
                    }
                    let seq = rec.pause.as_ref().map(|p| p.seq);
                    let plan = rec.resume_plan(b.in_flight, now);
                    match engine.resume(&wf, &plan, now) {
                        Some(Ok(_)) => {
                            b.items[idx].state = ItemState::Resuming;
                            b.items[idx].resumed_from_pause = seq;
                            dirty.insert(wf.clone());
                            resumed.push(wf.clone());
                            running += 1;
                            for a in needs {
                                *active.entry(a).or_default() += 1;
                            }
                        }
                        Some(Err(e)) => {
                            b.items[idx].state = ItemState::ResumeFailed;
                            b.items[idx].error = Some(e.to_string());
                        }
                        None => {}
                    }
                }
            }
            b.refresh_state();
            if *b != before {
                b.updated_at = now;
                self.dirty.insert(id.clone());
            }
        }
        resumed
    }
}

/// Updates items from their workflows.
fn follow(b: &mut BatchRecord, engine: &Engine) {
    for i in b.items.iter_mut() {
        let Some(rec) = i.workflow_id.as_deref().and_then(|id| engine.get(id)) else {
            continue;
        };
        match (i.state, rec.state) {
            (ItemState::Pausing, WorkflowState::Paused) => {
                i.state = ItemState::Paused;
                i.paused_at = rec.paused_at();
            }
            (ItemState::Pausing, WorkflowState::Completed) => {
                i.state = ItemState::Skipped;
                i.error = Some("completed before it paused".into());
            }
            (ItemState::ResumeQueued, WorkflowState::Paused) => {
                i.paused_at = rec.paused_at();
            }
            (ItemState::Resuming, WorkflowState::Completed) => i.state = ItemState::Resumed,
            (ItemState::Resuming, WorkflowState::Failed) => {
                i.state = ItemState::ResumeFailed;
                i.error = rec.failure.clone();
            }
            (ItemState::Resuming, WorkflowState::Pausing | WorkflowState::Paused) => {
                let again = rec
                    .pause
                    .as_ref()
                    .is_some_and(|p| Some(p.seq) != i.resumed_from_pause);
                if again {
                    i.state = ItemState::ResumeFailed;
                    i.error = Some(format!(
                        "paused again: {}",
                        rec.pause.as_ref().map(|p| p.reason.as_str()).unwrap_or("")
                    ));
                }
            }
            _ => {}
        }
    }
}

fn resolve_targets(
    items: &[String],
    workflow_ids: &[String],
    engine: &Engine,
) -> Vec<(String, Option<String>)> {
    let latest = latest_by_item(engine);
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    let mut seen = BTreeSet::new();
    for item in items {
        if seen.insert(item.clone()) {
            out.push((
                item.clone(),
                latest.get(item.as_str()).map(|r| r.workflow_id.clone()),
            ));
        }
    }
    for id in workflow_ids {
        let item = engine
            .get(id)
            .map(|r| r.item.clone())
            .unwrap_or_else(|| id.clone());
        if seen.insert(item.clone()) {
            out.push((item, engine.get(id).map(|r| r.workflow_id.clone())));
        }
    }
    out
}

fn status_json(b: &BatchRecord) -> Value {
    let c = b.counts();
    json!({
        "batch_id": b.batch_id,
        "state": b.state,
        "reason": b.reason,
        "correlation_id": b.correlation_id,
        "total": c.total,
        "paused": c.paused,
        "resumed": c.resumed,
        "failed": c.failed,
        "skipped": c.skipped,
        "max_concurrency": b.max_concurrency,
        "concurrency_limit": b.concurrency_limit,
        "stop_reason": b.stop_reason,
        "items": b.items,
        "created_at": b.created_at,
        "updated_at": b.updated_at,
    })
}
