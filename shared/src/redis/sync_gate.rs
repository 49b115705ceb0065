//! The writer side of the pre-debate sync lock (seed 001, "Atomic Sync-Lock
//! Protocol"): while a debate participant's sync lock is taken, that
//! agent's findings wait.
//!
//! The facilitator takes `<prefix>:{lock:debate-sync:<agent>}` for every
//! participant, asks each to flush, cuts the snapshot at the findings
//! stream's last sequence and releases the locks
//! (`caucus_facilitator::service::sync::Snapshotter`). Every writer of
//! findings for an agent goes through [`SyncGate::publish_finding`]: it
//! reads the agent's lock and publishes only once the lock is free, so a
//! finding produced after the flush cannot slip in before the cut. The wait
//! is bounded (`max_wait`); a lock held longer than that is logged as an
//! error and the finding is published anyway (losing a finding is worse
//! than one landing inside a snapshot it was not flushed for). A crashed
//! facilitator's lock lapses after its TTL (`facilitator.sync_lock_ttl`,
//! 10 s), so a `max_wait` above that TTL only gives up when something
//! holds the lock against the protocol.

use std::time::Duration;

use async_nats::jetstream;
use async_nats::HeaderMap;
use bytes::Bytes;
use tokio::time::Instant;

use super::{keys, poll, OwnedLock, RedisPool};
use crate::subjects::Subjects;
use crate::Error;

/// Lock name of `agent`'s sync lock (key `<prefix>:{lock:debate-sync:<agent>}`).
pub fn sync_lock_name(agent: &str) -> String {
    format!("debate-sync:{agent}")
}

/// The Redis key of `agent`'s sync lock, e.g.
/// `caucus:{lock:debate-sync:financial}`.
pub fn sync_lock_key(prefix: &str, agent: &str) -> Result<String, Error> {
    keys::lock_key(prefix, &sync_lock_name(agent))
}

/// Shortest and longest pause between two reads of a held lock.
const POLL_MIN: Duration = Duration::from_millis(2);
const POLL_MAX: Duration = Duration::from_millis(25);

/// Waits until `agent`'s sync lock is free: `Ok(true)`, or `Ok(false)` when
/// it is still held after `max_wait`. One `GET` when the lock is free.
pub async fn wait_unlocked(
    redis: &RedisPool,
    prefix: &str,
    agent: &str,
    max_wait: Duration,
) -> Result<bool, Error> {
    let lock = OwnedLock::new(redis.clone(), prefix, &sync_lock_name(agent), "observer")?;
    let deadline = Instant::now() + max_wait;
    let schedule = poll::schedule(POLL_MIN, POLL_MAX, false);
    poll::until(deadline, schedule, || async {
        Ok(lock.owner().await?.is_none())
    })
    .await
}

/// Why a finding went out without the lock being seen free.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateBypass {
    /// The lock was still held when the wait ran out.
    #[error("sync lock `{key}` of agent `{agent}` still held after {waited:?} (worker.sync_lock_wait); published anyway, so this finding may fall inside a debate snapshot it was not flushed for")]
    HeldTooLong {
        /// The agent.
        agent: String,
        /// The lock's Redis key.
        key: String,
        /// How long the writer waited.
        waited: Duration,
    },
    /// Redis could not be read (or the agent's name is no valid key token).
    #[error("sync lock of agent `{agent}` could not be read ({error}); published without waiting")]
    Unreadable {
        /// The agent.
        agent: String,
        /// What failed.
        error: String,
    },
}

/// A finding the gate published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// Its sequence in the findings stream.
    pub sequence: u64,
    /// How long it waited for the agent's sync lock.
    pub waited: Duration,
    /// Set when it was published without seeing the lock free (logged).
    pub bypass: Option<GateBypass>,
}

