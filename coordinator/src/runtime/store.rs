//! Workflow records in the `workflows` KV bucket, written with revision
//! checks so two writers can never silently clobber each other.
//!
//! Three buckets, one concept each:
//! - `workflows`: one record per workflow. A finished record is written
//!   with a per-message TTL (`coordinator.retain_history`) and expires.
//! - `workflows_active`: an index of the unfinished workflows, so a
//!   takeover reads the unfinished records only, however many finished
//!   ones are kept: one key per submission step and partition listing its
//!   workflows (`index_groups`), or an empty key of its own for a workflow
//!   brought back unfinished. An entry is created before its records and
//!   removed after the finishing write of the last of them, so every
//!   unfinished record is indexed (an entry left behind by a crash is
//!   found finished at the next load and removed then).
//! - `task_outputs`: outputs over `coordinator.inline_output_bytes`, one
//!   key per task attempt, written before the record that points at them,
//!   with the same TTL once the workflow finished.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use async_nats::HeaderMap;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

use caucus_shared::config::NatsConfig;
use caucus_shared::error::BoxError;
use caucus_shared::nats::through_elections;
use caucus_shared::nats::topology::ensure_kv_with_ttl;
use caucus_shared::subjects::Subjects;

use super::batch::BatchLoadError;
use super::index_groups::{group_key, is_group, IndexGroup, INDEX_GROUP_SCHEMA_VERSION};
use super::partition::Partition;
use crate::workflow::WorkflowRecord;

/// KV bucket of workflow records.
pub const WORKFLOWS_BUCKET: &str = "workflows";
/// KV bucket indexing the unfinished workflows.
pub const ACTIVE_BUCKET: &str = "workflows_active";
/// KV bucket of task outputs too large to keep inline.
pub const OUTPUTS_BUCKET: &str = "task_outputs";
/// Index key saying the index covers every record (written once, after
/// the first full scan of a store that predates the index).
const INDEX_BUILT: &str = "_index_built";
/// Index key holding the epoch of the latest tenure that began (of the
/// only partition; partition `p` of several uses `_epoch_p<p>`, since each
/// partition's lock counts its own epochs).
const EPOCH_KEY: &str = "_epoch";

/// The index key holding `part`'s latest tenure epoch.
fn epoch_key(part: Partition) -> String {
    if part.count <= 1 {
        EPOCH_KEY.to_string()
    } else {
        format!("{EPOCH_KEY}_p{}", part.index)
    }
}
/// Records or outputs read at once on a takeover.
const LOAD_CONCURRENCY: usize = 128;
/// How old an index group whose workflows were never stored must be to be
/// removed: its submission stopped part-way (a live one stores a step's
/// records within seconds of its group).
pub const GROUP_ABANDONED_AFTER: Duration = Duration::from_secs(3600);

/// What a takeover loads ([`WorkflowStore::load_unfinished`]).
#[derive(Debug, Default)]
pub struct Unfinished {
    /// The partition's unfinished records, with their revisions.
    pub records: Vec<(WorkflowRecord, u64)>,
    /// The highest fencing epoch known.
    pub max_epoch: u64,
    /// The partition's index groups, each with its members not finished.
    pub groups: Vec<(String, Vec<String>)>,
}

/// Errors of the workflow store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The record changed under us (another writer).
    #[error("workflow {0}: revision conflict (another coordinator wrote it)")]
    Conflict(String),
    /// NATS failed.
    #[error("workflow store: {what}: {source}")]
    Nats {
        /// What was being done, e.g. `update <id>`.
        what: String,
        /// The NATS / KV error.
        #[source]
        source: BoxError,
    },
    /// A stored record, or one of its outputs, does not parse.
    #[error("workflow {id}: stored record does not parse: {}{source}", output_prefix(.output))]
    Corrupt {
        /// The workflow.
        id: String,
        /// The output's key, when an output does not parse.
        output: Option<String>,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// The batches could not be loaded on a takeover.
    #[error("workflow store: {0}")]
    Batches(#[from] BatchLoadError),
}

fn output_prefix(output: &Option<String>) -> String {
    output
        .as_ref()
        .map(|k| format!("output {k}: "))
        .unwrap_or_default()
}

/// KV-backed store of workflow records.
#[derive(Clone)]
pub struct WorkflowStore {
    js: jetstream::Context,
    records: kv::Store,
    /// Name of the records bucket (`<prefix>_workflows`), for the TTL write.
    records_bucket: String,
    active: kv::Store,
    outputs: kv::Store,
    outputs_bucket: String,
    /// TTL of finished records and their outputs.
    retain: Duration,
    /// How long a submission's write waits out a leaderless stream
    /// (`nats.election_wait`).
    election_wait: Duration,
}

impl std::fmt::Debug for WorkflowStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkflowStore")
            .field("records", &self.records_bucket)
            .field("retain", &self.retain)
            .finish()
    }
}

