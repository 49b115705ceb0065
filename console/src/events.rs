//! `GET /events`: Server-Sent Events telling open pages that something
//! they show changed (a workflow's state, a gate, a debate, an alert).
//!
//! One NATS watcher per console process, started by the first listener,
//! feeds every open stream through a broadcast channel:
//! - workflow records as the coordinator writes them (the KV bucket
//!   `<prefix>_workflows`, read as plain messages on `$KV.<bucket>.>`): a
//!   record whose state differs from the last one seen is `event: workflow`
//!   `{workflow_id, state}`; one whose count of gates awaiting a person
//!   changed is `event: gate` `{workflow_id, open_gates}`;
//! - `<prefix>.debates.>` → `event: debate` `{debate_id}`;
//! - `<prefix>.alerts.>` → `event: alert` `{severity}`.
//!
//! Workflow changes are coalesced per workflow over [`FLUSH`] (a record is
//! written many times a second while it runs), so pages reload once per
//! burst and still within a second of the change.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use axum::Router;
use futures::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{broadcast, watch};

use crate::state::AppState;

/// How long workflow changes are gathered before they are sent.
pub const FLUSH: Duration = Duration::from_millis(150);

/// Events kept for a slow listener before it skips ahead.
const CHANNEL: usize = 4096;

/// One event for the pages.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveEvent {
    /// `workflow`, `gate`, `debate` or `alert`.
    pub kind: &'static str,
    /// The JSON data line.
    pub data: String,
}

/// The process's live events and whether the watcher is subscribed.
struct Hub {
    tx: broadcast::Sender<LiveEvent>,
    subscribed: watch::Receiver<bool>,
}

static HUB: OnceLock<Hub> = OnceLock::new();

/// The live-update routes.
pub fn routes() -> Router<AppState> {
    Router::new().route("/events", get(events))
}

async fn events(
    State(state): State<AppState>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let hub = hub(&state);
    let rx = hub.tx.subscribe();
    let mut subscribed = hub.subscribed.clone();
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(e) => return Some((Ok(Event::default().event(e.kind).data(e.data)), rx)),
                // A listener that fell behind skips to the newest events:
                // the page reloads from the API anyway.
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    // A comment first, once NATS has the watcher's subscriptions: a client
    // that saw it misses no later change.
    let opened = futures::stream::once(async move {
        let _ = subscribed.wait_for(|s| *s).await;
        Ok(Event::default().comment("live"))
    });
    Sse::new(opened.chain(stream)).keep_alive(KeepAlive::default())
}

/// The process's broadcast of live events, watching NATS from first use.
fn hub(state: &AppState) -> &'static Hub {
    HUB.get_or_init(|| {
        let (tx, _) = broadcast::channel(CHANNEL);
        let (ready, subscribed) = watch::channel(false);
        tokio::spawn(watcher(state.clone(), tx.clone(), ready));
        Hub { tx, subscribed }
    })
}

/// The fields of a stored workflow record the pages follow.
#[derive(Deserialize)]
struct RecordHead {
    workflow_id: String,
    state: String,
    #[serde(default)]
    tasks: HashMap<String, TaskHead>,
}

#[derive(Deserialize)]
struct TaskHead {
    state: String,
}

/// What is known of one workflow: its state and open gates.
#[derive(Default, Clone, PartialEq)]
struct Seen {
    state: String,
    open_gates: usize,
}

async fn watcher(state: AppState, tx: broadcast::Sender<LiveEvent>, ready: watch::Sender<bool>) {
    let nats = state.api.nats().clone();
    let subjects = state.api.subjects().clone();
    let records = format!("$KV.{}.>", subjects.bucket("workflows"));
    let subscribe = |s: String| {
        let nats = nats.clone();
        async move {
            nats.subscribe(s.clone())
                .await
                .map_err(
                    |e| tracing::warn!(subject = %s, error = %e, "live updates: cannot subscribe"),
                )
                .ok()
        }
    };
    let (Some(mut recs), Some(mut debates), Some(mut alerts)) = (
        subscribe(records).await,
        subscribe(subjects.debates_all()).await,
        subscribe(subjects.alerts_all()).await,
    ) else {
        return;
    };
    if let Err(e) = nats.flush().await {
        tracing::warn!(error = %e, "live updates: subscriptions not confirmed");
    }
    let _ = ready.send(true);
    let mut seen: HashMap<String, Seen> = HashMap::new();
    let mut changed: HashMap<String, (Seen, Seen)> = HashMap::new();
    let mut tick = tokio::time::interval(FLUSH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            Some(m) = recs.next() => {
                // Deletes and purges carry no body.
                let Ok(r) = serde_json::from_slice::<RecordHead>(&m.payload) else { continue };
                let now = Seen {
                    open_gates: r.tasks.values().filter(|t| t.state == "awaiting_approval").count(),
                    state: r.state,
                };
                let before = seen.insert(r.workflow_id.clone(), now.clone()).unwrap_or_default();
                if before != now {
                    let entry = changed.entry(r.workflow_id).or_insert((before, now.clone()));
                    entry.1 = now;
                }
            }
            Some(m) = debates.next() => {
                let id = m.subject.as_str().split('.').nth(2).unwrap_or_default().to_string();
                let _ = tx.send(LiveEvent { kind: "debate", data: json!({"debate_id": id}).to_string() });
            }
            Some(m) = alerts.next() => {
                let sev = m.subject.as_str().rsplit('.').next().unwrap_or_default().to_string();
                let _ = tx.send(LiveEvent { kind: "alert", data: json!({"severity": sev}).to_string() });
            }
            _ = tick.tick() => {
                for (id, (before, now)) in changed.drain() {
                    if before.state != now.state {
                        let data = json!({"workflow_id": id, "state": now.state}).to_string();
                        let _ = tx.send(LiveEvent { kind: "workflow", data });
                    }
                    if before.open_gates != now.open_gates {
                        let data = json!({"workflow_id": id, "open_gates": now.open_gates}).to_string();
                        let _ = tx.send(LiveEvent { kind: "gate", data });
                    }
                }
                // Finished workflows leave the coordinator's memory; keep
                // this map from growing with them.
                if seen.len() > 100_000 {
                    seen.retain(|_, s| s.state != "completed" && s.state != "failed");
                }
            }
            else => return,
        }
    }
}
