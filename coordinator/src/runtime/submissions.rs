//! Submissions that can be retried, and that can be large.
//!
//! Every `submit` is a *submission*: a record in the KV bucket
//! `submissions` (kept for `coordinator.submission_ttl`) with its id, the
//! optional `idempotency_key`, a fingerprint of the request, the number of
//! workflows and how many of them are stored. Workflow ids are derived from
//! the submission id and the item's index ([`workflow_id`]), so they need
//! not be stored and can be paged (`coordinator.submission`).
//!
//! A keyed submission's id is derived from its key ([`submission_id_for_key`]).
//! A retry with the same key finds the record: when it is complete the
//! same ids come back and nothing is created; when a coordinator died (or
//! a store write failed) half-way, the retry creates the workflows that are
//! missing. A workflow record that already exists has the same derived id,
//! so it belongs to this submission (its item is checked) and is taken
//! over as it is; nothing is duplicated.
//!
//! Records are created off the scheduler loop, in steps of
//! `coordinator.submit_chunk`, and each step is handed to the scheduler
//! (`Command::Submit`, [`SubmitOp::Adopt`]) in one command, which only
//! inserts them in memory: between two steps the scheduler dispatches and
//! applies events as usual.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::future::join_all;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

use caucus_shared::api::coordinator::submit::{SubmissionRequest, SubmissionSummary};
use caucus_shared::config::NatsConfig;
use caucus_shared::nats::api::ApiError;
use caucus_shared::nats::through_elections;
use caucus_shared::nats::topology::ensure_kv;
use caucus_shared::subjects::Subjects;

use super::store::WorkflowStore;
use crate::workflow::WorkflowRecord;

/// KV bucket of submissions.
pub const SUBMISSIONS_BUCKET: &str = "submissions";
/// Workflow ids in a `submit` reply (and the default page size of
/// `coordinator.submission`); the rest are paged.
pub const SUMMARY_IDS: usize = 1_000;
/// Largest page `coordinator.submission` returns.
pub const MAX_PAGE: usize = 10_000;
/// Length of an idempotency key, at most.
pub const MAX_KEY_LEN: usize = 256;
/// Version of the stored submission record.
pub const SUBMISSION_SCHEMA_VERSION: u32 = 1;

/// What a submit asks of the scheduler (the `Command::Submit` payload).
pub enum SubmitOp {
    /// May this coordinator create workflow records now?
    Begin,
    /// Workflow records already stored in KV (with their revisions): the
    /// scheduler takes over those it does not hold yet, and tracks the
    /// index groups they were indexed under (key, members).
    Adopt(Vec<(WorkflowRecord, u64)>, Vec<(String, Vec<String>)>),
}

/// The scheduler's yes to a [`SubmitOp`]: records created next carry
/// `epoch` and go to `store` (the leader's own).
#[derive(Clone, Debug)]
pub struct SubmitGrant {
    /// The fencing epoch to stamp on the records.
    pub epoch: u64,
    /// The leader's workflow store.
    pub store: WorkflowStore,
    /// How many partitions there are (`coordinator.partitions`): a step's
    /// records are indexed in one group per partition.
    pub partitions: u32,
}

/// Where a submission stands (stored in the record, shown by the API).
pub use caucus_shared::api::coordinator::submit::SubmissionState;

/// One submission, as stored under its id in the `submissions` bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmissionRecord {
    /// Record version.
    pub schema_version: u32,
    /// The submission id (a UUID).
    pub submission_id: String,
    /// The client's key, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Hash of the request (items, pipeline, options): a key reused for
    /// another request is refused.
    pub fingerprint: String,
    /// The pipeline's name.
    pub pipeline: String,
    /// Workflows (= items) of the submission.
    pub count: usize,
    /// Workflows `0..created` are stored and held by the scheduler.
    pub created: usize,
    /// Where it stands.
    pub state: SubmissionState,
    /// When it was first received.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// A UUID (version 8) made of the first 16 bytes of SHA-256 over `parts`
/// (each part length-prefixed, so no two part lists collide).
pub(crate) fn derived_uuid(domain: &str, parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    h.update(domain.as_bytes());
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p);
    }
    let digest = h.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes)
        .into_uuid()
        .to_string()
}

