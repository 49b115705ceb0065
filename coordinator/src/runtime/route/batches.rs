//! Batches with several partitions: a batch's workflows may be in every
//! partition, so each partition's owner holds its part of the batch (same
//! batch id) and runs the logic of one partition on it, while the
//! concurrency limit stays one number over the parts (running slots in
//! Redis, `batch/spread.rs`).
//!
//! - `batch_pause` and the correlator's `batch_trigger`: the items are
//!   resolved to their latest workflow over every partition (as `pause`
//!   by item does), and each owner is sent its workflows (the internal
//!   operation `batch_part_pause`); items no partition holds a workflow
//!   of go to partition 0's part, where they fail as with one partition.
//!   The reply is the merged status.
//! - `batch_resume` of a batch: every partition's part is resumed; of
//!   items: a new batch, split as a pause is (`batch_part_resume`).
//! - `batch_status`: every part, merged; `not_found` only when no
//!   partition holds a part.

use std::collections::{BTreeMap, BTreeSet};

use caucus_shared::api::coordinator::control::{
    BatchPauseRequest, BatchResume, BatchResumeRequest, BatchState, BatchStatus, BatchStatusReply,
    BatchStatusRequest, ItemState, CODE_BATCH_STOPPED,
};
use caucus_shared::api::{Operation, CODE_NOT_FOUND};
use caucus_shared::messages::BatchTrigger;
use caucus_shared::nats::ApiError;

use super::{by_item, Router};
use crate::runtime::batch::logic::paused_again;
use crate::runtime::batch::{
    batch_id_for_correlation, trigger_reason, valid_id, PartPause, PartResume,
};
use crate::runtime::control::{ControlOp, ControlReply};
use crate::runtime::control_call::call;

/// The internal operation each owner answers: its share of a batch pause
/// or trigger (never in the catalog: only coordinators send it).
pub struct BatchPartPause;

impl Operation for BatchPartPause {
    const SERVICE: &'static str = "coordinator";
    const NAME: &'static str = "batch_part_pause";
    const SUMMARY: &'static str = "a partition's share of a batch pause (internal)";
    const ERRORS: &'static [&'static str] = &[];
    type Request = PartPause;
    type Reply = BatchStatusReply;
}

/// The internal operation each owner answers: its share of a resume of
/// items (never in the catalog).
pub struct BatchPartResume;

impl Operation for BatchPartResume {
    const SERVICE: &'static str = "coordinator";
    const NAME: &'static str = "batch_part_resume";
    const SUMMARY: &'static str = "a partition's share of a batch resume (internal)";
    const ERRORS: &'static [&'static str] = &[];
    type Request = PartResume;
    type Reply = BatchStatusReply;
}

/// Makes the internal operations answerable by this instance's schedulers.
pub fn register(router: &Router) {
    router.register::<BatchPartPause, _, _>(|h, p| async move {
        call::<BatchPartPause>(ControlOp::PartPause(p), ControlReply::into_batch, || Ok(h)).await
    });
    router.register::<BatchPartResume, _, _>(|h, p| async move {
        call::<BatchPartResume>(ControlOp::PartResume(p), ControlReply::into_batch, || Ok(h)).await
    });
}

/// Each item (once, in order) with its latest workflow over every
/// partition, or none.
async fn resolve(
    router: &Router,
    items: &[String],
) -> Result<Vec<(String, Option<String>)>, ApiError> {
    let mut seen = BTreeSet::new();
    let items: Vec<String> = items.iter().filter(|i| seen.insert(*i)).cloned().collect();
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let latest = by_item::latest_of_each(router, &items).await?;
    Ok(items.into_iter().zip(latest).collect())
}

/// `targets` by owning partition; those without a workflow go to
/// partition 0.
fn by_partition<T>(
    router: &Router,
    targets: Vec<(String, Option<String>)>,
    mut add: impl FnMut(&mut T, String, Option<String>),
) -> BTreeMap<u32, T>
where
    T: Default,
{
    let mut parts: BTreeMap<u32, T> = BTreeMap::new();
    for (item, wf) in targets {
        let p = wf.as_deref().map_or(0, |w| router.partition_of(w));
        add(parts.entry(p).or_default(), item, wf);
    }
    parts
}

