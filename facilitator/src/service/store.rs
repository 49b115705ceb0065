//! Debates and track records in JetStream KV, written with revision checks
//! so two facilitator instances never clobber each other's transitions.
//!
//! Bucket `<prefix>_debates`: key `debate.<debate_id>` → [`Debate`] JSON.
//! Bucket `<prefix>_credibility`: key `agent.<encoded agent>` → the agent's
//! [`TrackRecord`]s (newest last, capped).

use async_nats::jetstream::kv;
use bytes::Bytes;
use futures::StreamExt;

use crate::credibility::TrackRecord;
use crate::debate::Debate;

/// Errors of the stores.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The key changed under us (another writer).
    #[error("{0}: revision conflict (another writer changed it)")]
    Conflict(String),
    /// The key exists already.
    #[error("{0} exists already")]
    Exists(String),
    /// NATS failed.
    #[error("store: {0}")]
    Nats(String),
    /// A stored value does not parse.
    #[error("{0}: stored value does not parse: {1}")]
    Corrupt(String, String),
}

/// KV key of a debate (ids are validated to `[A-Za-z0-9_-]`).
pub fn debate_key(id: &str) -> String {
    format!("debate.{id}")
}

/// KV key of an agent's track record: characters outside
/// `[A-Za-z0-9_-]` are written as `=XX` (KV keys allow `=`).
pub fn agent_key(agent: &str) -> String {
    let mut out = String::from("agent.");
    for b in agent.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(b as char);
        } else {
            out.push_str(&format!("={b:02X}"));
        }
    }
    out
}

fn json<T: serde::Serialize>(v: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(v).expect("stored records serialise"))
}

fn update_err(key: &str, e: kv::UpdateError) -> StoreError {
    if e.kind() == kv::UpdateErrorKind::WrongLastRevision {
        StoreError::Conflict(key.to_string())
    } else {
        StoreError::Nats(format!("update {key}: {e}"))
    }
}

fn create_err(key: &str, e: kv::CreateError) -> StoreError {
    if e.kind() == kv::CreateErrorKind::AlreadyExists {
        StoreError::Exists(key.to_string())
    } else {
        StoreError::Nats(format!("create {key}: {e}"))
    }
}

async fn get_json<T: serde::de::DeserializeOwned>(
    kv: &kv::Store,
    key: &str,
) -> Result<Option<(T, u64)>, StoreError> {
    let entry = kv
        .entry(key)
        .await
        .map_err(|e| StoreError::Nats(format!("get {key}: {e}")))?;
    match entry {
        Some(e) if e.operation == kv::Operation::Put => {
            let v = serde_json::from_slice(&e.value)
                .map_err(|err| StoreError::Corrupt(key.to_string(), err.to_string()))?;
            Ok(Some((v, e.revision)))
        }
        _ => Ok(None),
    }
}

/// The debates bucket.
#[derive(Clone)]
pub struct DebateStore {
    kv: kv::Store,
}

impl std::fmt::Debug for DebateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DebateStore")
    }
}

impl DebateStore {
    /// Wraps a bucket.
    pub fn new(kv: kv::Store) -> Self {
        DebateStore { kv }
    }

    /// The bucket (for watching).
    pub fn kv(&self) -> &kv::Store {
        &self.kv
    }

    /// Stores a new debate; [`StoreError::Exists`] if the id is taken.
    pub async fn create(&self, d: &Debate) -> Result<u64, StoreError> {
        let key = debate_key(&d.debate_id);
        self.kv
            .create(&key, json(d))
            .await
            .map_err(|e| create_err(&key, e))
    }

    /// Writes `d` if the stored revision is still `revision`.
    pub async fn update(&self, d: &Debate, revision: u64) -> Result<u64, StoreError> {
        let key = debate_key(&d.debate_id);
        self.kv
            .update(&key, json(d), revision)
            .await
            .map_err(|e| update_err(&key, e))
    }

    /// One debate and its revision.
    pub async fn get(&self, id: &str) -> Result<Option<(Debate, u64)>, StoreError> {
        get_json(&self.kv, &debate_key(id)).await
    }

    /// Every stored debate (unreadable ones are logged and skipped).
    pub async fn list(&self) -> Result<Vec<Debate>, StoreError> {
        let mut keys = self
            .kv
            .keys()
            .await
            .map_err(|e| StoreError::Nats(format!("list keys: {e}")))?;
        let mut ids = Vec::new();
        while let Some(k) = keys.next().await {
            let k = k.map_err(|e| StoreError::Nats(format!("list keys: {e}")))?;
            if let Some(id) = k.strip_prefix("debate.") {
                ids.push(id.to_string());
            }
        }
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            match self.get(&id).await {
                Ok(Some((d, _))) => out.push(d),
                Ok(None) => {}
                Err(StoreError::Corrupt(k, e)) => {
                    tracing::error!(key = %k, error = %e, "skipping unreadable debate")
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

/// The track-record bucket.
#[derive(Clone)]
pub struct TrackStore {
    kv: kv::Store,
    cap: usize,
}

impl std::fmt::Debug for TrackStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrackStore")
            .field("cap", &self.cap)
            .finish()
    }
}

impl TrackStore {
    /// Wraps a bucket; at most `cap` records are kept per agent.
    pub fn new(kv: kv::Store, cap: usize) -> Self {
        TrackStore {
            kv,
            cap: cap.max(1),
        }
    }

    /// The agent's records (oldest first).
    pub async fn records(&self, agent: &str) -> Result<Vec<TrackRecord>, StoreError> {
        Ok(get_json::<Vec<TrackRecord>>(&self.kv, &agent_key(agent))
            .await?
            .map(|(v, _)| v)
            .unwrap_or_default())
    }

    /// Appends records of one agent (revision-checked, retried on
    /// conflict); returns how many the agent has now.
    pub async fn append(&self, agent: &str, new: &[TrackRecord]) -> Result<usize, StoreError> {
        let key = agent_key(agent);
        for _ in 0..10 {
            let current = get_json::<Vec<TrackRecord>>(&self.kv, &key).await?;
            let (mut all, rev) = current.map_or((Vec::new(), None), |(v, r)| (v, Some(r)));
            all.extend_from_slice(new);
            all.sort_by_key(|r| r.at);
            if all.len() > self.cap {
                all.drain(..all.len() - self.cap);
            }
            let res = match rev {
                Some(r) => self
                    .kv
                    .update(&key, json(&all), r)
                    .await
                    .map_err(|e| update_err(&key, e)),
                None => self
                    .kv
                    .create(&key, json(&all))
                    .await
                    .map_err(|e| create_err(&key, e)),
            };
            match res {
                Ok(_) => return Ok(all.len()),
                Err(StoreError::Conflict(_) | StoreError::Exists(_)) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Conflict(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_keys_are_kv_safe() {
        assert_eq!(agent_key("financial_analyst"), "agent.financial_analyst");
        assert_eq!(agent_key("a.b c"), "agent.a=2Eb=20c");
    }
}