/// The submission id of an idempotency key: the same key always names the
/// same submission (on every coordinator, across restarts and versions).
pub fn submission_id_for_key(key: &str) -> String {
    derived_uuid("caucus/submission/v1", &[key.as_bytes()])
}

/// A fresh submission id (a submit without a key).
pub fn new_submission_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// The id of workflow `index` (the item's position in the request) of a
/// submission.
pub fn workflow_id(submission_id: &str, index: usize) -> String {
    derived_uuid(
        "caucus/workflow/v1",
        &[submission_id.as_bytes(), &(index as u64).to_be_bytes()],
    )
}

/// Ids of workflows `range` of a submission of `count` (clipped to it).
pub fn workflow_ids(submission_id: &str, count: usize, range: Range<usize>) -> Vec<String> {
    (range.start.min(count)..range.end.min(count))
        .map(|i| workflow_id(submission_id, i))
        .collect()
}

/// The steps `from..count` is created in, `chunk` workflows each.
pub fn chunks(from: usize, count: usize, chunk: usize) -> impl Iterator<Item = Range<usize>> {
    let chunk = chunk.max(1);
    (from..count)
        .step_by(chunk)
        .map(move |s| s..(s + chunk).min(count))
}

/// What identifies a request: a retry must send the same one.
pub fn fingerprint(
    items: &[String],
    pipeline: &Value,
    unit_ms: u64,
    auto_approve_gates: bool,
) -> String {
    let mut h = Sha256::new();
    h.update(b"caucus/submit/v1");
    let spec = pipeline.to_string();
    for part in [
        spec.as_bytes(),
        &unit_ms.to_be_bytes(),
        &[auto_approve_gates as u8],
    ] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part);
    }
    h.update((items.len() as u64).to_be_bytes());
    for i in items {
        h.update((i.len() as u64).to_be_bytes());
        h.update(i.as_bytes());
    }
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Checks a client's idempotency key.
pub fn check_key(key: &str) -> Result<(), ApiError> {
    if key.trim().is_empty() || key.len() > MAX_KEY_LEN {
        return Err(ApiError::bad_request(format!(
            "`idempotency_key` must be 1..={MAX_KEY_LEN} characters, not only white space"
        )));
    }
    Ok(())
}

/// The submissions bucket, opened on first use, plus the submissions being created by this process (one at a time per
/// id: a retry that arrives while the first attempt still runs waits for
/// it, then finds it complete).
#[derive(Clone)]
pub struct Submissions {
    inner: Arc<Inner>,
}

