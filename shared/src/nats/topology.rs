//! Streams, KV buckets and the task consumers, created or updated by the
//! coordinator at start-up and by `caucus init` (see [`super::admin`]; the
//! other services bind, see [`super::bind`]).
//!
//! Every function is idempotent and safe to run from many processes at once:
//! each tries a creation first (answered with the stream when it exists
//! with the same config), updates when it exists with another config, and
//! goes round again when it was deleted in between or when a cluster left
//! the request unanswered (a replicated stream just created by a racing
//! process has no leader yet).

use std::time::Duration;

use async_nats::jetstream::context::{
    CreateKeyValueErrorKind, CreateStreamError, CreateStreamErrorKind, UpdateKeyValueErrorKind,
};
use async_nats::jetstream::stream::{self, DiscardPolicy, RetentionPolicy, StorageType};
use async_nats::jetstream::ErrorCode;
use async_nats::jetstream::{kv, Context};

use crate::subjects::{StreamKind, Subjects};
use crate::{Config, Error};

/// Publishes that repeat a `Nats-Msg-Id` within this window are dropped.
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);

/// How many create/update rounds a lost race may take before giving up.
const RACE_ROUNDS: u32 = 5;
/// How long creating a stream or bucket waits for a cluster to place its
/// replicas: JetStream answers "no suitable peers for placement" (10005)
/// while a node that just started is not yet known current by the meta
/// leader, which a client that connected to a ready node can meet.
const PLACEMENT_WAIT: Duration = Duration::from_secs(20);
/// Between two placement tries.
const PLACEMENT_RETRY: Duration = Duration::from_millis(250);

/// The configuration of one stream of the topology.
pub fn stream_config(subjects: &Subjects, kind: StreamKind, cfg: &Config) -> stream::Config {
    let max_age = match kind {
        StreamKind::Dlq => cfg.nats.dlq_max_age,
        _ => cfg.nats.stream_max_age,
    };
    let retention = match kind {
        // A task is gone once a worker acks it; nobody else needs it.
        StreamKind::Tasks => RetentionPolicy::WorkQueue,
        _ => RetentionPolicy::Limits,
    };
    stream::Config {
        name: subjects.stream(kind),
        description: Some(format!("caucus {kind:?} stream")),
        subjects: subjects.stream_subjects(kind),
        retention,
        storage: StorageType::File,
        max_age,
        max_bytes: cfg.nats.stream_max_bytes,
        discard: DiscardPolicy::Old,
        num_replicas: cfg.nats.replicas.max(1),
        // The server rejects a window longer than max_age.
        duplicate_window: DUPLICATE_WINDOW.min(max_age),
        ..Default::default()
    }
}

/// Creates or updates every stream of [`StreamKind::ALL`].
pub async fn ensure_streams(js: &Context, subjects: &Subjects, cfg: &Config) -> Result<(), Error> {
    for kind in StreamKind::ALL {
        ensure_stream(js, stream_config(subjects, kind, cfg)).await?;
    }
    Ok(())
}

/// Creates or updates one stream.
pub async fn ensure_stream(js: &Context, config: stream::Config) -> Result<stream::Info, Error> {
    let name = config.name.clone();
    let fail = |e: &dyn std::fmt::Display| Error::nats(format!("stream {name}: {e}"));
    let mut last = String::new();
    let placed_by = tokio::time::Instant::now() + PLACEMENT_WAIT;
    let mut round = 0;
    while round < RACE_ROUNDS {
        round += 1;
        // Create first: creating a stream that exists with this very config
        // is answered with its info, and two processes creating a fresh
        // cluster's streams at once send identical creations. An update
        // sent while a racing creation is still electing its RAFT leader
        // goes unanswered on a cluster, and so did the creation it raced
        // (each such collision cost a whole request timeout).
        match js.create_stream(config.clone()).await {
            Ok(s) => return Ok(s.cached_info().clone()),
            // It exists with another config: update it below.
            Err(e) if lost_race(&e.kind()) => {}
            Err(e) if timed_out(&e) => {
                last = e.to_string();
                continue;
            }
            Err(e) if no_peers(&e) && tokio::time::Instant::now() < placed_by => {
                last = e.to_string();
                round -= 1;
                tokio::time::sleep(PLACEMENT_RETRY).await;
                continue;
            }
            Err(e) => return Err(fail(&e)),
        }
        let mut update = config.clone();
        update.num_replicas = replicas_kept(js, &name, config.num_replicas).await;
        match js.update_stream(&update).await {
            Ok(info) => return Ok(info),
            // Deleted since, or not answered yet: go round again.
            Err(e) if e.kind() == CreateStreamErrorKind::NotFound || timed_out(&e) => {
                last = e.to_string()
            }
            Err(e) => return Err(fail(&e)),
        }
    }
    Err(fail(&format!(
        "still contended after {RACE_ROUNDS} rounds: {last}"
    )))
}

