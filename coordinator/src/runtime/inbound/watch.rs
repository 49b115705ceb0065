//! The term's check for overdue responses: loads the unanswered messages
//! from the bucket when the term begins, then checks them every tick.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::context::Inbound;

/// Runs until `shutdown`.
pub async fn run(inbound: Inbound, every: Duration, shutdown: CancellationToken) {
    loop {
        match inbound.responses.open().await {
            Ok(open) => {
                let n = open.len();
                let mut p = inbound.pending();
                for rec in open {
                    p.hold(rec);
                }
                drop(p);
                tracing::info!(awaiting = n, "awaited responses loaded");
                break;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read awaited responses; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(every.max(Duration::from_secs(1))) => {}
                }
            }
        }
    }
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => inbound.alert_overdue().await,
        }
    }
}