struct Inner {
    js: jetstream::Context,
    subjects: Subjects,
    ttl: Duration,
    replicas: usize,
    /// How long a write waits out a leaderless bucket.
    election_wait: Duration,
    bucket: OnceCell<kv::Store>,
    running: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Submissions {
    /// The bucket is opened (created, or updated to `ttl` and
    /// `nats.replicas`) on first use.
    pub fn new(
        js: jetstream::Context,
        subjects: Subjects,
        ttl: Duration,
        nats: &NatsConfig,
    ) -> Self {
        Submissions {
            inner: Arc::new(Inner {
                js,
                subjects,
                ttl,
                replicas: nats.replicas,
                election_wait: nats.election_wait,
                bucket: OnceCell::new(),
                running: Mutex::new(HashMap::new()),
            }),
        }
    }

    async fn bucket(&self) -> Result<&kv::Store, ApiError> {
        let i = &self.inner;
        i.bucket
            .get_or_try_init(|| async {
                ensure_kv(&i.js, &i.subjects, SUBMISSIONS_BUCKET, 1, i.ttl, i.replicas)
                    .await
                    .map_err(|e| ApiError::new("unavailable", e.to_string()))
            })
            .await
    }

    /// Serialises work on one submission within this process.
    pub async fn lock(&self, submission_id: &str) -> SubmissionGuard {
        let m = {
            let mut running = self.inner.running.lock().expect("submissions lock");
            running
                .entry(submission_id.to_string())
                .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(())))
                .clone()
        };
        let guard = m.clone().lock_owned().await;
        SubmissionGuard {
            owner: self.clone(),
            id: submission_id.to_string(),
            _guard: guard,
            mutex: m,
        }
    }

    /// The stored submission and its revision.
    pub async fn get(&self, id: &str) -> Result<Option<(SubmissionRecord, u64)>, ApiError> {
        let subs = self.bucket().await?;
        let entry = subs
            .entry(id)
            .await
            .map_err(|e| ApiError::new("unavailable", format!("submission {id}: {e}")))?;
        match entry {
            Some(e) if e.operation == kv::Operation::Put => {
                let rec = serde_json::from_slice(&e.value).map_err(|err| {
                    ApiError::internal(format!("submission {id} does not parse: {err}"))
                })?;
                Ok(Some((rec, e.revision)))
            }
            _ => Ok(None),
        }
    }

    /// Stores a new submission; `None` when one with its id exists.
    pub async fn create(&self, rec: &SubmissionRecord) -> Result<Option<u64>, ApiError> {
        let subs = self.bucket().await?;
        let (id, body) = (&rec.submission_id, encode(rec));
        let wait = self.inner.election_wait;
        match through_elections(wait, || subs.create(id, body.clone())).await {
            Ok(rev) => Ok(Some(rev)),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => Ok(None),
            Err(e) => Err(ApiError::new(
                "store_failed",
                format!("submission {}: {e}", rec.submission_id),
            )),
        }
    }

    /// Overwrites the submission (only its creator writes it, one step at
    /// a time).
    pub async fn put(&self, rec: &SubmissionRecord) -> Result<u64, ApiError> {
        let subs = self.bucket().await?;
        let (id, body) = (&rec.submission_id, encode(rec));
        through_elections(self.inner.election_wait, || subs.put(id, body.clone()))
            .await
            .map_err(|e| {
                ApiError::new(
                    "store_failed",
                    format!("submission {}: {e}", rec.submission_id),
                )
            })
    }

    /// Stores `records` (one step of a submission, concurrently) in the
    /// leader's `store`. Returns them with their revisions; a record that
    /// cannot be created but is found stored with the same item was
    /// created by an earlier attempt (its id is derived from this
    /// submission's) and is returned as stored.
    pub async fn store_workflows(
        store: &WorkflowStore,
        records: Vec<WorkflowRecord>,
        partitions: u32,
    ) -> StoredStep {
        // Indexed before any record is created: one group per partition,
        // its owner's to remove once every member finished.
        let mut by_partition: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        for r in &records {
            by_partition
                .entry(caucus_shared::partition::of(&r.workflow_id, partitions))
                .or_default()
                .push(r.workflow_id.clone());
        }
        let groups: Vec<Vec<String>> = by_partition.into_values().collect();
        let keys = join_all(groups.iter().map(|ids| store.index_group(ids.clone()))).await;
        let mut step = StoredStep::default();
        for (ids, key) in groups.into_iter().zip(keys) {
            match key {
                Ok(key) => step.groups.push((key, ids)),
                Err(e) => {
                    step.error = Some(e.to_string());
                    return step;
                }
            }
        }
        let results = join_all(records.iter().map(|r| store.create(r))).await;
        let mut first_err = None;
        for (rec, res) in records.into_iter().zip(results) {
            let create_err = match res {
                Ok(rev) => {
                    step.created += 1;
                    step.records.push((rec, rev));
                    continue;
                }
                Err(e) => e.to_string(),
            };
            match store.get(&rec.workflow_id).await {
                Ok(Some((stored, rev))) if stored.item == rec.item => {
                    step.existing += 1;
                    step.records.push((stored, rev));
                }
                Ok(Some((stored, _))) => {
                    first_err.get_or_insert(format!(
                        "workflow {} exists with item `{}`, not `{}`",
                        rec.workflow_id, stored.item, rec.item
                    ));
                }
                Ok(None) => {
                    first_err.get_or_insert(create_err);
                }
                Err(e) => {
                    first_err.get_or_insert(e.to_string());
                }
            }
        }
        step.error = first_err;
        step
    }
}

/// One step's records, stored.
#[derive(Default)]
pub struct StoredStep {
    /// Every record of the step that is stored, with its revision.
    pub records: Vec<(WorkflowRecord, u64)>,
    /// How many this step created.
    pub created: usize,
    /// How many were there already.
    pub existing: usize,
    /// The first record that could not be stored, and why.
    pub error: Option<String>,
    /// The index groups the step's records were indexed under: key and
    /// members (one per partition).
    pub groups: Vec<(String, Vec<String>)>,
}