/// Items with their latest workflow (none: no partition holds one).
type Targets = Vec<(String, Option<String>)>;

/// What a pause adds to a batch that may exist (`existing`), as one
/// partition decides it over the whole batch: an item already in it is
/// not added again, unless a person pauses it again after it resumed or
/// failed; its old entry then goes from the part that holds it (returned
/// by partition) when the item's latest workflow is another partition's.
fn plan(
    existing: Option<&BatchStatusReply>,
    targets: Targets,
    correlator: bool,
    partition_of: impl Fn(Option<&str>) -> u32,
) -> (Targets, BTreeMap<u32, Vec<String>>) {
    let Some(b) = existing else {
        return (targets, BTreeMap::new());
    };
    let mut kept = Vec::new();
    let mut forget: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for (item, wf) in targets {
        let old: Vec<_> = b.items.iter().filter(|i| i.item == item).collect();
        if old.is_empty() {
            kept.push((item, wf));
            continue;
        }
        if correlator || old.iter().any(|i| !paused_again(i.state)) {
            continue;
        }
        let to = partition_of(wf.as_deref());
        for i in old {
            let from = partition_of(i.workflow_id.as_deref());
            if from != to {
                forget.entry(from).or_default().push(item.clone());
            }
        }
        kept.push((item, wf));
    }
    (kept, forget)
}

/// Gives each part what its failure-ratio check counts besides its own
/// items (`PartPause::elsewhere`): the batch's entries in the other parts,
/// less those this request pauses again (`renewed` items: their old
/// entries go), and what the other parts pause now (a workflow as paused,
/// an item no partition holds one of as failed).
fn count_elsewhere(
    parts: &mut BTreeMap<u32, PartPause>,
    existing: Option<&BatchStatusReply>,
    renewed: &BTreeSet<String>,
    part_of: impl Fn(Option<&str>) -> u32,
) {
    let mut counted: Vec<(u32, ItemState)> = existing
        .iter()
        .flat_map(|b| &b.items)
        .filter(|i| !renewed.contains(&i.item))
        .map(|i| (part_of(i.workflow_id.as_deref()), i.state))
        .collect();
    for (p, part) in parts.iter() {
        counted.extend(part.workflow_ids.iter().map(|_| (*p, ItemState::Paused)));
        counted.extend(part.items.iter().map(|_| (*p, ItemState::Failed)));
    }
    for (p, part) in parts.iter_mut() {
        for (q, state) in &counted {
            if q != p {
                part.elsewhere.add(*state);
            }
        }
    }
}

/// Runs every part's pause, then answers the whole batch's status.
async fn pause_parts(
    router: &Router,
    batch_id: &str,
    template: PartPause,
    targets: Vec<(String, Option<String>)>,
    workflow_ids: &[String],
) -> Result<BatchStatusReply, ApiError> {
    let request = BatchStatusRequest {
        batch_id: batch_id.to_string(),
    };
    let existing = match status(router, request.clone()).await {
        Ok(b) => Some(b),
        Err(e) if e.code == CODE_NOT_FOUND => None,
        Err(e) => return Err(e),
    };
    if let Some(b) = existing.as_ref().filter(|b| b.state == BatchState::Stopped) {
        return Err(ApiError::new(
            CODE_BATCH_STOPPED,
            format!(
                "batch {batch_id} was stopped ({}); start a new batch",
                b.stop_reason.clone().unwrap_or_default()
            ),
        ));
    }
    let part_of = |wf: Option<&str>| wf.map_or(0, |w| router.partition_of(w));
    let (targets, forget) = plan(existing.as_ref(), targets, template.correlator, part_of);
    let renewed: BTreeSet<String> = targets.iter().map(|(item, _)| item.clone()).collect();
    let mut parts = by_partition::<PartPause>(router, targets, |p, item, wf| match wf {
        Some(w) => p.workflow_ids.push(w),
        None => p.items.push(item),
    });
    for (p, items) in forget {
        parts.entry(p).or_default().forget = items;
    }
    for w in workflow_ids {
        let part = parts.entry(router.partition_of(w)).or_default();
        if !part.workflow_ids.contains(w) {
            part.workflow_ids.push(w.clone());
        }
    }
    count_elsewhere(&mut parts, existing.as_ref(), &renewed, part_of);
    let calls = parts.into_iter().map(|(p, mut part)| {
        let t = template.clone();
        part.batch_id = t.batch_id;
        part.reason = t.reason;
        part.correlation_id = t.correlation_id;
        part.max_concurrency = t.max_concurrency;
        part.correlator = t.correlator;
        async move { router.call::<BatchPartPause>(p, &part).await }
    });
    for r in futures::future::join_all(calls).await {
        r?;
    }
    status(router, request).await
}