/// Serialises a record without the outputs that live in `task_outputs`
/// (taken out for the encoding and put back).
pub fn encode(rec: &mut WorkflowRecord) -> Bytes {
    let mut parked = Vec::new();
    for (k, t) in rec.tasks.iter_mut() {
        if t.output_key.is_some() && t.output.is_some() {
            parked.push((k.clone(), t.output.take()));
        }
        if t.previous_output_key.is_some() && t.previous_output.is_some() {
            parked.push((format!("\0{k}"), t.previous_output.take()));
        }
    }
    let bytes = Bytes::from(serde_json::to_vec(&*rec).expect("workflow records serialise"));
    for (k, v) in parked {
        match k.strip_prefix('\0') {
            Some(k) => rec.tasks.get_mut(k).expect("parked task").previous_output = v,
            None => rec.tasks.get_mut(&k).expect("parked task").output = v,
        }
    }
    bytes
}

/// The `task_outputs` key of one task attempt's output. KV keys allow
/// `[-/_=.A-Za-z0-9]`; anything else is escaped as `=XX`.
pub fn output_key(task_id: &str, attempt: u32) -> String {
    let mut k = String::with_capacity(task_id.len() + 8);
    for b in task_id.bytes() {
        match b {
            b'-' | b'/' | b'_' | b'.' | b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => {
                k.push(b as char)
            }
            _ => k.push_str(&format!("={b:02X}")),
        }
    }
    k.push_str(&format!(".a{attempt}"));
    k
}

fn nats_err(what: &str, e: impl Into<BoxError>) -> StoreError {
    StoreError::Nats {
        what: what.to_string(),
        source: e.into(),
    }
}

