//! Filling the findings index from the stream when a term begins: the
//! addressed findings stored within `coordinator.findings_lookback`, read
//! with an ordered consumer (no acknowledgements, no side effects: the
//! previous leader flagged, registered and dead-lettered them).

use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::{pull, DeliverPolicy};
use async_nats::jetstream::{self};
use chrono::{DateTime, Utc};
use futures::StreamExt;

use caucus_shared::nats::stored::decode_stored;
use caucus_shared::subjects::{StreamKind, Subjects};

use super::classify::{finding_intake, FindingIntake};
use super::findings::{item_of, stored_at};
use super::index::FindingsIndex;

/// Why the index could not be filled (the term starts with what was read).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The findings stream cannot be read.
    #[error("findings stream: {0}")]
    Stream(#[from] async_nats::jetstream::context::GetStreamError),
    /// No consumer could be made on it.
    #[error("findings consumer: {0}")]
    Consumer(#[from] async_nats::jetstream::stream::ConsumerError),
    /// Its messages cannot be fetched.
    #[error("reading findings: {0}")]
    Read(#[from] async_nats::jetstream::consumer::StreamError),
}

/// Adds the addressed findings stored since `since` to `index`; returns
/// how many were read. Stops at what was stored when it began, and when
/// the stream goes quiet for `idle`.
pub async fn fill(
    js: &jetstream::Context,
    subjects: &Subjects,
    since: DateTime<Utc>,
    max_bytes: usize,
    idle: Duration,
    index: &mut FindingsIndex,
) -> Result<usize, ReplayError> {
    let started = Instant::now();
    let stream = js.get_stream(subjects.stream(StreamKind::Findings)).await?;
    let start_time = caucus_shared::clock::to_time(since);
    let consumer = stream
        .create_consumer(pull::OrderedConfig {
            filter_subject: subjects.findings_all(),
            deliver_policy: DeliverPolicy::ByStartTime { start_time },
            ..Default::default()
        })
        .await?;
    let pending = consumer.cached_info().num_pending as usize;
    if pending == 0 {
        return Ok(0);
    }
    let mut msgs = consumer.messages().await?;
    let mut read = 0usize;
    while read < pending {
        let Ok(Some(Ok(m))) = tokio::time::timeout(idle, msgs.next()).await else {
            break;
        };
        read += 1;
        let Ok(env) = decode_stored(&m, max_bytes) else {
            continue;
        };
        let Some(item) = item_of(subjects, &m.subject) else {
            continue;
        };
        if let Ok(FindingIntake::Addressed { addressee, finding }) =
            finding_intake(&env, stored_at(&m))
        {
            index.insert(&item, addressee, finding);
        }
    }
    tracing::info!(
        read,
        items = index.items(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "findings index filled from the stream"
    );
    Ok(read)
}