/// Held while a submission is being created by this process.
pub struct SubmissionGuard {
    owner: Submissions,
    id: String,
    mutex: Arc<tokio::sync::Mutex<()>>,
    _guard: tokio::sync::OwnedMutexGuard<()>,
}

impl Drop for SubmissionGuard {
    fn drop(&mut self) {
        if let Ok(mut running) = self.owner.inner.running.lock() {
            // Ours, the map's and this guard's mutex handle: nobody waits.
            if Arc::strong_count(&self.mutex) <= 3 {
                running.remove(&self.id);
            }
        }
    }
}

fn encode(rec: &SubmissionRecord) -> Bytes {
    Bytes::from(serde_json::to_vec(rec).expect("submission records serialise"))
}

/// The summary of a submission with the ids `range` (the reply of
/// `submit` and `submission`).
pub fn summary(rec: &SubmissionRecord, range: Range<usize>) -> SubmissionSummary {
    let ids = workflow_ids(&rec.submission_id, rec.count, range.clone());
    let end = range.start.min(rec.count) + ids.len();
    SubmissionSummary {
        submission_id: rec.submission_id.clone(),
        idempotency_key: rec.idempotency_key.clone(),
        pipeline: rec.pipeline.clone(),
        count: rec.count,
        stored: rec.created,
        state: rec.state,
        created_at: rec.created_at,
        cursor: range.start,
        workflow_ids: ids,
        next_cursor: (end < rec.count).then_some(end),
    }
}

