//! Side effects of the engine's outcomes: the KV record, then the messages,
//! then the record again to say they are out.
//!
//! Every step is idempotent by id, which is what makes replays and a second
//! instance harmless:
//! - the record is created create-only under the deterministic correlation
//!   id, and updated revision-checked (a conflict re-reads and re-merges);
//! - a message is published only if the record does not already say it is
//!   out, and carries a `Nats-Msg-Id`, so JetStream drops a repeat sent
//!   within the stream's duplicate window (two instances acting at once,
//!   or a crash between publishing and updating the record).
//!
//! The one gap: a process that dies after publishing but before updating the
//! record, and is replayed more than the duplicate window (2 min) later,
//! publishes that step again; consumers of `batch_trigger` treat a repeat of
//! `(correlation_id, item)` as a no-op.

use std::collections::{BTreeMap, BTreeSet};

use async_nats::jetstream;
use async_nats::HeaderMap;
use caucus_shared::clock::SharedClock;
use caucus_shared::envelope::Priority;
use caucus_shared::subjects::Subjects;
use futures::future::try_join_all;

use crate::engine::Correlation;
use crate::outbox::{self, Outgoing};
use crate::store::{CorrelationRecord, CorrelationStore, Created, RecordStatus, StoreError};

/// Revision conflicts tolerated in a row before giving up on one step.
const MAX_CONFLICTS: u32 = 8;

/// What went wrong while applying an outcome (the caller retries).
#[derive(Debug, thiserror::Error)]
pub enum EffectError {
    /// KV failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A publish failed or was not acknowledged.
    #[error("publish {subject} ({msg_id}): {reason}")]
    Publish {
        /// Subject.
        subject: String,
        /// Message id.
        msg_id: String,
        /// Why.
        reason: String,
    },
    /// The record kept changing under us.
    #[error("correlation {0}: still conflicting after {MAX_CONFLICTS} attempts")]
    Contended(String),
}

/// Workflow ids per item, as the failures named them.
pub type Workflows = BTreeMap<String, BTreeSet<String>>;

/// Applies outcomes to KV and the streams.
#[derive(Clone)]
pub struct Effects {
    js: jetstream::Context,
    subjects: Subjects,
    store: CorrelationStore,
    severity: String,
    priority: Priority,
    instance_id: String,
    clock: SharedClock,
}

impl std::fmt::Debug for Effects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Effects")
            .field("severity", &self.severity)
            .field("instance_id", &self.instance_id)
            .finish_non_exhaustive()
    }
}

/// What one [`Effects::sync`] published.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Published {
    /// A `correlation_detected` went out.
    pub detected: bool,
    /// Items whose batch trigger and card went out.
    pub items: Vec<String>,
}

impl Effects {
    /// Effects publishing under `subjects`, cards at `severity`.
    pub fn new(
        js: jetstream::Context,
        subjects: Subjects,
        store: CorrelationStore,
        severity: &str,
        instance_id: &str,
        clock: SharedClock,
    ) -> Self {
        Effects {
            js,
            subjects,
            store,
            priority: severity.parse().unwrap_or(Priority::High),
            severity: severity.to_string(),
            instance_id: instance_id.to_string(),
            clock,
        }
    }

    /// The store the records live in.
    pub fn store(&self) -> &CorrelationStore {
        &self.store
    }

