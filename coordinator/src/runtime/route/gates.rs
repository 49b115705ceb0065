//! `gates` without a `workflow_id` over several partitions: every
//! partition's open gates merged in the order one scheduler lists them
//! (oldest opening first, then workflow id, then gate), paged by the same
//! offset cursor, `count` summed.

use caucus_shared::api::coordinator::gates::{Gates, GatesReply, GatesRequest, OpenGate};
use caucus_shared::nats::api::{ApiError, OffsetPage};

use super::Router;
// One partition's limits: a merged list pages as one partition's does.
use crate::runtime::gates_api::page::{GATES_PAGE, GATES_PAGE_MAX};

/// `gates` without a `workflow_id`, with several partitions. A merged
/// page needs each partition's first `offset + limit` gates: no gate past
/// those can come before the page's last.
pub async fn gates(router: &Router, r: GatesRequest) -> Result<GatesReply, ApiError> {
    let page = OffsetPage::of(r.limit, r.cursor.as_deref(), GATES_PAGE, GATES_PAGE_MAX)?;
    let want = page.offset + page.limit;
    let calls = (0..router.schedulers().count()).map(|p| first(router, p, r.item.clone(), want));
    let parts = futures::future::join_all(calls)
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let count = parts.iter().map(|(n, _)| n).sum();
    let merged = merge(parts.into_iter().map(|(_, g)| g).collect(), want);
    let (gates, _) = page.take(merged);
    Ok(GatesReply {
        count,
        gates,
        next_cursor: (want < count).then(|| want.to_string()),
    })
}

/// Partition `p`'s gate count and its first `want` gates (or all).
async fn first(
    router: &Router,
    p: u32,
    item: Option<String>,
    want: usize,
) -> Result<(usize, Vec<OpenGate>), ApiError> {
    let mut gates = Vec::new();
    let mut cursor = None;
    loop {
        let req = GatesRequest {
            workflow_id: None,
            item: item.clone(),
            limit: Some(GATES_PAGE_MAX),
            cursor,
        };
        let reply = router.call::<Gates>(p, &req).await?;
        gates.extend(reply.gates);
        match reply.next_cursor {
            Some(c) if gates.len() < want => cursor = Some(c),
            _ => return Ok((reply.count, gates)),
        }
    }
}

/// The order gates are listed in.
fn key(g: &OpenGate) -> (Option<chrono::DateTime<chrono::Utc>>, &str, &str) {
    (g.opened_at, g.workflow_id.as_str(), g.gate.as_str())
}

/// The first `want` of the partitions' lists, each already in list order,
/// merged (a merge, not a sort: each partition's own order is kept).
fn merge(parts: Vec<Vec<OpenGate>>, want: usize) -> Vec<OpenGate> {
    let mut heads: Vec<std::iter::Peekable<std::vec::IntoIter<OpenGate>>> = parts
        .into_iter()
        .map(|g| g.into_iter().peekable())
        .collect();
    let mut out = Vec::new();
    while out.len() < want {
        let next = heads
            .iter_mut()
            .enumerate()
            .filter_map(|(i, h)| h.peek().map(|g| (i, key(g))))
            .min_by(|a, b| a.1.cmp(&b.1))
            .map(|(i, _)| i);
        let Some(i) = next else { break };
        out.extend(heads[i].next());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn gate(wf: &str, min: u32) -> OpenGate {
        OpenGate {
            workflow_id: wf.into(),
            item: "X".into(),
            pipeline: "p".into(),
            gate: "review".into(),
            opened_at: Some(
                chrono::Utc
                    .with_ymd_and_hms(2026, 11, 26, 9, min, 0)
                    .unwrap(),
            ),
            waiting_ms: None,
            reminders_sent: 0,
            escalated: false,
            sent_back: 0,
            pending_upstream: Vec::new(),
        }
    }

    fn ids(gates: &[OpenGate]) -> Vec<&str> {
        gates.iter().map(|g| g.workflow_id.as_str()).collect()
    }

    #[test]
    fn partitions_merge_oldest_first_and_stop_at_the_page() {
        let parts = vec![
            vec![gate("a", 1), gate("d", 4), gate("e", 9)],
            vec![],
            vec![gate("b", 2), gate("c", 2), gate("f", 10)],
        ];
        assert_eq!(
            ids(&merge(parts.clone(), 10)),
            ["a", "b", "c", "d", "e", "f"]
        );
        assert_eq!(ids(&merge(parts, 4)), ["a", "b", "c", "d"]);
        let tie = vec![vec![gate("z", 3)], vec![gate("y", 3)]];
        assert_eq!(
            ids(&merge(tie, 2)),
            ["y", "z"],
            "equal times: by workflow id"
        );
    }
}
