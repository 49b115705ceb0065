//! Binding to the topology without the right to change it.
//!
//! Workers, the facilitator and the correlator run under NATS users that
//! may not create or update streams, buckets or durable consumers: the
//! coordinator and `caucus init` do that ([`super::admin`]). These
//! functions wait for what they need to exist: while it is missing they log
//! one line naming it and what creates it, retry with backoff within a
//! [`BindBudget`], then fail with that same explanation.

use std::future::Future;
use std::time::{Duration, Instant};

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::context::GetStreamErrorKind;
use async_nats::jetstream::stream::ConsumerErrorKind;
use async_nats::jetstream::{kv, Context, ErrorCode};

use super::consumers::ConsumerSpec;
use crate::config::NatsConfig;
use crate::error::BoxError;
use crate::subjects::{StreamKind, Subjects};
use crate::Error;

/// The shortest wait a binder allows: long enough for a coordinator
/// started alongside to come up and create everything.
pub const MIN_BIND_WAIT: Duration = Duration::from_secs(60);
/// The first pause between attempts (doubling up to the budget's cap).
const FIRST_PAUSE: Duration = Duration::from_millis(100);

/// How long, and how often, a binder retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindBudget {
    /// Give up after this long.
    pub total: Duration,
    /// Largest pause between attempts.
    pub max_pause: Duration,
}

impl BindBudget {
    /// The budget of `nats.connect_attempts` attempts at up to
    /// `nats.connect_backoff_max` apart, and at least [`MIN_BIND_WAIT`].
    pub fn from_config(nats: &NatsConfig) -> BindBudget {
        let pause = nats.connect_backoff_max.max(FIRST_PAUSE);
        BindBudget {
            total: (pause * nats.connect_attempts.max(1)).max(MIN_BIND_WAIT),
            max_pause: pause,
        }
    }
}

impl Default for BindBudget {
    /// The budget of the default `[nats]` settings ([`MIN_BIND_WAIT`]).
    fn default() -> Self {
        BindBudget::from_config(&NatsConfig::default())
    }
}

/// Why a bind gave up.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// The thing still did not exist when the budget ran out.
    #[error("{what} does not exist: {created_by} (waited {waited:?})")]
    Missing {
        /// `stream CAUCUS_TASKS`, `consumer workers-x on CAUCUS_TASKS`, ...
        what: String,
        /// What creates it.
        created_by: String,
        /// How long it was waited for.
        waited: Duration,
    },
    /// Looking it up kept failing for another reason (a permission, a
    /// timeout) until the budget ran out.
    #[error("{what}: {source} (retried for {waited:?})")]
    Failed {
        /// What was looked up.
        what: String,
        /// The last error.
        #[source]
        source: BoxError,
        /// How long it was retried.
        waited: Duration,
    },
}

/// One lookup's outcome.
enum Lookup<T> {
    Found(T),
    Missing,
    Failed(BoxError),
}

/// Retries `lookup` within `budget`, logging the first miss and failure.
async fn wait_for<T, F, Fut>(
    what: &str,
    created_by: &str,
    budget: BindBudget,
    mut lookup: F,
) -> Result<T, BindError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Lookup<T>>,
{
    let started = Instant::now();
    let mut pause = FIRST_PAUSE;
    let mut logged_missing = false;
    let mut logged_failure = false;
    loop {
        let last = match lookup().await {
            Lookup::Found(t) => {
                if logged_missing || logged_failure {
                    tracing::info!(what, waited = ?started.elapsed(), "{what} exists now");
                }
                return Ok(t);
            }
            Lookup::Missing => {
                if !logged_missing {
                    logged_missing = true;
                    tracing::warn!(what, "{what} does not exist yet: {created_by}; waiting");
                }
                None
            }
            Lookup::Failed(e) => {
                if !logged_failure {
                    logged_failure = true;
                    tracing::warn!(what, error = %e, "cannot look up {what}; retrying");
                }
                Some(e)
            }
        };
        let waited = started.elapsed();
        if waited >= budget.total {
            return Err(match last {
                None => BindError::Missing {
                    what: what.to_string(),
                    created_by: created_by.to_string(),
                    waited,
                },
                Some(source) => BindError::Failed {
                    what: what.to_string(),
                    source,
                    waited,
                },
            });
        }
        tokio::time::sleep(pause.min(budget.total - waited)).await;
        pause = (pause * 2).min(budget.max_pause);
    }
}

