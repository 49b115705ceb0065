//! Messages sent with `requires_response: true` and their answers, in the
//! KV bucket `responses` (one key per message id, kept for
//! `coordinator.findings_lookback`): registered when the message is read,
//! answered by a `confirmation` whose `correlation_id` (or
//! `content.in_reply_to`) names it, and alerted once when no answer came
//! within `coordinator.response_timeout` for its priority.
//!
//! The leader keeps the unanswered ones in memory (read back from the
//! bucket when its term begins) and checks them on every tick. Any
//! instance may read an entry (the gate package does).

use std::collections::HashMap;
use std::time::Duration;

use async_nats::jetstream::kv;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use caucus_shared::envelope::Priority;

/// KV bucket of awaited responses.
pub const RESPONSES_BUCKET: &str = "responses";
/// Version of a stored [`ResponseRecord`].
pub const RESPONSE_SCHEMA_VERSION: u32 = 1;
/// Unanswered messages held at once, at most: beyond it the oldest are
/// dropped from the check (with a warning).
pub const MAX_PENDING: usize = 100_000;

/// The answer a `confirmation` gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// Who confirmed (the confirmation's `from_agent`).
    pub by: String,
    /// Whether it was used (the confirmation's `content.used`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used: Option<bool>,
    /// How it was used, or why not (`content.note`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The confirmation's id.
    pub confirmation_id: String,
    /// When the confirmation was stored.
    pub at: DateTime<Utc>,
}

/// One awaited response, as stored under the message's id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResponseRecord {
    /// Version of this record.
    pub schema_version: u32,
    /// The message's id.
    pub message_id: String,
    /// Its `message_type` (`finding`, `request`, …).
    pub message_type: String,
    /// Its sender (where the confirmation goes: `caucus.msg.<from_agent>`).
    pub from_agent: String,
    /// Its addressee as sent.
    pub to_agent: String,
    /// The item it is about.
    pub item: String,
    /// Its priority.
    pub priority: Priority,
    /// Its one-line text (`content.finding` or `content.query`).
    pub text: String,
    /// When it was stored.
    pub stored_at: DateTime<Utc>,
    /// When the answer is due.
    pub due_at: DateTime<Utc>,
    /// The answer, once one came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
    /// When the overdue alert went out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alerted_at: Option<DateTime<Utc>>,
}

/// Why the bucket could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ResponseStoreError {
    /// A read failed.
    #[error("reading responses: {0}")]
    Read(String),
    /// A write failed.
    #[error("writing responses: {0}")]
    Write(#[from] kv::PutError),
    /// A delete failed.
    #[error("deleting a response: {0}")]
    Delete(String),
    /// A stored record does not parse.
    #[error("stored response {key} does not parse: {source}")]
    Decode {
        /// Its key.
        key: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
}

/// The `responses` bucket.
#[derive(Clone)]
pub struct ResponseStore {
    kv: kv::Store,
}

/// The bucket key of a message id. Ids are UUIDs, but senders choose them
/// and derived ids hold `:`; KV keys allow only `[-/_=.A-Za-z0-9]`, so
/// every other byte is written `=XX`, and `.` too (a key may not start or
/// end with one).
fn key_of(message_id: &str) -> String {
    let mut out = String::with_capacity(message_id.len());
    for b in message_id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            out.push(b as char);
        } else {
            out.push_str(&format!("={b:02X}"));
        }
    }
    if out.is_empty() {
        out.push('=');
    }
    out
}

impl ResponseStore {
    /// Over an opened bucket.
    pub fn new(kv: kv::Store) -> Self {
        ResponseStore { kv }
    }

