//! `coordinator.partitions`: each partition's owner, fencing epoch and
//! unfinished workflows.
//!
//! Owner and epoch come from the partition's lock in Redis, which any
//! instance reads (never takes). The workflow count lives in the owner's
//! scheduler: the owner asks its own; any other instance forwards the
//! question to it over NATS, the way a standby's `GET /scaling` reaches
//! the leader (runtime/scaling.rs), so a caller gets the count whichever
//! instance the queue group picked.

use std::collections::BTreeMap;
use std::time::Duration;

use caucus_shared::api::coordinator::partitions::{PartitionInfo, Partitions, PartitionsReply};
use caucus_shared::api::coordinator::status::{Status, StatusReply, StatusRequest, WorkflowState};
use caucus_shared::api::ApiClient;
use caucus_shared::nats::ApiError;
use caucus_shared::redis::{OwnedLock, RedisPool};
use caucus_shared::service::Service;

use super::leader::partition_lock;
use super::SharedScheduler;

/// How long a non-owner keeps asking for the owner's count (a `standby`
/// answer means the request reached another non-owner): below the
/// caller's `nats.request_timeout` (5 s by default), so the caller gets
/// the owner and epoch with `workflows: null` rather than a timeout.
const OWNER_SEARCH: Duration = Duration::from_secs(2);

/// Times the locks are read again when the owner changed while its count
/// was asked for: a count is only reported next to the owner that gave it.
const HANDOVER_RETRIES: usize = 3;

/// Registers `partitions` (any instance answers).
pub fn route(svc: &mut Service, router: &super::route::Router) {
    let slot = router.schedulers().clone();
    let router = router.clone();
    let ctx = svc.context().clone();
    let client = ApiClient::new(
        ctx.nats.clone(),
        ctx.subjects.clone(),
        ctx.config.nats.request_timeout.min(OWNER_SEARCH),
    )
    .with_standby_retry(OWNER_SEARCH);
    svc.op::<Partitions, _, _>(move |_| {
        let asker = Asker {
            slot: slot.clone(),
            router: router.clone(),
            client: client.clone(),
            instance_id: ctx.instance_id.clone(),
        };
        let redis = ctx.redis.clone();
        let prefix = ctx.subjects.prefix().to_string();
        let count = slot.count();
        async move { partitions(&redis, &prefix, count, &asker).await }
    });
}

/// Who answers "how many unfinished workflows": this instance's scheduler
/// for the partitions it owns, the owner over NATS for the others.
struct Asker {
    slot: SharedScheduler,
    router: super::route::Router,
    client: ApiClient,
    instance_id: String,
}

impl Asker {
    /// Unfinished workflows held by `owner`'s scheduler; `None` when it
    /// did not answer (stepping down, still loading, unreachable).
    async fn workflows(&self, owner: &str, p: u32) -> Option<u64> {
        // Only the counts are wanted; the one-workflow page is the
        // smallest `status` answers.
        let request = StatusRequest {
            limit: Some(1),
            ..StatusRequest::default()
        };
        let local = self.slot.leader();
        let answer = match local {
            // Several partitions: the request goes to partition `p`'s
            // scheduler, here or on its owner.
            _ if self.slot.count() > 1 => {
                // A partition just taken answers once its workflows are
                // loaded; until then the count is unknown, not late.
                tokio::time::timeout(OWNER_SEARCH, self.router.call::<Status>(p, &request))
                    .await
                    .unwrap_or_else(|_| Err(ApiError::new("timeout", "no answer")))
            }
            Some(s) if owner == self.instance_id => super::api::status(request, || Ok(s)).await,
            // With one partition its owner is the leader, the only
            // instance that answers `status`. With P partitions the
            // question must be addressed to the owner.
            _ => self.client.call::<Status>(&request).await,
        };
        match answer {
            Ok(reply) => Some(unfinished(&reply)),
            Err(e) => {
                tracing::debug!(owner, error = %e, "partition owner's workflow count unavailable");
                None
            }
        }
    }
}

/// Owner, epoch and workflow count of partitions `0..count`.
async fn partitions(
    redis: &RedisPool,
    prefix: &str,
    count: u32,
    asker: &Asker,
) -> Result<PartitionsReply, ApiError> {
    // Every partition at once: one whose owner is busy (loading, or
    // stalled by a failover) must not hold up the others.
    let each = (0..count).map(|p| one(redis, prefix, count, p, asker));
    let mut reply = PartitionsReply {
        partitions: BTreeMap::new(),
    };
    for (p, info) in futures::future::join_all(each)
        .await
        .into_iter()
        .enumerate()
    {
        reply.partitions.insert(p.to_string(), info?);
    }
    Ok(reply)
}

/// Partition `p`'s owner, epoch and workflow count.
async fn one(
    redis: &RedisPool,
    prefix: &str,
    count: u32,
    p: u32,
    asker: &Asker,
) -> Result<PartitionInfo, ApiError> {
    // A read-only handle: the token is ours, but nothing here takes,
    // extends or releases the lock.
    let lock = OwnedLock::new(
        redis.clone(),
        prefix,
        &partition_lock(p, count),
        &asker.instance_id,
    )
    .map_err(|e| ApiError::internal(e.to_string()))?;
    let mut info = read(&lock).await?;
    for _ in 0..HANDOVER_RETRIES {
        let Some(owner) = info.owner.clone() else {
            break;
        };
        let workflows = asker.workflows(&owner, p).await;
        let now = read(&lock).await?;
        if now == info {
            info.workflows = workflows;
            break;
        }
        // Handed over while counting: the count may be another
        // owner's. Read again and ask the new one.
        info = now;
    }
    Ok(info)
}

/// The lock's owner and epoch (no count yet).
async fn read(lock: &OwnedLock) -> Result<PartitionInfo, ApiError> {
    let unreadable = |e: caucus_shared::Error| {
        ApiError::new(
            "unavailable",
            format!("partition lock {} unreadable: {e}", lock.name()),
        )
    };
    let owner = lock.owner().await.map_err(unreadable)?;
    let epoch = lock.epoch().await.map_err(unreadable)?;
    Ok(PartitionInfo {
        owner,
        epoch,
        workflows: None,
    })
}

/// Workflows of a `status` reply's per-state counts that are not finished
/// (the scheduler keeps finished ones for `coordinator.retain_finished`).
fn unfinished(reply: &StatusReply) -> u64 {
    let finished = [WorkflowState::Completed, WorkflowState::Failed].map(WorkflowState::as_str);
    reply
        .counts
        .iter()
        .filter(|(state, _)| !finished.contains(&state.as_str()))
        .map(|(_, n)| *n as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finished_workflows_are_not_counted() {
        let reply = StatusReply {
            workflows: vec![],
            next_cursor: None,
            load: BTreeMap::new(),
            capacity: BTreeMap::new(),
            counts: [
                ("running", 3),
                ("paused", 1),
                ("pending", 2),
                ("completed", 7),
                ("failed", 4),
            ]
            .into_iter()
            .map(|(s, n)| (s.to_string(), n))
            .collect(),
        };
        assert_eq!(unfinished(&reply), 6);
    }
}