/// `batch_pause` with several partitions.
pub async fn pause(router: &Router, req: BatchPauseRequest) -> Result<BatchStatusReply, ApiError> {
    if req.items.is_empty() && req.workflow_ids.is_empty() {
        return Err(ApiError::bad_request(
            "name the `items` or `workflow_ids` to pause",
        ));
    }
    if req.max_concurrency == Some(0) {
        return Err(ApiError::bad_request("max_concurrency must be at least 1"));
    }
    let batch_id = match req.batch_id {
        Some(id) => {
            valid_id(&id)?;
            id
        }
        None => uuid::Uuid::now_v7().to_string(),
    };
    let targets = resolve(router, &req.items).await?;
    let template = PartPause {
        batch_id: batch_id.clone(),
        reason: req
            .reason
            .unwrap_or_else(|| "batch pause requested".to_string()),
        correlation_id: req.correlation_id,
        max_concurrency: req.max_concurrency,
        correlator: false,
        ..PartPause::default()
    };
    pause_parts(router, &batch_id, template, targets, &req.workflow_ids).await
}

/// A correlator's `batch_trigger` with several partitions: one batch per
/// correlation, as with one.
pub async fn trigger(router: &Router, t: BatchTrigger) -> Result<BatchStatusReply, ApiError> {
    let batch_id = match &t.batch_id {
        Some(id) => {
            valid_id(id)?;
            id.clone()
        }
        None => batch_id_for_correlation(&t.correlation_id),
    };
    let targets = resolve(router, &t.stock_ids).await?;
    let template = PartPause {
        batch_id: batch_id.clone(),
        reason: trigger_reason(&t),
        correlation_id: Some(t.correlation_id.clone()),
        max_concurrency: None,
        correlator: true,
        ..PartPause::default()
    };
    pause_parts(router, &batch_id, template, targets, &[]).await
}

/// `batch_resume` with several partitions.
pub async fn resume(
    router: &Router,
    req: BatchResumeRequest,
) -> Result<BatchStatusReply, ApiError> {
    if req.concurrency_limit == Some(0) {
        return Err(ApiError::bad_request(
            "concurrency_limit must be at least 1",
        ));
    }
    match (&req.batch_id, req.items.is_empty()) {
        (Some(id), _) => {
            let parts = every_part::<BatchResume>(router, &req).await?;
            merge(parts).ok_or_else(|| ApiError::not_found(format!("no batch `{id}`")))
        }
        (None, false) => {
            let batch_id = format!("resume-{}", uuid::Uuid::now_v7());
            let targets = resolve(router, &req.items).await?;
            let parts = by_partition::<PartResume>(router, targets, |p, item, wf| {
                p.targets.push((item, wf))
            });
            let calls = parts.into_iter().map(|(p, mut part)| {
                part.batch_id = batch_id.clone();
                part.concurrency_limit = req.concurrency_limit;
                part.in_flight = req.in_flight;
                async move { router.call::<BatchPartResume>(p, &part).await }
            });
            let parts = futures::future::join_all(calls)
                .await
                .into_iter()
                .collect::<Result<Vec<_>, _>>()?;
            merge(parts).ok_or_else(|| ApiError::internal("a resume of items made no part"))
        }
        (None, true) => Err(ApiError::bad_request(
            "name a `batch_id` or the `items` to resume",
        )),
    }
}

