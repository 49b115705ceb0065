//! Creating and updating the topology: what only the coordinator (at
//! start, and for each agent type it sees) and `caucus init` (with admin
//! credentials) do. Every other service binds ([`super::bind`]).
//!
//! Every function is idempotent and safe to run from many processes at
//! once (see [`super::topology`]).

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::Context;

use super::buckets::{self, BucketSpec};
use super::consumers::{self, ConsumerSpec};
use super::topology::{ensure_kv, ensure_streams};
use crate::subjects::{StreamKind, Subjects};
use crate::{Config, Error};

/// How many create rounds a lost creation race may take.
const RACE_ROUNDS: u32 = 5;

/// The names of what was created or updated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Administered {
    /// Stream names.
    pub streams: Vec<String>,
    /// KV bucket names (with the prefix).
    pub buckets: Vec<String>,
    /// `<consumer> on <stream>`.
    pub consumers: Vec<String>,
}

impl Administered {
    fn add(&mut self, other: Administered) {
        self.streams.extend(other.streams);
        self.buckets.extend(other.buckets);
        self.consumers.extend(other.consumers);
    }
}

/// Creates or updates the durable consumer `spec` describes.
pub async fn create_consumer(js: &Context, spec: &ConsumerSpec) -> Result<PullConsumer, Error> {
    let mut last = String::new();
    for _ in 0..RACE_ROUNDS {
        // The server's create-or-update action is idempotent; two concurrent
        // first creations can still collide, and the next round settles it.
        match js
            .create_consumer_on_stream(spec.config.clone(), &spec.stream)
            .await
        {
            Ok(c) => return Ok(c),
            Err(e) => last = e.to_string(),
        }
    }
    Err(Error::consumer(spec.name(), &spec.stream, last))
}

/// Creates or updates one bucket of [`buckets::restricted`].
pub async fn create_bucket(
    js: &Context,
    subjects: &Subjects,
    spec: &BucketSpec,
    replicas: usize,
) -> Result<String, Error> {
    ensure_kv(
        js,
        subjects,
        spec.name,
        spec.history,
        spec.max_age,
        replicas,
    )
    .await?;
    Ok(subjects.bucket(spec.name))
}

/// Creates or updates every stream, then [`restricted`]: what the
/// coordinator sets up at start.
pub async fn fixed(js: &Context, subjects: &Subjects, cfg: &Config) -> Result<Administered, Error> {
    ensure_streams(js, subjects, cfg).await?;
    let mut done = Administered {
        streams: StreamKind::ALL
            .iter()
            .map(|k| subjects.stream(*k))
            .collect(),
        ..Default::default()
    };
    done.add(restricted(js, subjects, cfg).await?);
    Ok(done)
}

/// Creates or updates the facilitator's and correlator's buckets and
/// consumers (the streams must exist).
pub async fn restricted(
    js: &Context,
    subjects: &Subjects,
    cfg: &Config,
) -> Result<Administered, Error> {
    let mut done = Administered::default();
    for spec in buckets::restricted(cfg) {
        done.buckets
            .push(create_bucket(js, subjects, &spec, cfg.nats.replicas).await?);
    }
    for spec in consumers::fixed(subjects, cfg) {
        create_consumer(js, &spec).await?;
        done.consumers
            .push(format!("{} on {}", spec.name(), spec.stream));
    }
    Ok(done)
}

/// Creates or updates the consumers of one agent type (`workers-<t>`,
/// `agents-<t>`), with the `[worker]` settings of `cfg`.
pub async fn agent_type(
    js: &Context,
    subjects: &Subjects,
    cfg: &Config,
    agent_type: &str,
) -> Result<Vec<String>, Error> {
    let mut names = Vec::new();
    for spec in consumers::for_agent_type(subjects, cfg, agent_type) {
        create_consumer(js, &spec).await?;
        names.push(format!("{} on {}", spec.name(), spec.stream));
    }
    Ok(names)
}

/// [`fixed`] and [`agent_type`] for each of `agent_types`: what
/// `caucus init` does.
pub async fn everything(
    js: &Context,
    subjects: &Subjects,
    cfg: &Config,
    agent_types: &[String],
) -> Result<Administered, Error> {
    let mut done = fixed(js, subjects, cfg).await?;
    for t in agent_types {
        done.add(Administered {
            consumers: agent_type(js, subjects, cfg, t).await?,
            ..Default::default()
        });
    }
    Ok(done)
}

/// Creates or updates the durable pull consumer `workers-<agent_type>` on
/// the TASKS stream, filtered to `caucus.tasks.<agent_type>`, explicit ack
/// (a worker binds to it instead).
pub async fn ensure_task_consumer(
    js: &Context,
    subjects: &Subjects,
    agent_type: &str,
    ack_wait: std::time::Duration,
    max_deliver: i64,
) -> Result<PullConsumer, Error> {
    let spec = consumers::task_consumer(subjects, agent_type, ack_wait, max_deliver);
    create_consumer(js, &spec).await
}
