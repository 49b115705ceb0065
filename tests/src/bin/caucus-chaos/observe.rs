//! Everything the tool learns about the system, from outside: the
//! coordinator's control API (NATS request/reply, as the `caucus` CLI
//! does), a live tap of the task-event subjects, the `CAUCUS_EVENTS`
//! stream, and the KV stream of the `caucus_workflows` bucket.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use async_nats::jetstream::{self, consumer};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde_json::{json, Value};

use caucus_shared::nats::{api_request, ApiError};
use caucus_shared::subjects::{StreamKind, Subjects};
use caucus_shared::task::{TaskEvent, TaskStatus};

use crate::analysis::{Ev, KvTracker};

/// Time-out of one API request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Pause between two tries of a request nobody could answer.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

fn ev_of(e: TaskEvent, seen_at: DateTime<Utc>) -> Ev {
    Ev {
        task_id: e.task_id,
        workflow_id: e.workflow_id,
        agent_type: e.agent_type,
        attempt: e.attempt,
        status: e.status,
        worker_id: e.worker_id,
        started_at: e.started_at,
        at: e.at,
        seen_at,
    }
}

/// When the server stored `m`.
fn stored_at(m: &jetstream::Message) -> Option<DateTime<Utc>> {
    let nanos = m.info().ok()?.published.unix_timestamp_nanos();
    Some(DateTime::from_timestamp_nanos(i64::try_from(nanos).ok()?))
}

/// A client of the coordinator's control API.
#[derive(Clone)]
pub struct Api {
    /// The tool's NATS connection.
    pub client: async_nats::Client,
    subjects: Subjects,
    /// Whether the coordinator takes `idempotency_key` (cleared when it
    /// refuses the field).
    keys: Arc<AtomicBool>,
}

/// What one submission wave got.
#[derive(Debug, Default)]
pub struct Submitted {
    /// (workflow id, item) the coordinator acknowledged (in a reply, or
    /// found by item after a reply was lost).
    pub workflows: Vec<(String, String)>,
    /// Requests that failed in a way that may have stored them.
    pub ambiguous: u32,
    /// Items never acknowledged before the deadline.
    pub unsubmitted: Vec<String>,
    /// Whether the submissions carried an idempotency key.
    pub keyed: bool,
}

fn retryable(e: &ApiError) -> bool {
    // Not handled by anyone: safe to send again as it is.
    e.code == "standby" || e.code == "no_responders"
}

impl Api {
    /// Connects to `url`; the connection rides out server restarts.
    pub async fn connect(url: &str) -> Result<Api> {
        let client = async_nats::ConnectOptions::new()
            .name("caucus-chaos")
            .subscription_capacity(1 << 16)
            .retry_on_initial_connect()
            .connect(url)
            .await
            .with_context(|| format!("connect to {url}"))?;
        Ok(Api {
            client,
            subjects: Subjects::default(),
            keys: Arc::new(AtomicBool::new(true)),
        })
    }

    /// JetStream on the same connection.
    pub fn js(&self) -> jetstream::Context {
        jetstream::new(self.client.clone())
    }

    async fn call(&self, op: &str, body: &Value) -> Result<Value, ApiError> {
        api_request(
            &self.client,
            &self.subjects,
            "coordinator",
            op,
            body,
            REQUEST_TIMEOUT,
        )
        .await
    }

    /// `status` from the leader, retried (standby, no responder, time-out)
    /// until `deadline`.
    pub async fn status(&self, body: Value, deadline: Instant) -> Result<Value> {
        loop {
            match self.call("status", &body).await {
                Ok(v) => return Ok(v),
                Err(e) if Instant::now() >= deadline => {
                    bail!("status: {}: {}", e.code, e.message)
                }
                Err(_) => tokio::time::sleep(RETRY_PAUSE).await,
            }
        }
    }

