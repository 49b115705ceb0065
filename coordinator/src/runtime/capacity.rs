//! Reads the cluster-wide capacity of every agent type from the Redis
//! semaphores (sum of live workers' slots, capped) and pokes the scheduler
//! when it changes.

use std::collections::HashMap;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use caucus_shared::redis::{CapacitySemaphore, RedisPool};

use super::scheduler::{Capacities, Command, SchedulerHandle};

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
        out.insert(agent, sem.status().await?.capacity as usize);
    }
    Ok(out)
}

/// Refreshes `caps` every `every` until `shutdown`.
pub async fn run(
    pool: RedisPool,
    prefix: String,
    caps: Capacities,
    every: Duration,
    scheduler: SchedulerHandle,
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
                    let _ = scheduler.try_send(Command::Poke);
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