    /// The record of `message_id`, if it awaits (or got) a response.
    pub async fn get(
        &self,
        message_id: &str,
    ) -> Result<Option<ResponseRecord>, ResponseStoreError> {
        let key = key_of(message_id);
        let Some(bytes) = self
            .kv
            .get(&key)
            .await
            .map_err(|e| ResponseStoreError::Read(e.to_string()))?
        else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| ResponseStoreError::Decode { key, source })
    }

    /// Stores `rec` under its message id.
    pub async fn put(&self, rec: &ResponseRecord) -> Result<(), ResponseStoreError> {
        let body = serde_json::to_vec(rec).expect("a response record serialises");
        self.kv
            .put(key_of(&rec.message_id), Bytes::from(body))
            .await?;
        Ok(())
    }

    /// Removes the record of `message_id`.
    pub async fn delete(&self, message_id: &str) -> Result<(), ResponseStoreError> {
        self.kv
            .delete(key_of(message_id))
            .await
            .map_err(|e| ResponseStoreError::Delete(e.to_string()))
    }

    /// Every record still awaiting an answer or an alert.
    pub async fn open(&self) -> Result<Vec<ResponseRecord>, ResponseStoreError> {
        let read = |e: &dyn std::fmt::Display| ResponseStoreError::Read(e.to_string());
        let mut keys = self.kv.keys().await.map_err(|e| read(&e))?;
        let mut out = Vec::new();
        while let Some(k) = keys.next().await {
            let k = k.map_err(|e| read(&e))?;
            let Some(bytes) = self.kv.get(&k).await.map_err(|e| read(&e))? else {
                continue;
            };
            match serde_json::from_slice::<ResponseRecord>(&bytes) {
                Ok(r) if r.answer.is_none() && r.alerted_at.is_none() => out.push(r),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(key = %k, error = %e, "skipping a response record that does not parse")
                }
            }
        }
        Ok(out)
    }
}

/// The unanswered messages the leader checks, by id.
#[derive(Debug, Default)]
pub struct Pending {
    by_id: HashMap<String, ResponseRecord>,
}

impl Pending {
    /// Holds `rec` (unless answered or alerted already).
    pub fn hold(&mut self, rec: ResponseRecord) {
        if rec.answer.is_some() || rec.alerted_at.is_some() {
            self.by_id.remove(&rec.message_id);
            return;
        }
        if self.by_id.len() >= MAX_PENDING && !self.by_id.contains_key(&rec.message_id) {
            if let Some(oldest) = self
                .by_id
                .values()
                .min_by_key(|r| r.due_at)
                .map(|r| r.message_id.clone())
            {
                tracing::warn!(message_id = %oldest, "too many unanswered messages; no longer checking the oldest");
                self.by_id.remove(&oldest);
            }
        }
        self.by_id.insert(rec.message_id.clone(), rec);
    }

    /// Stops checking `message_id`.
    pub fn release(&mut self, message_id: &str) -> Option<ResponseRecord> {
        self.by_id.remove(message_id)
    }

    /// The records due by `now`, oldest first.
    pub fn overdue(&self, now: DateTime<Utc>) -> Vec<ResponseRecord> {
        let mut v: Vec<ResponseRecord> = self
            .by_id
            .values()
            .filter(|r| r.due_at <= now)
            .cloned()
            .collect();
        v.sort_by_key(|r| r.due_at);
        v
    }

    /// How many are held.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether none are held.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

/// When an answer to a message stored at `stored_at` is due.
pub fn due_at(stored_at: DateTime<Utc>, timeout: Duration) -> DateTime<Utc> {
    stored_at + chrono::Duration::from_std(timeout).unwrap_or(chrono::Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_valid_kv_keys_and_distinct() {
        let ids = ["0192-abc", "CAUCUS_FINDINGS:7", "a.b", "x y~z", ""];
        let keys: Vec<String> = ids.iter().map(|i| key_of(i)).collect();
        for k in &keys {
            assert!(!k.is_empty());
            assert!(k
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_=".contains(&b)));
        }
        assert_eq!(keys[0], "0192-abc");
        assert_eq!(keys[1], "CAUCUS_FINDINGS=3A7");
        let unique: std::collections::HashSet<_> = keys.iter().collect();
        assert_eq!(unique.len(), keys.len());
    }
}