/// Publishes findings through the agents' sync locks. Cheap to clone; one
/// gate serves every agent of a process.
#[derive(Clone)]
pub struct SyncGate {
    js: jetstream::Context,
    redis: RedisPool,
    subjects: Subjects,
    max_wait: Duration,
}

impl std::fmt::Debug for SyncGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncGate")
            .field("prefix", &self.subjects.prefix())
            .field("max_wait", &self.max_wait)
            .finish_non_exhaustive()
    }
}

impl SyncGate {
    /// A gate that waits at most `max_wait` for a held lock.
    pub fn new(
        js: jetstream::Context,
        redis: RedisPool,
        subjects: Subjects,
        max_wait: Duration,
    ) -> Self {
        SyncGate {
            js,
            redis,
            subjects,
            max_wait,
        }
    }

    /// The longest wait for a held lock.
    pub fn max_wait(&self) -> Duration {
        self.max_wait
    }

    /// Waits while `agent`'s sync lock is held. `Ok(waited)` once it is
    /// free; `Err` when it is still held after `max_wait` or cannot be read.
    pub async fn wait(&self, agent: &str) -> Result<Duration, GateBypass> {
        let t0 = Instant::now();
        match wait_unlocked(&self.redis, self.subjects.prefix(), agent, self.max_wait).await {
            Ok(true) => Ok(t0.elapsed()),
            Ok(false) => Err(GateBypass::HeldTooLong {
                agent: agent.to_string(),
                key: sync_lock_key(self.subjects.prefix(), agent).unwrap_or_default(),
                waited: t0.elapsed(),
            }),
            Err(e) => Err(GateBypass::Unreadable {
                agent: agent.to_string(),
                error: e.to_string(),
            }),
        }
    }

    /// Publishes a finding of `agent` on `caucus.findings.<key>` once the
    /// agent's sync lock is free (JetStream publish, waiting for the
    /// stream's ack). Put the de-duplication id (`Nats-Msg-Id`) and the
    /// trace context in `headers`. A lock held past `max_wait` or a Redis
    /// failure is logged and the finding published anyway
    /// ([`Published::bypass`]); only the publish itself can fail.
    pub async fn publish_finding(
        &self,
        agent: &str,
        key: &str,
        headers: HeaderMap,
        payload: Bytes,
    ) -> Result<Published, Error> {
        let t0 = Instant::now();
        let bypass = match self.wait(agent).await {
            Ok(waited) => {
                if waited >= Duration::from_millis(1) {
                    tracing::debug!(agent, ?waited, "finding waited for the debate sync lock");
                }
                None
            }
            Err(b) => {
                match &b {
                    GateBypass::HeldTooLong { .. } => tracing::error!(agent, "{b}"),
                    GateBypass::Unreadable { .. } => tracing::warn!(agent, "{b}"),
                }
                Some(b)
            }
        };
        let waited = t0.elapsed();
        let ack = self
            .js
            .publish_with_headers(self.subjects.findings(key), headers, payload)
            .await
            .map_err(|e| Error::nats(format!("publish finding of {agent}: {e}")))?
            .await
            .map_err(|e| Error::nats(format!("publish finding of {agent}: {e}")))?;
        Ok(Published {
            sequence: ack.sequence,
            waited,
            bypass,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_key_is_the_one_the_facilitator_takes() {
        assert_eq!(sync_lock_name("financial"), "debate-sync:financial");
        assert_eq!(
            sync_lock_key("caucus", "financial").unwrap(),
            "caucus:{lock:debate-sync:financial}"
        );
    }

    #[test]
    fn a_lock_held_too_long_names_the_agent_key_and_setting() {
        let b = GateBypass::HeldTooLong {
            agent: "financial".into(),
            key: "caucus:{lock:debate-sync:financial}".into(),
            waited: Duration::from_secs(15),
        };
        let s = b.to_string();
        assert!(
            s.contains("financial") && s.contains("worker.sync_lock_wait"),
            "{s}"
        );
    }
}