async fn lookup_stream(js: &Context, name: &str) -> Lookup<()> {
    match js.get_stream(name).await {
        Ok(_) => Lookup::Found(()),
        Err(e) => stream_lookup_error(e),
    }
}

fn stream_lookup_error(e: async_nats::jetstream::context::GetStreamError) -> Lookup<()> {
    match e.kind() {
        GetStreamErrorKind::JetStream(j) if j.error_code() == ErrorCode::STREAM_NOT_FOUND => {
            Lookup::Missing
        }
        _ => Lookup::Failed(e.into()),
    }
}

const STREAMS_BY: &str = "the coordinator creates it at start; or run `caucus init`";

/// Waits until every stream of [`StreamKind::ALL`] exists, within one
/// `budget` for them all.
pub async fn streams(js: &Context, subjects: &Subjects, budget: BindBudget) -> Result<(), Error> {
    let started = Instant::now();
    for kind in StreamKind::ALL {
        let name = subjects.stream(kind);
        let what = format!("stream {name}");
        let left = BindBudget {
            total: budget.total.saturating_sub(started.elapsed()),
            ..budget
        };
        wait_for(&what, STREAMS_BY, left, || lookup_stream(js, &name))
            .await
            .map_err(Error::nats)?;
    }
    Ok(())
}

/// Binds to the durable consumer `spec` describes (without changing it).
pub async fn consumer(
    js: &Context,
    spec: &ConsumerSpec,
    budget: BindBudget,
) -> Result<PullConsumer, Error> {
    let what = format!("consumer {} on {}", spec.name(), spec.stream);
    wait_for(&what, &spec.created_by, budget, || async {
        match js
            .get_consumer_from_stream::<_, _, _>(spec.name(), &spec.stream)
            .await
        {
            Ok(c) => Lookup::Found(c),
            Err(e) => match e.kind() {
                ConsumerErrorKind::JetStream(j)
                    if j.error_code() == ErrorCode::CONSUMER_NOT_FOUND
                        || j.error_code() == ErrorCode::STREAM_NOT_FOUND =>
                {
                    Lookup::Missing
                }
                _ => Lookup::Failed(e.into()),
            },
        }
    })
    .await
    .map_err(Error::nats)
}

/// Binds to the KV bucket `<prefix>_<bucket>` (without changing it).
pub async fn kv(
    js: &Context,
    subjects: &Subjects,
    bucket: &str,
    budget: BindBudget,
) -> Result<kv::Store, Error> {
    let name = subjects.bucket(bucket);
    let what = format!("kv bucket {name}");
    let stream = format!("KV_{name}");
    wait_for(&what, STREAMS_BY, budget, || async {
        match lookup_stream(js, &stream).await {
            Lookup::Found(()) => match js.get_key_value(&name).await {
                Ok(store) => Lookup::Found(store),
                Err(e) => Lookup::Failed(e.into()),
            },
            Lookup::Missing => Lookup::Missing,
            Lookup::Failed(e) => Lookup::Failed(e),
        }
    })
    .await
    .map_err(Error::nats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_at_least_a_minute_and_follows_the_connect_settings() {
        let mut nats = NatsConfig::default();
        assert_eq!(BindBudget::from_config(&nats).total, MIN_BIND_WAIT);
        nats.connect_attempts = 100;
        nats.connect_backoff_max = Duration::from_secs(2);
        let b = BindBudget::from_config(&nats);
        assert_eq!(b.total, Duration::from_secs(200));
        assert_eq!(b.max_pause, Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_missing_thing_is_named_with_what_creates_it() {
        let budget = BindBudget {
            total: Duration::from_millis(400),
            max_pause: Duration::from_millis(100),
        };
        let mut calls = 0;
        let err = wait_for::<(), _, _>("stream CAUCUS_TASKS", "run `caucus init`", budget, || {
            calls += 1;
            async { Lookup::Missing }
        })
        .await
        .unwrap_err();
        assert!(calls > 2, "retried: {calls}");
        let text = err.to_string();
        assert!(
            text.starts_with("stream CAUCUS_TASKS does not exist: run `caucus init`"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_thing_that_appears_is_bound() {
        let budget = BindBudget {
            total: Duration::from_secs(10),
            max_pause: Duration::from_millis(100),
        };
        let mut calls = 0;
        let got = wait_for("x", "y", budget, || {
            calls += 1;
            let n = calls;
            async move {
                if n < 3 {
                    Lookup::Missing
                } else {
                    Lookup::Found(n)
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(got, 3);
    }
}
