//! Renews the worker's registration. It is also how the cluster recovers
//! from a Redis that restarted empty: the next beat registers again (and
//! re-sets the cap) within the recovery window the semaphore opens after a
//! data loss, since `heartbeat_interval < lease_ttl`. Every call is bounded
//! by the interval, so a Redis that stops answering never stalls the beat.
//! While beats fail, `health` reports the component `heartbeat:<agent type>`
//! degraded (this worker's capacity lapses from the cluster after its ttl).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use caucus_shared::health::Health;
use caucus_shared::redis::CapacitySemaphore;

#[allow(clippy::too_many_arguments)]
pub(super) async fn run(
    sem: CapacitySemaphore,
    worker_id: String,
    slots: u32,
    cap: Option<u32>,
    ttl: Duration,
    every: Duration,
    stop: CancellationToken,
    health: Health,
) {
    let component = format!("heartbeat:{}", sem.agent_type());
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        // The cap lives in Redis too: restore it if Redis lost its data,
        // before the registration brings the capacity back.
        if let Some(c) = cap {
            let _ = tokio::time::timeout(every, sem.set_cap(Some(c))).await;
        }
        let beat = tokio::time::timeout(every, sem.register_worker(&worker_id, slots, ttl))
            .await
            .map_err(|_| format!("Redis did not answer within {every:?}"))
            .and_then(|r| r.map_err(|e| e.to_string()));
        match beat {
            Ok(_) if failing => {
                tracing::info!(agent_type = %sem.agent_type(), "registration restored");
                failing = false;
                health.ok(&component);
            }
            Ok(_) => {}
            Err(e) => {
                health.degraded(
                    &component,
                    format!("Redis unreachable: cannot renew this worker's registration ({e})"),
                );
                if !failing {
                    tracing::warn!(agent_type = %sem.agent_type(), error = %e, "heartbeat failed");
                }
                failing = true;
            }
        }
    }
}
