//! `coordinator.workers`: registered workers, capacity, queue depth and the
//! live bottleneck.

use std::collections::BTreeMap;
use std::time::Duration;

use caucus_shared::api::coordinator::workers::{
    AgentWorkers, LiveBottleneck, WorkerSlots, Workers, WorkersReply,
};
use caucus_shared::nats::api::ApiError;

use super::commands::{ask, AskError, Command, SchedulerHandle};

/// Most extra slots the live bottleneck suggests.
const MAX_MORE_SLOTS: usize = 64;

/// Registers `workers` (any instance answers; the leader adds its queues,
/// and with several partitions every partition's are summed).
pub fn route(svc: &mut caucus_shared::service::Service, router: &super::route::Router) {
    let ctx = svc.context().clone();
    let heartbeat = ctx.config.worker.heartbeat_interval;
    let router = router.clone();
    svc.op::<Workers, _, _>(move |_| {
        let router = router.clone();
        let redis = ctx.redis.clone();
        let js = ctx.js.clone();
        let subjects = ctx.subjects.clone();
        let now = ctx.clock.now_ms();
        async move {
            let load = if router.schedulers().count() <= 1 {
                load_of(router.schedulers().leader()).await?
            } else {
                // A partition without an owner for a moment: the workers
                // still list.
                super::status_merge::loads(&router)
                    .await
                    .unwrap_or_default()
            };
            workers(load, redis, js, subjects, heartbeat, now).await
        }
    });
}

/// The leader's load; none on a standby.
async fn load_of(
    scheduler: Option<SchedulerHandle>,
) -> Result<BTreeMap<String, crate::engine::AgentLoad>, ApiError> {
    Ok(match scheduler {
        Some(s) => match ask(&s, |reply| Command::Load { reply }).await {
            Ok(load) => load,
            Err(AskError::Closed) => return Err(AskError::Closed.into()),
            // A scheduler stopping mid-request: the workers still list.
            Err(_) => BTreeMap::new(),
        },
        None => BTreeMap::new(),
    })
}

/// `coordinator.workers`: per agent type the registered workers and slots,
/// leases in use, queue depth, ready tasks and how long the oldest waited,
/// plus the live bottleneck.
pub async fn workers(
    load: BTreeMap<String, crate::engine::AgentLoad>,
    redis: caucus_shared::redis::RedisPool,
    js: async_nats::jetstream::Context,
    subjects: caucus_shared::subjects::Subjects,
    heartbeat: Duration,
    now_ms: i64,
) -> Result<WorkersReply, ApiError> {
    use caucus_shared::nats::topology::task_consumer_name;
    use caucus_shared::redis::CapacitySemaphore;
    use caucus_shared::subjects::StreamKind;

    let prefix = subjects.prefix().to_string();
    let mut agents: Vec<String> = CapacitySemaphore::agent_types(&redis, &prefix)
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    for a in load.keys() {
        if !agents.contains(a) {
            agents.push(a.clone());
        }
    }
    agents.sort();
    let stream = subjects.stream(StreamKind::Tasks);
    let mut reply = WorkersReply::default();
    let mut worst_wait = 0i64;
    for agent in agents {
        let sem = CapacitySemaphore::new(redis.clone(), &prefix, &agent)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let st = sem
            .status()
            .await
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let l = load.get(&agent).cloned().unwrap_or_default();
        // Only live types: a type whose last worker is gone and that has
        // nothing pending is not shown at capacity 0.
        if !super::capacity::listed(&st, &l) {
            continue;
        }
        let queue_depth = match js
            .get_consumer_from_stream::<async_nats::jetstream::consumer::pull::Config, _, _>(
                task_consumer_name(&agent),
                stream.clone(),
            )
            .await
        {
            Ok(mut c) => c.info().await.map(|i| i.num_pending).unwrap_or(0),
            Err(_) => 0,
        };
        let workers: Vec<WorkerSlots> = st
            .workers
            .iter()
            .map(|w| WorkerSlots {
                worker_id: w.worker_id.clone(),
                slots: w.slots,
                expires_in_ms: w.expires_at_ms - now_ms,
                heartbeat_missed: false,
            })
            .collect();
        if l.ready > 0 && l.oldest_wait_ms > worst_wait {
            worst_wait = l.oldest_wait_ms;
            reply.bottleneck = Some(LiveBottleneck {
                agent_type: agent.clone(),
                oldest_wait_ms: l.oldest_wait_ms,
                ready: l.ready as u64,
                more_slots: l.ready.min(MAX_MORE_SLOTS) as u64,
            });
        }
        reply.agents.push(AgentWorkers {
            agent_type: agent,
            capacity: st.capacity,
            cap: st.cap,
            in_use: st.in_use,
            queue_depth,
            ready: l.ready as u64,
            in_flight: l.in_flight as u64,
            oldest_wait_ms: l.oldest_wait_ms,
            recovering_ms: st.recovering_ms,
            workers: mark_missed(workers, heartbeat),
        });
    }
    Ok(reply)
}

/// A worker whose registration has less than `ttl - 2 × heartbeat` left
/// missed at least one heartbeat. The ttl is not stored, so the largest
/// remaining time among the agent's workers stands in for a fresh one.
fn mark_missed(mut workers: Vec<WorkerSlots>, heartbeat: Duration) -> Vec<WorkerSlots> {
    let freshest = workers.iter().map(|w| w.expires_in_ms).max().unwrap_or(0);
    let late = 2 * heartbeat.as_millis() as i64;
    for w in &mut workers {
        w.heartbeat_missed = freshest - w.expires_in_ms > late;
    }
    workers
}