    /// Submits `items` through the built-in `stock-analysis` pipeline with
    /// `auto_approve_gates`, until every item is acknowledged or `deadline`.
    /// Every try carries the same `idempotency_key`, so a retry after a
    /// time-out or a lost reply creates nothing twice. A coordinator that
    /// does not know the field gets none; then, after a failure that may
    /// have stored the workflows, the items are looked up in `status`
    /// before the rest is sent again.
    pub async fn submit(
        &self,
        items: &[String],
        unit_ms: u64,
        key: &str,
        deadline: Instant,
    ) -> Submitted {
        let mut out = Submitted::default();
        let mut pending: Vec<String> = items.to_vec();
        while !pending.is_empty() && Instant::now() < deadline {
            let with_key = self.keys.load(Ordering::SeqCst);
            let mut body = json!({"items": pending, "pipeline": "stock-analysis",
                                  "time_unit_ms": unit_ms, "auto_approve_gates": true});
            if with_key {
                body["idempotency_key"] = json!(key);
            }
            match self.call("submit", &body).await {
                Ok(r) => {
                    for w in r["workflows"].as_array().into_iter().flatten() {
                        let id = w["workflow_id"].as_str().unwrap_or_default();
                        let item = w["item"].as_str().unwrap_or_default();
                        out.workflows.push((id.to_string(), item.to_string()));
                    }
                    pending.clear();
                }
                Err(e) if with_key && e.message.contains("idempotency_key") => {
                    self.keys.store(false, Ordering::SeqCst);
                }
                Err(e) if retryable(&e) => tokio::time::sleep(RETRY_PAUSE).await,
                Err(_) if with_key => {
                    out.ambiguous += 1;
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                Err(_) => {
                    out.ambiguous += 1;
                    if let Ok(r) = self.status(json!({}), deadline).await {
                        let want: HashSet<&String> = pending.iter().collect();
                        let mut found = HashSet::new();
                        for w in r["workflows"].as_array().into_iter().flatten() {
                            let item = w["item"].as_str().unwrap_or_default().to_string();
                            if want.contains(&item) {
                                let id = w["workflow_id"].as_str().unwrap_or_default();
                                out.workflows.push((id.to_string(), item.clone()));
                                found.insert(item);
                            }
                        }
                        pending.retain(|i| !found.contains(i));
                    }
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
            }
        }
        out.unsubmitted = pending;
        out.keyed = self.keys.load(Ordering::SeqCst);
        out
    }
}

/// Every task event published while it runs, from a plain subscription
/// to `caucus.events.task.>`: it also sees the events the stream drops as
/// duplicates (same attempt, same status, another execution).
pub struct Tap {
    /// Events so far.
    pub events: Arc<Mutex<Vec<Ev>>>,
    /// What each worker is running now.
    pub busy: crate::cluster::Busy,
    task: tokio::task::JoinHandle<()>,
}

impl Tap {
    /// Subscribes (before anything is submitted).
    pub async fn start(api: &Api) -> Result<Tap> {
        let mut sub = api
            .client
            .subscribe(api.subjects.task_events_all())
            .await
            .map_err(|e| anyhow!("subscribe: {e}"))?;
        api.client
            .flush()
            .await
            .map_err(|e| anyhow!("flush: {e}"))?;
        let events = Arc::new(Mutex::new(Vec::new()));
        let busy: crate::cluster::Busy = Arc::default();
        let (sink, running) = (events.clone(), busy.clone());
        let task = tokio::spawn(async move {
            while let Some(m) = sub.next().await {
                let now = Utc::now();
                if let Ok(e) = serde_json::from_slice::<TaskEvent>(&m.payload) {
                    {
                        let mut r = running.lock().expect("busy");
                        let of = r.entry(e.worker_id.clone()).or_default();
                        let key = (e.task_id.clone(), e.attempt);
                        match e.status {
                            TaskStatus::Started => of.insert(key),
                            TaskStatus::Completed | TaskStatus::Failed => of.remove(&key),
                            TaskStatus::Progress => false,
                        };
                    }
                    sink.lock().expect("tap").push(ev_of(e, now));
                }
            }
        });
        Ok(Tap { events, busy, task })
    }

    /// Stops and returns what it saw.
    pub fn finish(self) -> Vec<Ev> {
        self.task.abort();
        std::mem::take(&mut *self.events.lock().expect("tap"))
    }
}

/// Reads the KV stream of the workflow records from its first message,
/// as they are written, into a [`KvTracker`]; after an error (NATS
/// restarted) it carries on from the next sequence.
pub struct KvWatch {
    /// What the revisions showed.
    pub tracker: Arc<Mutex<KvTracker>>,
    /// Last stream sequence read.
    pub last_seq: Arc<AtomicU64>,
    /// The KV stream's name.
    pub stream: String,
    task: tokio::task::JoinHandle<()>,
}

impl KvWatch {
    /// Starts reading `KV_<prefix>_workflows`.
    pub fn start(api: &Api) -> KvWatch {
        let bucket = api.subjects.bucket("workflows");
        let stream = format!("KV_{bucket}");
        let prefix = format!("$KV.{bucket}.");
        let tracker = Arc::new(Mutex::new(KvTracker::default()));
        let last_seq = Arc::new(AtomicU64::new(0));
        let js = api.js();
        let (t, seq, name) = (tracker.clone(), last_seq.clone(), stream.clone());
        let task = tokio::spawn(async move {
            loop {
                let next = seq.load(Ordering::SeqCst) + 1;
                if let Err(e) = follow(&js, &name, &prefix, next, &t, &seq).await {
                    let at = seq.load(Ordering::SeqCst) + 1;
                    tracing_free_log(&format!("kv watch: {e:#}; resuming at sequence {at}"));
                }
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        });
        KvWatch {
            tracker,
            last_seq,
            stream,
            task,
        }
    }

    /// Waits until it has read everything stored so far, then stops.
    pub async fn finish(self, js: &jetstream::Context, deadline: Instant) -> Result<KvTracker> {
        loop {
            let last = match js.get_stream(&self.stream).await {
                Ok(mut s) => s.info().await.map(|i| i.state.last_sequence).ok(),
                Err(_) => None,
            };
            if let Some(last) = last {
                if self.last_seq.load(Ordering::SeqCst) >= last {
                    break;
                }
            }
            if Instant::now() >= deadline {
                self.task.abort();
                bail!(
                    "the KV watch did not catch up (read up to {}, stream at {last:?})",
                    self.last_seq.load(Ordering::SeqCst)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.task.abort();
        let t = self.tracker.lock().expect("kv").clone();
        Ok(t)
    }
}

/// The tool prints its own progress on stderr; a watcher's hiccup is a line.
fn tracing_free_log(line: &str) {
    eprintln!("[chaos] {line}");
}

async fn follow(
    js: &jetstream::Context,
    stream: &str,
    prefix: &str,
    start: u64,
    tracker: &Mutex<KvTracker>,
    seq: &AtomicU64,
) -> Result<()> {
    let s = js.get_stream(stream).await?;
    let c = s
        .create_consumer(consumer::pull::Config {
            deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                start_sequence: start,
            },
            ack_policy: consumer::AckPolicy::None,
            inactive_threshold: Duration::from_secs(30),
            ..Default::default()
        })
        .await?;
    let mut msgs = c
        .stream()
        .expires(Duration::from_secs(2))
        .heartbeat(Duration::from_millis(500))
        .messages()
        .await?;
    while let Some(m) = msgs.next().await {
        let m = m?;
        let Ok(info) = m.info() else { continue };
        let n = info.stream_sequence;
        if n < seq.load(Ordering::SeqCst) + 1 {
            continue;
        }
        let deleted = m
            .headers
            .as_ref()
            .and_then(|h| h.get("KV-Operation"))
            .is_some();
        if !deleted {
            if let (Some(id), Ok(v)) = (
                m.subject.as_str().strip_prefix(prefix),
                serde_json::from_slice::<Value>(&m.payload),
            ) {
                tracker.lock().expect("kv").observe(id, &v);
            }
        }
        seq.store(n, Ordering::SeqCst);
    }
    Ok(())
}

/// Every task event stored in `CAUCUS_EVENTS`.
pub async fn stored_events(api: &Api) -> Result<Vec<Ev>> {
    let js = api.js();
    let stream = js
        .get_stream(api.subjects.stream(StreamKind::Events))
        .await?;
    let mut c = stream
        .create_consumer(consumer::pull::Config {
            filter_subject: api.subjects.task_events_all(),
            ack_policy: consumer::AckPolicy::None,
            inactive_threshold: Duration::from_secs(30),
            ..Default::default()
        })
        .await?;
    let total = c.info().await?.num_pending as usize;
    let mut out = Vec::with_capacity(total);
    let mut read = 0usize;
    if total == 0 {
        return Ok(out);
    }
    let mut msgs = c
        .stream()
        .expires(Duration::from_secs(2))
        .heartbeat(Duration::from_millis(500))
        .messages()
        .await?;
    while read < total {
        let m = tokio::time::timeout(Duration::from_secs(20), msgs.next())
            .await
            .context("reading CAUCUS_EVENTS timed out")?
            .context("CAUCUS_EVENTS ended early")??;
        read += 1;
        let at = stored_at(&m).unwrap_or_else(Utc::now);
        if let Ok(e) = serde_json::from_slice::<TaskEvent>(&m.payload) {
            out.push(ev_of(e, at));
        }
    }
    Ok(out)
}

/// Every message on `filter` in `stream` as (subject, JSON body); empty
/// when the stream does not exist.
pub async fn stream_bodies(
    api: &Api,
    stream: StreamKind,
    filter: &str,
) -> Result<Vec<(String, Value)>> {
    let js = api.js();
    let Ok(stream) = js.get_stream(api.subjects.stream(stream)).await else {
        return Ok(Vec::new());
    };
    let mut c = stream
        .create_consumer(consumer::pull::Config {
            filter_subject: filter.to_string(),
            ack_policy: consumer::AckPolicy::None,
            inactive_threshold: Duration::from_secs(30),
            ..Default::default()
        })
        .await?;
    let total = c.info().await?.num_pending as usize;
    let mut out = Vec::with_capacity(total);
    if total == 0 {
        return Ok(out);
    }
    let mut msgs = c
        .stream()
        .expires(Duration::from_secs(2))
        .heartbeat(Duration::from_millis(500))
        .messages()
        .await?;
    while out.len() < total {
        let m = tokio::time::timeout(Duration::from_secs(20), msgs.next())
            .await
            .context("reading a stream timed out")?
            .context("the stream ended early")??;
        let body = serde_json::from_slice(&m.payload).unwrap_or(Value::Null);
        out.push((m.subject.to_string(), body));
    }
    Ok(out)
}

/// Polls until the task queue is empty and no task event has been stored
/// for `quiet`; `false` at the deadline.
pub async fn quiesce(api: &Api, quiet: Duration, deadline: Instant) -> bool {
    let js = api.js();
    let mut last: Option<(u64, Instant)> = None;
    loop {
        let tasks = match js.get_stream(api.subjects.stream(StreamKind::Tasks)).await {
            Ok(mut s) => s.info().await.map(|i| i.state.messages).ok(),
            Err(_) => None,
        };
        let events = match js.get_stream(api.subjects.stream(StreamKind::Events)).await {
            Ok(mut s) => s.info().await.map(|i| i.state.last_sequence).ok(),
            Err(_) => None,
        };
        if let (Some(tasks), Some(seq)) = (tasks, events) {
            match last {
                Some((s, since)) if s == seq => {
                    if tasks == 0 && since.elapsed() >= quiet {
                        return true;
                    }
                }
                _ => last = Some((seq, Instant::now())),
            }
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