/// `batch_status` with several partitions: every part, merged.
pub async fn status(
    router: &Router,
    req: BatchStatusRequest,
) -> Result<BatchStatusReply, ApiError> {
    let parts = every_part::<BatchStatus>(router, &req).await?;
    merge(parts).ok_or_else(|| ApiError::not_found(format!("no batch `{}`", req.batch_id)))
}

/// `O` on every partition, in partition order; a partition without a part
/// of the batch (`not_found`) is left out, any other error fails all.
async fn every_part<O: Operation>(
    router: &Router,
    req: &O::Request,
) -> Result<Vec<O::Reply>, ApiError> {
    let calls = (0..router.schedulers().count()).map(|p| router.call::<O>(p, req));
    let mut parts = Vec::new();
    for r in futures::future::join_all(calls).await {
        match r {
            Ok(reply) => parts.push(reply),
            Err(e) if e.code == CODE_NOT_FOUND => {}
            Err(e) => return Err(e),
        }
    }
    Ok(parts)
}

/// One batch's status from its parts' (in partition order): counts
/// summed, items in partition order, the state of the batch as a whole
/// (stopped when a part stopped, else resuming, pausing, paused while a
/// part is, else completed). `None` without parts.
pub fn merge(parts: Vec<BatchStatusReply>) -> Option<BatchStatusReply> {
    let mut parts = parts.into_iter();
    let mut all = parts.next()?;
    let mut states = vec![all.state];
    for p in parts {
        states.push(p.state);
        all.total += p.total;
        all.paused += p.paused;
        all.resumed += p.resumed;
        all.failed += p.failed;
        all.skipped += p.skipped;
        all.max_concurrency = all.max_concurrency.max(p.max_concurrency);
        all.concurrency_limit = all.concurrency_limit.max(p.concurrency_limit);
        all.correlation_id = all.correlation_id.or(p.correlation_id);
        all.stop_reason = all.stop_reason.or(p.stop_reason);
        all.created_at = all.created_at.min(p.created_at);
        all.updated_at = all.updated_at.max(p.updated_at);
        all.items.extend(p.items);
    }
    let order = [
        BatchState::Stopped,
        BatchState::Resuming,
        BatchState::Pausing,
        BatchState::Paused,
    ];
    all.state = order
        .into_iter()
        .find(|s| states.contains(s))
        .unwrap_or(BatchState::Completed);
    Some(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::batch::logic::Elsewhere;
    use caucus_shared::api::coordinator::control::{BatchItem, ItemState};
    use chrono::{TimeZone, Utc};

    fn part(state: BatchState, items: &[(&str, ItemState)], minute: u32) -> BatchStatusReply {
        let at = Utc.with_ymd_and_hms(2026, 11, 26, 12, minute, 0).unwrap();
        let items: Vec<BatchItem> = items
            .iter()
            .map(|(i, s)| BatchItem {
                item: i.to_string(),
                workflow_id: Some(format!("wf-{i}")),
                state: *s,
                error: None,
                paused_at: None,
                gate_timeout: false,
                resumed_from_pause: None,
            })
            .collect();
        let count = |f: fn(&ItemState) -> bool| items.iter().filter(|i| f(&i.state)).count();
        BatchStatusReply {
            batch_id: "b".into(),
            state,
            reason: "r".into(),
            correlation_id: None,
            total: items.len(),
            paused: count(|s| matches!(s, ItemState::Paused | ItemState::ResumeQueued)),
            resumed: count(|s| matches!(s, ItemState::Resuming | ItemState::Resumed)),
            failed: count(|s| matches!(s, ItemState::Failed)),
            skipped: 0,
            max_concurrency: 2,
            concurrency_limit: 2,
            stop_reason: None,
            items,
            created_at: at,
            updated_at: at,
        }
    }

    #[test]
    fn parts_merge_into_one_batch() {
        assert!(merge(vec![]).is_none());
        let m = merge(vec![
            part(BatchState::Completed, &[("A", ItemState::Resumed)], 5),
            part(
                BatchState::Resuming,
                &[("B", ItemState::ResumeQueued), ("C", ItemState::Resuming)],
                1,
            ),
            part(BatchState::Paused, &[("D", ItemState::Failed)], 9),
        ])
        .expect("parts");
        assert_eq!(m.state, BatchState::Resuming, "a part still resuming");
        assert_eq!(
            (m.total, m.paused, m.resumed, m.failed),
            (4, 1, 2, 1),
            "counts summed"
        );
        let items: Vec<&str> = m.items.iter().map(|i| i.item.as_str()).collect();
        assert_eq!(items, ["A", "B", "C", "D"]);
        assert_eq!(m.created_at.format("%M").to_string(), "01");
        assert_eq!(m.updated_at.format("%M").to_string(), "09");
        let done = merge(vec![
            part(BatchState::Completed, &[], 1),
            part(BatchState::Paused, &[], 1),
        ])
        .expect("parts");
        assert_eq!(done.state, BatchState::Paused);
        let stopped = merge(vec![
            part(BatchState::Resuming, &[], 1),
            part(BatchState::Stopped, &[], 1),
        ])
        .expect("parts");
        assert_eq!(stopped.state, BatchState::Stopped);
    }

    /// A batch of wf-A paused, wf-B resumed and wf-C failed.
    fn paused_resumed_failed() -> BatchStatusReply {
        part(
            BatchState::Paused,
            &[
                ("A", ItemState::Paused),
                ("B", ItemState::Resumed),
                ("C", ItemState::Failed),
            ],
            1,
        )
    }

    /// The tests' partition of a workflow: its last letter (0 without one).
    fn last_letter(wf: Option<&str>) -> u32 {
        wf.map_or(0, |w| w.as_bytes()[w.len() - 1] as u32)
    }

    #[test]
    fn a_pause_adds_to_a_batch_as_one_partition_would() {
        let b = paused_resumed_failed();
        let targets = || {
            vec![
                ("A".to_string(), Some("new-A".to_string())),
                ("B".to_string(), Some("new-Z".to_string())),
                ("C".to_string(), Some("new-C".to_string())),
                ("D".to_string(), Some("wf-D".to_string())),
            ]
        };
        let (kept, forget) = plan(None, targets(), false, last_letter);
        assert_eq!(kept, targets(), "a new batch takes everything");
        assert!(forget.is_empty());
        let (kept, forget) = plan(Some(&b), targets(), true, last_letter);
        let items: Vec<&str> = kept.iter().map(|(i, _)| i.as_str()).collect();
        assert_eq!(items, ["D"], "the correlator only adds new items");
        assert!(forget.is_empty());
        let (kept, forget) = plan(Some(&b), targets(), false, last_letter);
        let items: Vec<&str> = kept.iter().map(|(i, _)| i.as_str()).collect();
        assert_eq!(
            items,
            ["B", "C", "D"],
            "a person pauses resumed and failed again"
        );
        // B's latest is another partition's: its old entry goes from its part.
        assert_eq!(
            forget.into_iter().collect::<Vec<_>>(),
            [(u32::from(b'B'), vec!["B".to_string()])]
        );
    }

    #[test]
    fn each_part_counts_the_rest_of_the_batch() {
        let b = paused_resumed_failed();
        let (a, c) = (u32::from(b'A'), u32::from(b'C'));
        let mut parts: BTreeMap<u32, PartPause> = BTreeMap::new();
        // A person pauses C again (a new workflow in A's partition) and an
        // item no partition holds a workflow of (partition 0).
        parts
            .entry(a)
            .or_default()
            .workflow_ids
            .push("new-A".into());
        parts.entry(0).or_default().items.push("NOPE".into());
        let renewed = BTreeSet::from(["C".to_string(), "NOPE".to_string()]);
        count_elsewhere(&mut parts, Some(&b), &renewed, last_letter);
        // C's old entry goes; B (resumed) counts, neither paused nor failed.
        assert_eq!(
            parts[&a].elsewhere,
            Elsewhere {
                ok: 0,
                failed: 1,
                total: 2
            },
            "B, and NOPE in partition 0"
        );
        assert_eq!(
            parts[&0].elsewhere,
            Elsewhere {
                ok: 2,
                failed: 0,
                total: 3
            },
            "A, B and the new C"
        );
        assert!(!parts.contains_key(&c));
    }
}
