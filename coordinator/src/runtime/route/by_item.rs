//! `pause` and `resume` by item with several partitions: "the item's
//! latest workflow" may be in any partition, so every partition names its
//! latest workflow of the item (the internal operation `latest_of_item`),
//! the newest of those by `(created_at, workflow_id)` is picked (the order
//! one scheduler picks by), and the operation runs on its owner. The API
//! and the control stream both go through here.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use caucus_shared::api::coordinator::control::{
    Pause, PauseReply, PauseRequest, Resume, ResumeReply, ResumeRequest,
};
use caucus_shared::api::Operation;
use caucus_shared::nats::ApiError;

use super::Router;
use crate::runtime::commands::{ask, Command, SchedulerHandle};

/// The internal operation each partition's owner answers: its latest
/// workflow of an item (never in the catalog: only coordinators send it).
pub struct LatestOfItem;

impl Operation for LatestOfItem {
    const SERVICE: &'static str = "coordinator";
    const NAME: &'static str = "latest_of_item";
    const SUMMARY: &'static str = "a partition's latest workflow of an item (internal)";
    const ERRORS: &'static [&'static str] = &[];
    type Request = LatestRequest;
    type Reply = LatestReply;
}

/// Whose latest workflow.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatestRequest {
    /// The item.
    pub item: String,
}

/// One partition's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatestReply {
    /// Its latest workflow of the item; `None` when it holds none.
    pub latest: Option<Latest>,
}

/// A workflow as "latest" compares it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Latest {
    /// The workflow.
    pub workflow_id: String,
    /// When it was submitted.
    pub created_at: DateTime<Utc>,
}

impl Latest {
    /// The order "latest" picks the last of (as one scheduler does).
    fn key(&self) -> (DateTime<Utc>, &str) {
        (self.created_at, self.workflow_id.as_str())
    }
}

/// The latest of `candidates` by `(created_at, workflow_id)`.
pub fn newest(candidates: impl IntoIterator<Item = Latest>) -> Option<Latest> {
    candidates.into_iter().max_by(|a, b| a.key().cmp(&b.key()))
}

/// The internal operation each partition's owner answers for a batch:
/// its latest workflow of each of many items, in one forward (never in
/// the catalog).
pub struct LatestOfItems;

impl Operation for LatestOfItems {
    const SERVICE: &'static str = "coordinator";
    const NAME: &'static str = "latest_of_items";
    const SUMMARY: &'static str = "a partition's latest workflow of each item (internal)";
    const ERRORS: &'static [&'static str] = &[];
    type Request = LatestManyRequest;
    type Reply = LatestManyReply;
}

/// Whose latest workflows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatestManyRequest {
    /// The items.
    pub items: Vec<String>,
}

/// One partition's answer: for each item, in order, its latest workflow
/// there, or `None`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatestManyReply {
    /// One per item.
    pub latest: Vec<Option<Latest>>,
}

/// Makes [`LatestOfItem`] and [`LatestOfItems`] answerable by this
/// instance's schedulers.
pub fn register(router: &Router) {
    router.register::<LatestOfItem, _, _>(|h, r: LatestRequest| async move {
        Ok(LatestReply {
            latest: held_latest(&h, &r.item).await?,
        })
    });
    router.register::<LatestOfItems, _, _>(|h, r: LatestManyRequest| async move {
        let mut latest = Vec::with_capacity(r.items.len());
        for item in &r.items {
            latest.push(held_latest(&h, item).await?);
        }
        Ok(LatestManyReply { latest })
    });
}

/// The scheduler's latest held workflow of `item`, picked by the scheduler
/// as it picks for one partition.
async fn held_latest(h: &SchedulerHandle, item: &str) -> Result<Option<Latest>, ApiError> {
    let item = item.to_string();
    let latest = ask(h, |reply| Command::LatestOfItem { item, reply }).await?;
    Ok(latest.map(|(workflow_id, created_at)| Latest {
        workflow_id,
        created_at,
    }))
}

/// The latest workflow of `item` over every partition; `not_found` as with
/// one partition when none holds one, `unavailable` naming a partition
/// without an owner.
pub async fn latest(router: &Router, item: &str) -> Result<String, ApiError> {
    let req = LatestRequest {
        item: item.to_string(),
    };
    let replies = router.call_all::<LatestOfItem>(&req).await?;
    newest(replies.into_iter().filter_map(|r| r.latest))
        .map(|l| l.workflow_id)
        .ok_or_else(|| ApiError::not_found(format!("no workflow for item `{item}`")))
}

/// The latest workflow of each of `items` over every partition (one
/// forward per partition), `None` for an item no partition holds one of;
/// `unavailable` naming a partition without an owner.
pub async fn latest_of_each(
    router: &Router,
    items: &[String],
) -> Result<Vec<Option<String>>, ApiError> {
    let req = LatestManyRequest {
        items: items.to_vec(),
    };
    let replies = router.call_all::<LatestOfItems>(&req).await?;
    let mut out = Vec::with_capacity(items.len());
    for i in 0..items.len() {
        let each = replies
            .iter()
            .filter_map(|r| r.latest.get(i).cloned().flatten());
        out.push(newest(each).map(|l| l.workflow_id));
    }
    Ok(out)
}

/// The workflow a pause or resume is about: the one it names, else its
/// item's latest; the errors of one partition otherwise.
async fn target(
    router: &Router,
    workflow_id: Option<&str>,
    item: Option<&str>,
) -> Result<String, ApiError> {
    match (workflow_id, item) {
        (Some(id), _) => Ok(id.to_string()),
        (None, Some(item)) => latest(router, item).await,
        (None, None) => Err(ApiError::bad_request("name a `workflow_id` or an `item`")),
    }
}

/// `pause` with several partitions, on the owner of the workflow it is
/// about.
pub async fn pause(router: &Router, mut req: PauseRequest) -> Result<PauseReply, ApiError> {
    let id = target(router, req.workflow_id.as_deref(), req.item.as_deref()).await?;
    let p = router.partition_of(&id);
    req.workflow_id = Some(id);
    router.call::<Pause>(p, &req).await
}

/// `resume` with several partitions, on the owner of the workflow it is
/// about.
pub async fn resume(router: &Router, mut req: ResumeRequest) -> Result<ResumeReply, ApiError> {
    let id = target(router, req.workflow_id.as_deref(), req.item.as_deref()).await?;
    let p = router.partition_of(&id);
    req.workflow_id = Some(id);
    router.call::<Resume>(p, &req).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn wf(id: &str, ms: i64) -> Latest {
        Latest {
            workflow_id: id.into(),
            created_at: Utc.timestamp_millis_opt(ms).unwrap(),
        }
    }

    #[test]
    fn the_newest_is_the_last_created_then_the_highest_id() {
        assert_eq!(newest(vec![]), None);
        let picked = newest(vec![wf("b", 1), wf("a", 3), wf("c", 2)]);
        assert_eq!(picked, Some(wf("a", 3)));
        let tie = newest(vec![wf("a", 5), wf("c", 5), wf("b", 5)]);
        assert_eq!(tie, Some(wf("c", 5)), "equal times: the highest id");
    }
}