    /// Brings the world in line with the engine's view `c` of an open
    /// incident: the record exists and holds `c`; `correlation_detected`
    /// and the first trigger are out; every item of `c` has its card and
    /// trigger. Publishes only what the record does not already show.
    pub async fn sync(
        &self,
        c: &Correlation,
        workflows: &Workflows,
    ) -> Result<Published, EffectError> {
        for _ in 0..MAX_CONFLICTS {
            let (mut rec, revision) = self.load_or_create(c).await?;
            rec.merge(c);
            rec.merge_workflows(workflows);
            let mut out: Vec<Outgoing> = Vec::new();
            let mut published = Published::default();
            if !rec.detection_published {
                // The first trigger and the detection carry the items at
                // detection, so they are the same messages whoever sends them.
                let initial = rec.initial_items.clone();
                out.push(outbox::batch_trigger(&self.subjects, &rec, &initial, None));
                out.push(outbox::correlation_detected(&self.subjects, &rec));
                published.detected = true;
            }
            for item in &rec.items {
                if rec.is_triggered(item) {
                    continue;
                }
                if !rec.initial_items.contains(item) {
                    out.push(outbox::batch_trigger(
                        &self.subjects,
                        &rec,
                        std::slice::from_ref(item),
                        Some(item),
                    ));
                }
                published.items.push(item.clone());
            }
            for item in &published.items {
                out.push(outbox::alert(
                    &self.subjects,
                    &rec,
                    item,
                    &self.severity,
                    self.priority,
                ));
            }
            let sent = out.len();
            let duplicates = self.publish_all(out).await?;
            rec.detection_published = true;
            rec.triggered_items.extend(published.items.iter().cloned());
            match self.store.update(&rec, revision).await {
                Ok(_) => {
                    if sent > 0 {
                        tracing::info!(
                            correlation_id = %rec.correlation_id, detected = published.detected,
                            items = ?published.items, messages = sent, duplicates,
                            "published correlation effects"
                        );
                    }
                    return Ok(published);
                }
                Err(StoreError::Conflict(_)) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(EffectError::Contended(c.correlation_id.clone()))
    }

    /// Writes the engine's view `c` into an existing record without
    /// publishing (a repeated failure of a known item). A missing record
    /// is left alone: [`Effects::sync`] creates records.
    pub async fn refresh(&self, c: &Correlation, workflows: &Workflows) -> Result<(), EffectError> {
        self.write(&c.correlation_id, |rec| {
            let before = rec.clone();
            rec.merge(c);
            rec.merge_workflows(workflows);
            *rec != before
        })
        .await
    }

    /// Marks the incident closed.
    pub async fn close(&self, c: &Correlation) -> Result<(), EffectError> {
        let now = self.clock.now();
        self.write(&c.correlation_id, |rec| {
            if rec.status == RecordStatus::Closed {
                return false;
            }
            rec.merge(c);
            rec.status = RecordStatus::Closed;
            rec.closed_at = Some(now);
            true
        })
        .await
    }

    /// Read-modify-write of an existing record; `change` returns false when
    /// there is nothing to write.
    async fn write(
        &self,
        id: &str,
        change: impl Fn(&mut CorrelationRecord) -> bool,
    ) -> Result<(), EffectError> {
        for _ in 0..MAX_CONFLICTS {
            let Some((mut rec, revision)) = self.store.get(id).await? else {
                return Ok(());
            };
            if !change(&mut rec) {
                return Ok(());
            }
            match self.store.update(&rec, revision).await {
                Ok(_) => return Ok(()),
                Err(StoreError::Conflict(_)) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(EffectError::Contended(id.to_string()))
    }

    async fn load_or_create(
        &self,
        c: &Correlation,
    ) -> Result<(CorrelationRecord, u64), EffectError> {
        for _ in 0..MAX_CONFLICTS {
            if let Some(found) = self.store.get(&c.correlation_id).await? {
                return Ok(found);
            }
            let rec = CorrelationRecord::new(c, self.clock.now(), &self.instance_id);
            match self.store.create(&rec).await? {
                Created::Created(revision) => return Ok((rec, revision)),
                // Another writer won the race: read theirs.
                Created::Exists => continue,
            }
        }
        Err(EffectError::Contended(c.correlation_id.clone()))
    }

    /// Publishes everything at once and waits for every stream ack; returns
    /// how many the stream dropped as repeats of a `Nats-Msg-Id`.
    async fn publish_all(&self, out: Vec<Outgoing>) -> Result<usize, EffectError> {
        let mut acks = Vec::with_capacity(out.len());
        for o in out {
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Msg-Id", o.msg_id.as_str());
            // Inside a `correlation` span: its context goes along.
            caucus_shared::nats::trace::inject(&mut headers);
            let sent = self
                .js
                .publish_with_headers(o.subject.clone(), headers, o.envelope.to_bytes())
                .await;
            let (subject, msg_id) = (o.subject, o.msg_id);
            let fail = move |reason: String| EffectError::Publish {
                subject,
                msg_id,
                reason,
            };
            match sent {
                Ok(ack) => acks.push(async move { ack.await.map_err(|e| fail(e.to_string())) }),
                Err(e) => return Err(fail(e.to_string())),
            }
        }
        let acks = try_join_all(acks).await?;
        Ok(acks.iter().filter(|a| a.duplicate).count())
    }
}
