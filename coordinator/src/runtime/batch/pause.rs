//! Batch pauses: by the API (`batch_pause`) and by the correlator's
//! `batch_trigger` (one batch per correlation), in waves of
//! `max_concurrency`, stopping when too many pauses of a wave fail.

use std::collections::{BTreeSet, HashSet};

use caucus_shared::api::coordinator::control::{BatchStatusReply, CODE_BATCH_STOPPED};
use caucus_shared::messages::BatchTrigger;
use caucus_shared::nats::ApiError;
use chrono::{DateTime, Utc};

use super::logic::{
    paused_again, BatchItem, BatchRecord, BatchState, Elsewhere, ItemState, BATCH_SCHEMA_VERSION,
};
use super::{latest_by_item, BatchManager, BatchPauseArgs};
use crate::engine::Engine;
use crate::workflow::{InFlightPolicy, PauseOutcome, PauseSpec, WorkflowState};

/// A batch id is 1..=200 of `A-Z a-z 0-9 - _ =` (never `.`: the parts of
/// a batch spanning partitions are stored as `<id>.p<k>`).
pub fn valid_id(id: &str) -> Result<(), ApiError> {
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

/// The reason a correlator's trigger gives its batch.
pub fn trigger_reason(t: &BatchTrigger) -> String {
    if t.root_cause.trim().is_empty() {
        format!("correlated failures ({})", t.correlation_id)
    } else {
        t.root_cause.clone()
    }
}

impl BatchManager {
    /// A batch pause (API, `batch_pause_request`).
    pub fn pause(
        &mut self,
        args: BatchPauseArgs,
        engine: &mut Engine,
        dirty: &mut HashSet<String>,
        now: DateTime<Utc>,
    ) -> Result<BatchStatusReply, ApiError> {
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
            Elsewhere::default(),
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
    ) -> Result<BatchStatusReply, ApiError> {
        let batch_id = match &t.batch_id {
            Some(id) => {
                valid_id(id)?;
                id.clone()
            }
            None => batch_id_for_correlation(&t.correlation_id),
        };
        let targets = resolve_targets(&t.stock_ids, &[], engine);
        let reason = trigger_reason(&t);
        self.add_and_pause(
            &batch_id,
            reason,
            Some(t.correlation_id.clone()),
            self.default_concurrency,
            "correlator",
            targets,
            Elsewhere::default(),
            engine,
            dirty,
            now,
        )?;
        self.status(&batch_id)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn add_and_pause(
        &mut self,
        batch_id: &str,
        reason: String,
        correlation_id: Option<String>,
        max_concurrency: u32,
        trigger_source: &str,
        targets: Vec<(String, Option<String>)>,
        elsewhere: Elsewhere,
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
                CODE_BATCH_STOPPED,
                format!(
                    "batch {batch_id} was stopped ({}); start a new batch",
                    b.stop_reason.clone().unwrap_or_default()
                ),
            ));
        }
        // A person pausing a batch again (the console's "Pause batch" on a
        // correlation whose batch was resumed) means it: items resumed
        // since, or whose pause failed, are paused once more. The
        // correlator's repeated triggers only add items it has not named.
        if trigger_source != "correlator" {
            let again: BTreeSet<&str> = targets.iter().map(|(i, _)| i.as_str()).collect();
            b.items
                .retain(|i| !(again.contains(i.item.as_str()) && paused_again(i.state)));
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
            if b.pause_should_stop(ratio, elsewhere) {
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
        if b.state != BatchState::Stopped && b.pause_should_stop(ratio, elsewhere) {
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
}

/// Each item's latest held workflow and each named workflow, by item, once.
pub(super) fn resolve_targets(
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
