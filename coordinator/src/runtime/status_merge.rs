//! `status` over several partitions (docs/PARTITIONS.md, item 7): ids go
//! to their owners, a list page is the first `limit` of every partition's
//! page in the list's `(created_at, workflow_id)` order, so a cursor works
//! across partitions exactly as on one.

use std::collections::BTreeMap;

use caucus_shared::api::coordinator::status::{Status, StatusReply, StatusRequest, WorkflowView};
use caucus_shared::nats::ApiError;

use super::commands::STATUS_DEFAULT_LIMIT;
use super::route::Router;

/// `status` with several partitions.
pub async fn status(router: &Router, req: StatusRequest) -> Result<StatusReply, ApiError> {
    if !req.ids.is_empty() {
        let mut by_partition: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        for id in &req.ids {
            by_partition
                .entry(router.partition_of(id))
                .or_default()
                .push(id.clone());
        }
        let calls = by_partition.into_iter().map(|(p, ids)| {
            let sub = StatusRequest { ids, ..req.clone() };
            async move { router.call::<Status>(p, &sub).await }
        });
        let replies = futures::future::join_all(calls)
            .await
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
        let mut merged = merge(replies);
        // In the order asked for, as one scheduler answers.
        let pos: BTreeMap<&str, usize> = req
            .ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.as_str(), i))
            .collect();
        merged
            .workflows
            .sort_by_key(|w| pos.get(w.workflow_id.as_str()).copied());
        merged.next_cursor = None;
        return Ok(merged);
    }
    let limit = req.limit.unwrap_or(STATUS_DEFAULT_LIMIT);
    let replies = router.call_all::<Status>(&req).await?;
    let more = replies.iter().any(|r| r.next_cursor.is_some());
    let mut merged = merge(replies);
    merged.workflows.sort_by(|a, b| key(a).cmp(&key(b)));
    let more = more || merged.workflows.len() > limit;
    merged.workflows.truncate(limit);
    merged.next_cursor = if more {
        merged.workflows.last().map(cursor)
    } else {
        None
    };
    Ok(merged)
}

fn key(w: &WorkflowView) -> (i64, &str) {
    (w.created_at.timestamp_millis(), w.workflow_id.as_str())
}

/// The cursor after `w` (the format of `commands::status_cursor`).
fn cursor(w: &WorkflowView) -> String {
    format!("{}:{}", w.created_at.timestamp_millis(), w.workflow_id)
}

/// One reply of several: workflows together, loads and counts summed,
/// capacity as read (the same Redis for every partition).
fn merge(replies: Vec<StatusReply>) -> StatusReply {
    let mut out = StatusReply {
        workflows: Vec::new(),
        next_cursor: None,
        load: BTreeMap::new(),
        capacity: BTreeMap::new(),
        counts: BTreeMap::new(),
    };
    for r in replies {
        out.workflows.extend(r.workflows);
        for (agent, l) in r.load {
            let e = out.load.entry(agent).or_default();
            e.ready += l.ready;
            e.in_flight += l.in_flight;
            e.oldest_wait_ms = e.oldest_wait_ms.max(l.oldest_wait_ms);
        }
        for (agent, c) in r.capacity {
            let e = out.capacity.entry(agent).or_default();
            *e = (*e).max(c);
        }
        for (state, n) in r.counts {
            *out.counts.entry(state).or_default() += n;
        }
    }
    out
}

/// Every partition's load, summed (the oldest wait is the oldest of all).
pub async fn loads(
    router: &Router,
) -> Result<BTreeMap<String, crate::engine::AgentLoad>, ApiError> {
    let one = StatusRequest {
        limit: Some(1),
        ..StatusRequest::default()
    };
    let merged = status(router, one).await?;
    Ok(merged
        .load
        .into_iter()
        .map(|(agent, l)| {
            (
                agent,
                crate::engine::AgentLoad {
                    ready: l.ready,
                    in_flight: l.in_flight,
                    oldest_wait_ms: l.oldest_wait_ms,
                },
            )
        })
        .collect())
}
