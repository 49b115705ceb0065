//! The pre-debate sync lock (seed 001, "Atomic Sync-Lock Protocol").
//!
//! 1. Take each participant's sync lock (`<prefix>:{lock:debate-sync:<agent>}`,
//!    in name order so two debates sharing agents cannot deadlock).
//! 2. Ask every participant to flush its working memory: a `request`
//!    envelope on `caucus.msg.<agent>` whose content carries
//!    `parameters.reply_to`; the agent publishes what it holds to
//!    `caucus.findings.<key>` (waiting for the stream's ack), then answers
//!    on `reply_to` with a `confirmation` envelope. Agents that do not
//!    answer within `flush_timeout` are named in the snapshot.
//! 3. Cut the snapshot: the CAUCUS_FINDINGS stream's last sequence
//!    (`snap_<seq>`): "as of the snapshot" means "up to that sequence".
//! 4. Release the locks.
//!
//! While a participant's lock is held its writes wait: the writer side
//! ([`SyncGate::publish_finding`], [`wait_unlocked`], [`sync_lock_name`])
//! lives in `caucus_shared::redis` because every worker publishes its
//! findings through it; it is re-exported here.

use std::collections::BTreeSet;
use std::time::Duration;

use async_nats::jetstream;
use caucus_shared::envelope::{Envelope, MessageType};
use caucus_shared::messages::{Confirmation, Request};
pub use caucus_shared::redis::{sync_lock_key, sync_lock_name, wait_unlocked, SyncGate};
use caucus_shared::redis::{OwnedLock, RedisPool};
use caucus_shared::subjects::{StreamKind, Subjects};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde_json::json;
use tokio::time::Instant;

use crate::debate::Snapshot;

/// The `query` of a flush request.
pub const FLUSH_QUERY: &str = "flush_working_memory";

/// Errors of the sync protocol.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// A participant's lock stayed taken (another debate is syncing).
    #[error("sync lock of `{0}` is busy")]
    Busy(String),
    /// Redis failed.
    #[error("sync lock: {0}")]
    Redis(String),
    /// NATS failed.
    #[error("snapshot: {0}")]
    Nats(String),
}

/// Takes snapshots.
#[derive(Clone)]
pub struct Snapshotter {
    /// NATS client (flush requests).
    pub nats: async_nats::Client,
    /// JetStream (stream sequence).
    pub js: jetstream::Context,
    /// Subject builders.
    pub subjects: Subjects,
    /// Redis (locks).
    pub redis: RedisPool,
    /// Lock TTL.
    pub lock_ttl: Duration,
    /// Longest wait to take the locks.
    pub lock_wait: Duration,
    /// Longest wait for flush acknowledgements.
    pub flush_timeout: Duration,
    /// Sender name on flush requests.
    pub from: String,
}

impl std::fmt::Debug for Snapshotter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshotter").finish_non_exhaustive()
    }
}

impl Snapshotter {
    /// Runs the protocol for `participants`; `now` stamps the snapshot.
    pub async fn snapshot(
        &self,
        debate_id: &str,
        participants: &[String],
        now: DateTime<Utc>,
    ) -> Result<Snapshot, SyncError> {
        let agents: BTreeSet<&String> = participants.iter().collect();
        let token = uuid::Uuid::new_v4().simple().to_string();
        let mut held: Vec<OwnedLock> = Vec::new();
        let result = async {
            for a in &agents {
                let lock = OwnedLock::new(
                    self.redis.clone(),
                    self.subjects.prefix(),
                    &sync_lock_name(a),
                    &token,
                )
                .map_err(|e| SyncError::Redis(e.to_string()))?;
                let got = lock
                    .acquire(self.lock_ttl, Instant::now() + self.lock_wait)
                    .await
                    .map_err(|e| SyncError::Redis(e.to_string()))?;
                if !got {
                    return Err(SyncError::Busy((*a).clone()));
                }
                held.push(lock);
            }
            let (flushed, unresponsive) = self.flush(debate_id, &agents).await?;
            let seq = self.last_finding_sequence().await?;
            Ok(Snapshot {
                snapshot_id: format!("snap_{seq}"),
                taken_at: now,
                flushed,
                unresponsive,
            })
        }
        .await;
        for lock in held {
            if let Err(e) = lock.release().await {
                tracing::warn!(lock = lock.name(), error = %e, "cannot release sync lock; it lapses after its TTL");
            }
        }
        result
    }

    async fn flush(
        &self,
        debate_id: &str,
        agents: &BTreeSet<&String>,
    ) -> Result<(Vec<String>, Vec<String>), SyncError> {
        let inbox = self.nats.new_inbox();
        let mut sub = self
            .nats
            .subscribe(inbox.clone())
            .await
            .map_err(|e| SyncError::Nats(format!("subscribe {inbox}: {e}")))?;
        let flush_id = uuid::Uuid::now_v7().to_string();
        for a in agents {
            let req = Request {
                query: FLUSH_QUERY.into(),
                scope: Some(
                    "publish unpublished working memory to caucus.findings, then confirm".into(),
                ),
                parameters: json!({ "debate_id": debate_id, "reply_to": inbox }),
                deadline: None,
                rationale: Some(format!("pre-debate sync for debate {debate_id}")),
                item: None,
                workflow_id: None,
            };
            let env = Envelope::with_content(self.from.clone(), &req)
                .map_err(|e| SyncError::Nats(e.to_string()))?
                .to(a.as_str())
                .with_requires_response(true)
                .with_correlation_id(flush_id.clone());
            // Core publish with a reply subject: agents on a plain
            // subscription can answer `msg.reply`; the stream's own publish
            // ack also lands in the inbox and is ignored below.
            self.nats
                .publish_with_reply(self.subjects.msg(a), inbox.clone(), env.to_bytes())
                .await
                .map_err(|e| SyncError::Nats(format!("flush request to {a}: {e}")))?;
        }
        let deadline = Instant::now() + self.flush_timeout;
        let mut pending: BTreeSet<String> = agents.iter().map(|a| (*a).clone()).collect();
        let mut flushed = Vec::new();
        while !pending.is_empty() {
            let msg = match tokio::time::timeout_at(deadline, sub.next()).await {
                Ok(Some(m)) => m,
                Ok(None) | Err(_) => break,
            };
            let Ok(env) = Envelope::decode(&msg.payload, 64 * 1024) else {
                continue;
            };
            let answers = env.message_type == MessageType::Confirmation
                && env.correlation_id.as_deref() == Some(flush_id.as_str())
                && env
                    .content_as::<Confirmation>()
                    .is_ok_and(|c| c.agrees != Some(false));
            if answers && pending.remove(&env.from_agent) {
                flushed.push(env.from_agent);
            }
        }
        let _ = sub.unsubscribe().await;
        Ok((flushed, pending.into_iter().collect()))
    }

    async fn last_finding_sequence(&self) -> Result<u64, SyncError> {
        let name = self.subjects.stream(StreamKind::Findings);
        let mut stream = self
            .js
            .get_stream(&name)
            .await
            .map_err(|e| SyncError::Nats(format!("stream {name}: {e}")))?;
        let info = stream
            .info()
            .await
            .map_err(|e| SyncError::Nats(format!("stream {name}: {e}")))?;
        Ok(info.state.last_sequence)
    }
}
