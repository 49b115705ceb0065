//! Fires time-outs from the deadlines stored in each debate. The index of
//! deadlines follows the KV bucket (a watch with history), so a restarted
//! facilitator, or a standby taking over, picks up every debate at the level
//! it had reached, and writes by other instances are seen too.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::kv;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

use super::engine::Facilitator;
use crate::debate::{Debate, DebateState};

/// Debate id → when something is due.
pub type DueIndex = Arc<Mutex<HashMap<String, DateTime<Utc>>>>;

fn due_of(d: &Debate, seen: DateTime<Utc>, grace: Duration) -> Option<DateTime<Utc>> {
    match d.state {
        // Mediation normally runs inline right after the transition; this
        // only catches a mediation that was interrupted (crash, failure).
        DebateState::Mediating => {
            Some(seen + chrono::Duration::from_std(grace).unwrap_or_default())
        }
        DebateState::Provisional | DebateState::Resolved => None,
        _ => d.deadline,
    }
}

/// Keeps `index` in step with the bucket until `shutdown`.
pub async fn watch(
    fac: Arc<Facilitator>,
    index: DueIndex,
    grace: Duration,
    shutdown: CancellationToken,
) {
    loop {
        let mut w = match fac.debates.kv().watch_with_history("debate.>").await {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch debates; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(500)) => continue,
                }
            }
        };
        loop {
            let next = tokio::select! {
                _ = shutdown.cancelled() => return,
                n = w.next() => n,
            };
            let Some(entry) = next else { break };
            let entry = match entry {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!(error = %e, "debate watch error");
                    break;
                }
            };
            let Some(id) = entry.key.strip_prefix("debate.").map(str::to_string) else {
                continue;
            };
            let mut idx = index.lock().await;
            if entry.operation != kv::Operation::Put {
                idx.remove(&id);
                fac.precedents.remove(&id);
                fac.open_debates.removed(&id);
                continue;
            }
            match serde_json::from_slice::<Debate>(&entry.value) {
                Ok(d) => {
                    fac.precedents.observe(&d);
                    fac.open_debates.observe(&d);
                    match due_of(&d, fac.clock.now(), grace) {
                        Some(at) => {
                            idx.insert(id, at);
                        }
                        None => {
                            idx.remove(&id);
                        }
                    }
                }
                Err(e) => {
                    tracing::error!(debate_id = %id, error = %e, "unreadable debate in the bucket");
                    idx.remove(&id);
                }
            }
        }
    }
}

/// Every `tick`, fires what is due.
pub async fn run(
    fac: Arc<Facilitator>,
    index: DueIndex,
    tick: Duration,
    shutdown: CancellationToken,
) {
    let mut every = tokio::time::interval(tick);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = every.tick() => {}
        }
        let now = fac.clock.now();
        let due: Vec<String> = index
            .lock()
            .await
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            if let Err(e) = fac.fire(&id).await {
                tracing::warn!(debate_id = %id, error = %e, "time-out not applied yet; will retry");
            }
        }
    }
}