/// Whether JetStream could not place the replicas yet (10005, "no
/// suitable peers for placement"), anywhere in `e`'s chain.
fn no_peers(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        let code = err
            .downcast_ref::<CreateStreamError>()
            .and_then(|c| match c.kind() {
                CreateStreamErrorKind::JetStream(j) => Some(j.error_code()),
                _ => None,
            })
            .or_else(|| {
                err.downcast_ref::<async_nats::jetstream::Error>()
                    .map(|j| j.error_code())
            });
        if code == Some(ErrorCode::CLUSTER_NO_PEERS) {
            return true;
        }
        cur = err.source();
    }
    false
}

fn lost_race(kind: &CreateStreamErrorKind) -> bool {
    matches!(kind, CreateStreamErrorKind::JetStream(e) if e.error_code() == ErrorCode::STREAM_NAME_EXIST)
}

/// The replicas an update of `stream` sets: `wanted`, or the stream's own
/// when it has more. Updates never scale a stream down: a process left at
/// the default `nats.replicas = 1` on a cluster would otherwise cut every
/// R3 stream to one copy when it starts (scaling down is an operator's
/// deliberate act, e.g. `nats stream edit --replicas`).
async fn replicas_kept(js: &Context, stream: &str, wanted: usize) -> usize {
    let Ok(s) = js.get_stream(stream).await else {
        return wanted;
    };
    let have = s.cached_info().config.num_replicas;
    if have > wanted {
        tracing::warn!(
            stream,
            replicas = have,
            configured = wanted,
            "keeping the stream's replicas: nats.replicas is lower and updates do not scale down"
        );
        return have;
    }
    wanted
}

/// Whether a JetStream request (or the one an error wraps) went unanswered.
///
/// On a cluster, a request about a replicated stream whose RAFT group has
/// no leader yet gets no answer at all: one another process created a
/// moment ago (two processes administering a fresh cluster at once, e.g.
/// the coordinator and `caucus init`), or one whose leader just died.
/// Asking again once the group has elected a leader is answered, and every
/// request here is idempotent, so a timeout is another round, not a failure.
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if err
            .downcast_ref::<CreateStreamError>()
            .is_some_and(|e| e.kind() == CreateStreamErrorKind::TimedOut)
        {
            return true;
        }
        cur = err.source();
    }
    false
}

/// Creates or updates the KV bucket `<prefix>_<bucket>`.
pub async fn ensure_kv(
    js: &Context,
    subjects: &Subjects,
    bucket: &str,
    history: i64,
    max_age: Duration,
    replicas: usize,
) -> Result<kv::Store, Error> {
    let name = subjects.bucket(bucket);
    let config = kv::Config {
        bucket: name.clone(),
        description: format!("caucus {bucket}"),
        history,
        max_age,
        storage: StorageType::File,
        num_replicas: replicas.max(1),
        ..Default::default()
    };
    create_or_update_kv(js, config).await
}

/// Like [`ensure_kv`] (history 1, no age limit), for a bucket whose
/// entries may carry their own TTL (`Nats-TTL`, NATS ≥ 2.11): finished
/// workflow records and their outputs expire while unfinished ones stay.
pub async fn ensure_kv_with_ttl(
    js: &Context,
    subjects: &Subjects,
    bucket: &str,
    replicas: usize,
) -> Result<kv::Store, Error> {
    let name = subjects.bucket(bucket);
    let config = kv::Config {
        bucket: name.clone(),
        description: format!("caucus {bucket}"),
        history: 1,
        storage: StorageType::File,
        num_replicas: replicas.max(1),
        // Allows per-message TTLs; expired keys leave a delete marker
        // (kept this long) so watchers see them go.
        limit_markers: Some(Duration::from_secs(60)),
        ..Default::default()
    };
    create_or_update_kv(js, config).await
}

async fn create_or_update_kv(js: &Context, config: kv::Config) -> Result<kv::Store, Error> {
    let name = config.bucket.clone();
    let fail = |e: &dyn std::fmt::Display| Error::nats(format!("kv bucket {name}: {e}"));
    let mut last = String::new();
    let placed_by = tokio::time::Instant::now() + PLACEMENT_WAIT;
    let mut round = 0;
    while round < RACE_ROUNDS {
        round += 1;
        // Create first, as [`ensure_stream`] does and for the same reason.
        match js.create_key_value(config.clone()).await {
            Ok(store) => return Ok(store),
            Err(e) if e.kind() == CreateKeyValueErrorKind::TimedOut => {
                last = e.to_string();
                continue;
            }
            Err(e) if no_peers(&e) && tokio::time::Instant::now() < placed_by => {
                last = e.to_string();
                round -= 1;
                tokio::time::sleep(PLACEMENT_RETRY).await;
                continue;
            }
            // The kind does not say why creation failed; when the bucket
            // exists with another config the update below applies ours, and
            // a genuine failure repeats and is reported below.
            Err(e) => last = e.to_string(),
        }
        let mut update = config.clone();
        update.num_replicas = replicas_kept(js, &format!("KV_{name}"), config.num_replicas).await;
        match js.update_key_value(update).await {
            Ok(store) => return Ok(store),
            Err(e) if e.kind() == UpdateKeyValueErrorKind::NotFound || timed_out(&e) => {}
            Err(e) => return Err(fail(&e)),
        }
    }
    Err(fail(&last))
}

pub use super::consumers::task_consumer_name;