impl WorkflowStore {
    /// Creates (or updates, to `nats.replicas`) the three buckets.
    pub async fn open(
        js: &jetstream::Context,
        subjects: &Subjects,
        nats: &NatsConfig,
        retain: Duration,
    ) -> Result<WorkflowStore, StoreError> {
        let (replicas, election_wait) = (nats.replicas, nats.election_wait);
        let open = |bucket: &'static str| async move {
            ensure_kv_with_ttl(js, subjects, bucket, replicas)
                .await
                .map_err(|e| nats_err(bucket, e))
        };
        let buckets = tokio::try_join!(
            open(WORKFLOWS_BUCKET),
            open(ACTIVE_BUCKET),
            open(OUTPUTS_BUCKET)
        )?;
        Ok(Self::over(js, subjects, retain, election_wait, buckets))
    }

    /// The buckets as they are (for readers such as the audit API, which
    /// must not change their configuration).
    pub async fn attach(
        js: &jetstream::Context,
        subjects: &Subjects,
        retain: Duration,
    ) -> Result<WorkflowStore, StoreError> {
        let open = |bucket: &'static str| async move {
            js.get_key_value(subjects.bucket(bucket))
                .await
                .map_err(|e| nats_err(bucket, e))
        };
        let buckets = tokio::try_join!(
            open(WORKFLOWS_BUCKET),
            open(ACTIVE_BUCKET),
            open(OUTPUTS_BUCKET)
        )?;
        // Readers submit nothing: no write of theirs waits.
        Ok(Self::over(js, subjects, retain, Duration::ZERO, buckets))
    }

    fn over(
        js: &jetstream::Context,
        subjects: &Subjects,
        retain: Duration,
        election_wait: Duration,
        (records, active, outputs): (kv::Store, kv::Store, kv::Store),
    ) -> WorkflowStore {
        WorkflowStore {
            js: js.clone(),
            records,
            records_bucket: subjects.bucket(WORKFLOWS_BUCKET),
            active,
            outputs,
            outputs_bucket: subjects.bucket(OUTPUTS_BUCKET),
            retain,
            election_wait,
        }
    }

    /// Creates a new record; fails if the id exists. Index it first
    /// ([`Self::index_group`] or [`Self::index`]): an unindexed unfinished
    /// record is not found by a takeover. This and [`Self::index_group`]
    /// are a submission's writes, which fails when they do: they wait out
    /// a leaderless bucket (`nats.election_wait`).
    pub async fn create(&self, rec: &WorkflowRecord) -> Result<u64, StoreError> {
        let id = &rec.workflow_id;
        let body = encode(&mut rec.clone());
        through_elections(self.election_wait, || self.records.create(id, body.clone()))
            .await
            .map_err(|e| nats_err(&format!("create {id}"), e))
    }

    /// Marks `id` unfinished in the index under a key of its own
    /// (idempotent).
    pub async fn index(&self, id: &str) -> Result<(), StoreError> {
        self.active
            .put(id, Bytes::new())
            .await
            .map(|_| ())
            .map_err(|e| nats_err(&format!("index {id}"), e))
    }

    /// Marks `ids` (of one partition, not empty) unfinished in the index
    /// under one group key, which it returns (idempotent: the same ids
    /// give the same key).
    pub async fn index_group(&self, ids: Vec<String>) -> Result<String, StoreError> {
        let key = group_key(ids.first().map_or("", String::as_str));
        let body = serde_json::to_vec(&IndexGroup {
            schema_version: INDEX_GROUP_SCHEMA_VERSION,
            workflow_ids: ids,
        })
        .expect("index groups serialise");
        let body = Bytes::from(body);
        through_elections(self.election_wait, || self.active.put(&key, body.clone()))
            .await
            .map_err(|e| nats_err(&format!("index {key}"), e))?;
        Ok(key)
    }

    /// Removes an index key (a workflow's own, or a group's) once what it
    /// indexes is finished and stored. Best effort: a key left behind is
    /// found finished at the next load and removed then.
    pub async fn unindex(&self, key: &str) {
        if let Err(e) = self.active.delete(key).await {
            tracing::debug!(key, error = %e, "index entry not removed");
        }
    }

    /// Writes an [`encode`]d record if the stored revision is still
    /// `revision`. A `finished` record is written with the history TTL
    /// (its index entry is the caller's to remove, [`Self::unindex`]).
    pub async fn update_encoded(
        &self,
        id: &str,
        body: Bytes,
        revision: u64,
        finished: bool,
    ) -> Result<u64, StoreError> {
        if !finished {
            return self.records.update(id, body, revision).await.map_err(|e| {
                if e.kind() == kv::UpdateErrorKind::WrongLastRevision {
                    StoreError::Conflict(id.to_string())
                } else {
                    nats_err(&format!("update {id}"), e)
                }
            });
        }
        self.put_expiring(&self.records_bucket, id, body, Some(revision))
            .await
    }

    /// A KV write with a per-message TTL (and a revision check when
    /// `revision` is set): the KV API has no TTL update, so this is its
    /// publish with the two headers the server checks.
    async fn put_expiring(
        &self,
        bucket: &str,
        key: &str,
        body: Bytes,
        revision: Option<u64>,
    ) -> Result<u64, StoreError> {
        let mut headers = HeaderMap::new();
        if let Some(rev) = revision {
            headers.insert(
                "Nats-Expected-Last-Subject-Sequence",
                rev.to_string().as_str(),
            );
        }
        headers.insert(
            "Nats-TTL",
            format!("{}s", self.retain.as_secs().max(1)).as_str(),
        );
        let subject = format!("$KV.{bucket}.{key}");
        let ack = self
            .js
            .publish_with_headers(subject, headers, body)
            .await
            .map_err(|e| nats_err(&format!("write {key}"), e))?
            .await;
        match ack {
            Ok(a) => Ok(a.sequence),
            // "wrong last sequence" (JetStream error 10071).
            Err(e) if e.to_string().contains("wrong last sequence") => {
                Err(StoreError::Conflict(key.to_string()))
            }
            Err(e) => Err(nats_err(&format!("write {key}"), e)),
        }
    }

    /// Stores one spilled output (idempotent: the key names the attempt).
    pub async fn put_output(
        &self,
        key: &str,
        body: Bytes,
        finished: bool,
    ) -> Result<(), StoreError> {
        if finished {
            return self
                .put_expiring(&self.outputs_bucket, key, body, None)
                .await
                .map(|_| ());
        }
        self.outputs
            .put(key, body)
            .await
            .map(|_| ())
            .map_err(|e| nats_err(&format!("output {key}"), e))
    }

    /// One record and its revision, with its spilled outputs read back.
    pub async fn get(&self, id: &str) -> Result<Option<(WorkflowRecord, u64)>, StoreError> {
        let Some((mut rec, rev)) = self.get_bare(id).await? else {
            return Ok(None);
        };
        self.fill_outputs(&mut rec).await?;
        Ok(Some((rec, rev)))
    }

    async fn get_bare(&self, id: &str) -> Result<Option<(WorkflowRecord, u64)>, StoreError> {
        let entry = self
            .records
            .entry(id)
            .await
            .map_err(|e| nats_err(&format!("get {id}"), e))?;
        match entry {
            Some(e) if e.operation == kv::Operation::Put => {
                let rec =
                    serde_json::from_slice(&e.value).map_err(|source| StoreError::Corrupt {
                        id: id.to_string(),
                        output: None,
                        source,
                    })?;
                Ok(Some((rec, e.revision)))
            }
            _ => Ok(None),
        }
    }

    async fn fill_outputs(&self, rec: &mut WorkflowRecord) -> Result<(), StoreError> {
        for t in rec.tasks.values_mut() {
            for (key, slot) in [
                (&t.output_key, &mut t.output),
                (&t.previous_output_key, &mut t.previous_output),
            ] {
                let Some(key) = key else { continue };
                if slot.is_some() {
                    continue;
                }
                let v = self
                    .outputs
                    .get(key)
                    .await
                    .map_err(|e| nats_err(&format!("output {key}"), e))?;
                *slot =
                    match v {
                        Some(b) => Some(serde_json::from_slice(&b).map_err(|source| {
                            StoreError::Corrupt {
                                id: rec.workflow_id.clone(),
                                output: Some(key.clone()),
                                source,
                            }
                        })?),
                        None => Some(serde_json::json!({"missing_output": key})),
                    };
            }
        }
        Ok(())
    }

    /// Every unfinished record of `part` (start-up / takeover), read
    /// through the index, the highest fencing epoch known (from the records
    /// read and the one `part`'s last tenure noted), and `part`'s index
    /// groups with their members not finished. Index keys whose records
    /// are all finished or gone are removed (a group's only once it is
    /// older than [`GROUP_ABANDONED_AFTER`] while a member was never
    /// stored: its submission may still be storing it). A store written
    /// before the index existed is scanned once in full and indexed.
    pub async fn load_unfinished(
        &self,
        part: Partition,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Unfinished, StoreError> {
        let built = self.marker(INDEX_BUILT).await?.is_some();
        let mut max_epoch = self.marker(&epoch_key(part)).await?.unwrap_or(0);
        let keys: Vec<String> = if built {
            self.keys(&self.active).await?
        } else {
            self.keys(&self.records).await?
        };
        let (group_keys, own): (Vec<String>, Vec<String>) =
            keys.into_iter().partition(|k| is_group(k));
        // Another partition's keys are its owner's: reading them costs a
        // takeover time, and removing one whose record is being written
        // would unindex it. The one full scan that builds the index reads
        // and indexes every partition's records, since the marker it sets
        // ends every partition's scans.
        let own: Vec<String> = own
            .into_iter()
            .filter(|k| !k.starts_with('_') && (!built || part.owns(k)))
            .collect();
        let groups = self.read_groups(group_keys, part, now).await?;
        let mut ids: Vec<String> = own.clone();
        let mut seen: HashSet<String> = own.iter().cloned().collect();
        for (_, g, _) in &groups {
            for id in &g.workflow_ids {
                if seen.insert(id.clone()) {
                    ids.push(id.clone());
                }
            }
        }
        let loaded: HashMap<String, Option<(WorkflowRecord, u64)>> = futures::stream::iter(ids)
            .map(|id| async move {
                match self.get_bare(&id).await {
                    Ok(r) => Ok((id, r)),
                    Err(e @ StoreError::Corrupt { .. }) => {
                        tracing::error!(workflow_id = %id, error = %e, "skipping unreadable workflow record");
                        Ok((id, None))
                    }
                    Err(e) => Err(e),
                }
            })
            .buffer_unordered(LOAD_CONCURRENCY)
            .try_collect()
            .await?;
        let finished = |id: &str| {
            loaded
                .get(id)
                .and_then(Option::as_ref)
                .is_some_and(|(r, _)| r.state.is_terminal())
        };
        let mut stale: Vec<String> = own
            .iter()
            .filter(|id| !matches!(loaded.get(*id), Some(Some((r, _))) if !r.state.is_terminal()))
            .cloned()
            .collect();
        let mut pending_groups = Vec::new();
        for (key, g, age) in groups {
            let pending: Vec<String> = g
                .workflow_ids
                .into_iter()
                .filter(|id| !finished(id))
                .collect();
            let never_stored = pending
                .iter()
                .all(|id| matches!(loaded.get(id), Some(None)));
            if pending.is_empty() || (never_stored && age > GROUP_ABANDONED_AFTER) {
                if !pending.is_empty() {
                    tracing::warn!(key = %key, workflows = pending.len(), "index group whose workflows were never stored (their submission stopped); removed");
                }
                stale.push(key);
            } else {
                pending_groups.push((key, pending));
            }
        }
        let mut unfinished = Vec::new();
        for (_, r) in loaded {
            if let Some((rec, rev)) = r {
                max_epoch = max_epoch.max(rec.epoch);
                if !rec.state.is_terminal() {
                    unfinished.push((rec, rev));
                }
            }
        }
        if built {
            for key in stale {
                self.unindex(&key).await;
            }
        } else {
            for (rec, _) in &unfinished {
                self.index(&rec.workflow_id).await?;
            }
            self.set_marker(INDEX_BUILT, 1).await?;
        }
        for (rec, _) in unfinished.iter_mut() {
            self.fill_outputs(rec).await?;
        }
        Ok(Unfinished {
            records: unfinished,
            max_epoch,
            groups: pending_groups,
        })
    }

    /// `part`'s index groups, each with how long ago it was written.
    async fn read_groups(
        &self,
        keys: Vec<String>,
        part: Partition,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<(String, IndexGroup, Duration)>, StoreError> {
        let read: Vec<Option<(String, IndexGroup, Duration)>> = futures::stream::iter(keys)
            .map(|key| async move {
                let found: Option<kv::Entry> = self
                    .active
                    .entry(&key)
                    .await
                    .map_err(|e| nats_err(&format!("index {key}"), e))?;
                let Some(e) = found.filter(|e| e.operation == kv::Operation::Put) else {
                    return Ok::<_, StoreError>(None);
                };
                let g: IndexGroup = match serde_json::from_slice(&e.value) {
                    Ok(g) => g,
                    Err(err) => {
                        // Left as it is: its workflows may be unfinished.
                        tracing::error!(key = %key, error = %err, "unreadable index group skipped");
                        return Ok(None);
                    }
                };
                if !g.workflow_ids.first().is_some_and(|id| part.owns(id)) {
                    return Ok(None);
                }
                let age = Duration::from_secs(
                    (now.timestamp() - e.created.unix_timestamp()).max(0) as u64,
                );
                Ok(Some((key, g, age)))
            })
            .buffer_unordered(LOAD_CONCURRENCY)
            .try_collect()
            .await?;
        Ok(read.into_iter().flatten().collect())
    }

    /// Notes the epoch of `part`'s tenure that has begun, so the next one
    /// stays above it even when every record it wrote has expired and
    /// Redis lost its counter.
    pub async fn note_epoch(&self, part: Partition, epoch: u64) -> Result<(), StoreError> {
        self.set_marker(&epoch_key(part), epoch).await
    }

    async fn marker(&self, key: &str) -> Result<Option<u64>, StoreError> {
        let v = self
            .active
            .get(key)
            .await
            .map_err(|e| nats_err("index", e))?;
        Ok(v.map(|b| {
            std::str::from_utf8(&b)
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0)
        }))
    }

    async fn set_marker(&self, key: &str, value: u64) -> Result<(), StoreError> {
        self.active
            .put(key, Bytes::from(value.to_string()))
            .await
            .map(|_| ())
            .map_err(|e| nats_err("index", e))
    }

    async fn keys(&self, store: &kv::Store) -> Result<Vec<String>, StoreError> {
        store
            .keys()
            .await
            .map_err(|e| nats_err("list keys", e))?
            .map_err(|e| nats_err("list keys", e))
            .try_collect()
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::output_key;

    #[test]
    fn output_keys_are_valid_kv_keys() {
        assert_eq!(output_key("wf-1/valuation", 2), "wf-1/valuation.a2");
        assert_eq!(output_key("wf-1/dcf#3", 1), "wf-1/dcf=233.a1");
        assert_eq!(output_key("wf 1/x", 1), "wf=201/x.a1");
    }
}