/// `coordinator.submission`: `{submission_id | idempotency_key, cursor?,
/// limit?}` → the submission and one page of its workflow ids. Read from
/// KV: any instance answers, leader or not.
pub async fn page(
    req: SubmissionRequest,
    subs: &Submissions,
) -> Result<SubmissionSummary, ApiError> {
    let id = match (&req.submission_id, &req.idempotency_key) {
        (Some(id), None) => id.clone(),
        (None, Some(k)) => {
            check_key(k)?;
            submission_id_for_key(k)
        }
        _ => {
            return Err(ApiError::bad_request(
                "name exactly one of `submission_id` or `idempotency_key`",
            ))
        }
    };
    if uuid::Uuid::parse_str(&id).is_err() {
        return Err(ApiError::bad_request(format!(
            "`{id}` is not a submission id (a UUID)"
        )));
    }
    let limit = req.limit.unwrap_or(SUMMARY_IDS);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::bad_request(format!(
            "`limit` must be 1..={MAX_PAGE}"
        )));
    }
    let cursor = req.cursor.unwrap_or(0);
    let (rec, _) = subs.get(&id).await?.ok_or_else(|| {
        ApiError::not_found(format!(
            "no submission {id} (unknown, or older than coordinator.submission_ttl)"
        ))
    })?;
    if cursor > rec.count {
        return Err(ApiError::bad_request(format!(
            "`cursor` {cursor} is past the submission's {} workflows",
            rec.count
        )));
    }
    Ok(summary(&rec, cursor..cursor.saturating_add(limit)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_derive_from_the_key_and_index_only() {
        let a = submission_id_for_key("batch-2026-11-25");
        assert_eq!(a, submission_id_for_key("batch-2026-11-25"));
        assert_ne!(a, submission_id_for_key("batch-2026-11-26"));
        let u = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(u.get_version(), Some(uuid::Version::Custom));
        let w0 = workflow_id(&a, 0);
        assert_eq!(w0, workflow_id(&a, 0));
        assert_ne!(w0, workflow_id(&a, 1));
        assert_ne!(w0, workflow_id(&submission_id_for_key("other"), 0));
        assert!(uuid::Uuid::parse_str(&w0).is_ok());
        let ids = workflow_ids(&a, 20_000, 0..20_000);
        let distinct: std::collections::HashSet<&String> = ids.iter().collect();
        assert_eq!(distinct.len(), 20_000);
        assert_eq!(
            workflow_ids(&a, 5, 3..10),
            vec![workflow_id(&a, 3), workflow_id(&a, 4)]
        );
        assert!(workflow_ids(&a, 5, 7..10).is_empty());
        // Length prefixes: ("ab", "c") and ("a", "bc") differ.
        assert_ne!(
            derived_uuid("d", &[b"ab", b"c"]),
            derived_uuid("d", &[b"a", b"bc"])
        );
    }

    #[test]
    fn derivation_is_stable() {
        // Fixed values (computed independently: SHA-256 over the domain and
        // the length-prefixed parts, first 16 bytes as a version 8 UUID).
        // Changing the derivation would make a retry after an upgrade
        // create its submission a second time.
        let s = submission_id_for_key("batch-2026-11-25");
        assert_eq!(s, "332017d5-c5b9-8054-9a62-742ae259bea8");
        assert_eq!(workflow_id(&s, 0), "785cfe01-21bf-85cc-ab85-8e1aeb29f802");
        assert_eq!(
            workflow_id(&s, 19_999),
            "75b3c63c-57e5-882a-b4e0-5ddc1292749f"
        );
    }

    #[test]
    fn chunks_cover_the_rest_exactly_once() {
        let c: Vec<Range<usize>> = chunks(0, 1_050, 500).collect();
        assert_eq!(c, vec![0..500, 500..1000, 1000..1050]);
        let c: Vec<Range<usize>> = chunks(500, 1_000, 500).collect();
        assert_eq!(c, vec![500..1000]);
        assert_eq!(chunks(1_000, 1_000, 500).count(), 0);
        assert_eq!(chunks(0, 3, 0).count(), 3, "a zero chunk size means 1");
        for (from, count, size) in [(0, 100_000, 500), (37, 20_000, 333), (0, 1, 7)] {
            let mut next = from;
            for r in chunks(from, count, size) {
                assert_eq!(r.start, next);
                assert!(r.len() <= size && !r.is_empty());
                next = r.end;
            }
            assert_eq!(next, count);
        }
    }

    #[test]
    fn fingerprint_tells_requests_apart() {
        let items = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let p = json!("stock-analysis");
        let f = fingerprint(&items(&["A", "B"]), &p, 1000, false);
        assert_eq!(f, fingerprint(&items(&["A", "B"]), &p, 1000, false));
        assert_ne!(f, fingerprint(&items(&["B", "A"]), &p, 1000, false));
        assert_ne!(f, fingerprint(&items(&["AB"]), &p, 1000, false));
        assert_ne!(
            f,
            fingerprint(&items(&["A", "B"]), &json!("x"), 1000, false)
        );
        assert_ne!(f, fingerprint(&items(&["A", "B"]), &p, 200, false));
        assert_ne!(f, fingerprint(&items(&["A", "B"]), &p, 1000, true));
    }

    #[test]
    fn summary_pages_and_bounds() {
        let rec = SubmissionRecord {
            schema_version: SUBMISSION_SCHEMA_VERSION,
            submission_id: submission_id_for_key("k"),
            idempotency_key: Some("k".into()),
            fingerprint: "f".into(),
            pipeline: "p".into(),
            count: 2_500,
            created: 2_500,
            state: SubmissionState::Complete,
            created_at: Utc::now(),
            updated_at: Utc::now(),
        };
        let first = summary(&rec, 0..SUMMARY_IDS);
        assert_eq!(first.workflow_ids.len(), 1_000);
        assert_eq!(first.next_cursor, Some(1_000));
        let last = summary(&rec, 2_000..3_000);
        assert_eq!(last.workflow_ids.len(), 500);
        assert_eq!(last.next_cursor, None);
        assert_eq!(last.workflow_ids[0], workflow_id(&rec.submission_id, 2_000));
        let json = serde_json::to_value(&first).unwrap();
        assert_eq!(json["idempotency_key"], "k");
        assert_eq!(json["state"], "complete");
        assert_eq!(
            serde_json::to_value(&last).unwrap()["next_cursor"],
            Value::Null
        );
        // 10,000 ids (the largest page) fit in a 1 MiB message many times over.
        let big = summary(
            &SubmissionRecord {
                count: 100_000,
                ..rec.clone()
            },
            0..MAX_PAGE,
        );
        assert!(serde_json::to_vec(&big).unwrap().len() < 512 * 1024);
    }
}
