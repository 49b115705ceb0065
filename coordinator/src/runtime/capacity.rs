//! Reads the cluster-wide capacity of every agent type from the Redis
//! semaphores (sum of live workers' slots, capped) and pokes the scheduler
//! when it changes.
//!
//! Only *live* agent types count: one with at least one live worker
//! registration. A type whose last worker is gone (killed, or stopped)
//! leaves once that worker's registration lapsed (one `worker.lease_ttl`);
//! it is not kept at capacity 0, which would read as "this type exists
//! but has no slot" to `caucus workers` and to a planner handed the live
//! capacities.

use std::collections::HashMap;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use caucus_shared::redis::{CapacitySemaphore, RedisPool, SemaphoreStatus};

use crate::engine::AgentLoad;

use super::commands::{Capacities, Command, SchedulerHandle};

/// Warnings repeated at most this often while Redis is unreachable.
const WARN_EVERY: Duration = Duration::from_secs(30);

/// Reads all capacities once.
pub async fn read(
    pool: &RedisPool,
    prefix: &str,
) -> Result<HashMap<String, usize>, caucus_shared::Error> {
    let mut out = HashMap::new();
    for agent in CapacitySemaphore::agent_types(pool, prefix).await? {
        let sem = CapacitySemaphore::new(pool.clone(), prefix, &agent)?;
        let st = sem.status().await?;
        if has_live_worker(&st) {
            out.insert(agent, st.capacity as usize);
        }
    }
    Ok(out)
}

/// Capacities to start a reader ([`run`]) with: read once, or empty when
/// Redis does not answer (the reader fills them in).
pub async fn first(pool: &RedisPool, prefix: &str) -> Capacities {
    let caps: Capacities = Default::default();
    if let Ok(c) = read(pool, prefix).await {
        *caps.write().expect("caps") = c;
    }
    caps
}

/// Whether a semaphore snapshot has a live worker registration. Its
/// registry key outlives the last registration by at most a moment (it
/// expires with it), so a snapshot taken in between has none.
pub fn has_live_worker(status: &SemaphoreStatus) -> bool {
    !status.workers.is_empty()
}

/// Pokes `scheduler` (capacity changed: dispatch now, not at the tick).
pub fn poke(scheduler: &SchedulerHandle) {
    let _ = scheduler.try_send(Command::Poke);
}

/// Whether `coordinator.workers` lists an agent type: it has a live worker,
/// or the scheduler holds tasks of it (ready, waiting for a retry, or in
/// flight), which a type with no worker left shows as capacity 0 and, when
/// tasks wait, as the live bottleneck. A type whose workers are all gone
/// and that has nothing pending is not listed.
pub fn listed(status: &SemaphoreStatus, load: &AgentLoad) -> bool {
    has_live_worker(status) || load.ready > 0 || load.in_flight > 0
}

/// Refreshes `caps` every `every` until `shutdown`, calling `poke` when
/// they changed (the scheduler, or every partition's scheduler, which
/// share one reader: each read costs a Redis call per agent type).
pub async fn run(
    pool: RedisPool,
    prefix: String,
    caps: Capacities,
    every: Duration,
    poke: impl Fn() + Send,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_warn: Option<std::time::Instant> = None;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        match read(&pool, &prefix).await {
            Ok(now) => {
                if last_warn.take().is_some() {
                    tracing::info!("capacities readable again");
                }
                let changed = {
                    let mut c = caps.write().expect("capacity lock");
                    let changed = *c != now;
                    *c = now;
                    changed
                };
                if changed {
                    poke();
                }
            }
            // Once per WARN_EVERY, not every tick, while Redis is away.
            Err(e) => {
                if last_warn.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
                    tracing::warn!(error = %e, "cannot read capacities from Redis; retrying");
                    last_warn = Some(std::time::Instant::now());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caucus_shared::redis::WorkerSlot;

    fn status(workers: &[(&str, u32)]) -> SemaphoreStatus {
        SemaphoreStatus {
            capacity: workers.iter().map(|(_, s)| s).sum(),
            cap: None,
            in_use: 0,
            holders: Vec::new(),
            workers: workers
                .iter()
                .map(|(id, slots)| WorkerSlot {
                    worker_id: id.to_string(),
                    slots: *slots,
                    expires_at_ms: 1,
                })
                .collect(),
            epoch: Some("1".into()),
            recovering_ms: 0,
        }
    }

    fn load(ready: usize, in_flight: usize) -> AgentLoad {
        AgentLoad {
            ready,
            in_flight,
            oldest_wait_ms: 0,
        }
    }

    #[test]
    fn a_type_with_a_live_worker_is_live_and_listed() {
        let st = status(&[("w1", 2)]);
        assert!(has_live_worker(&st));
        assert!(listed(&st, &load(0, 0)));
    }

    #[test]
    fn a_type_whose_workers_are_gone_is_not_live() {
        let st = status(&[]);
        assert!(!has_live_worker(&st));
        // Nothing pending: not listed at all (was: capacity 0 forever).
        assert!(!listed(&st, &load(0, 0)));
    }

    #[test]
    fn a_type_with_pending_tasks_stays_listed_without_workers() {
        let st = status(&[]);
        assert!(listed(&st, &load(3, 0)), "ready tasks waiting");
        assert!(listed(&st, &load(0, 1)), "a task still in flight");
    }
}
