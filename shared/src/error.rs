//! Typed errors of the shared library.

use std::time::Duration;

/// Result alias for the shared library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in shared code.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Configuration could not be loaded or is invalid.
    #[error("config: {0}")]
    Config(String),
    /// A server could not be reached within the retry budget.
    #[error(
        "could not reach {what} at {url} after {attempts} attempts over {elapsed:?}: {last_error}"
    )]
    Unreachable {
        /// "NATS" or "Redis".
        what: &'static str,
        /// The address tried (credentials removed).
        url: String,
        /// How many attempts were made.
        attempts: u32,
        /// How long it tried.
        elapsed: Duration,
        /// The last error seen.
        last_error: String,
    },
    /// A NATS / JetStream operation failed (the client's error is the
    /// source).
    #[error("nats: {0}")]
    Nats(#[source] BoxError),
    /// A Redis operation failed.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// A Redis pool operation failed (the pool's error is the source).
    #[error("redis pool: {0}")]
    Pool(#[source] BoxError),
    /// A message body could not be decoded.
    #[error("decode: {0} ({code})", code = .0.code())]
    Decode(#[from] crate::envelope::DecodeError),
    /// A subject token could not be decoded.
    #[error("subject token `{token}`: {reason}")]
    Token {
        /// The offending token.
        token: String,
        /// Why it is invalid.
        reason: String,
    },
    /// JSON (de)serialisation.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// A name that would become part of a Redis key is not allowed.
    #[error("invalid {kind} `{name}`: {reason}")]
    InvalidName {
        /// What the name is ("agent type", "lock name", "key prefix", ...).
        kind: &'static str,
        /// The rejected name.
        name: String,
        /// Why it is rejected.
        reason: String,
    },
    /// A durable consumer could not be created or updated.
    #[error("consumer {consumer} on {stream}: {source}")]
    Consumer {
        /// The consumer's durable name.
        consumer: String,
        /// The stream it reads.
        stream: String,
        /// The JetStream error.
        #[source]
        source: BoxError,
    },
    /// The SIGTERM/SIGINT handlers could not be installed.
    #[error("cannot install signal handlers: {0}")]
    Signals(#[source] std::io::Error),
    /// A configuration value breaks a rule.
    #[error("config: {0}")]
    InvalidSetting(#[from] crate::config::InvalidSetting),
    /// An argument is out of range (e.g. a zero TTL).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// A boxed error kept as a source (a client library's error, or a
/// message when there is none).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

impl Error {
    /// Wraps a NATS error (or a message), keeping it as the source.
    pub fn nats(e: impl Into<BoxError>) -> Self {
        Error::Nats(e.into())
    }

    /// A failure to create or update the durable `consumer` on `stream`.
    pub fn consumer(consumer: &str, stream: &str, e: impl Into<BoxError>) -> Self {
        Error::Consumer {
            consumer: consumer.to_string(),
            stream: stream.to_string(),
            source: e.into(),
        }
    }

    /// Wraps a Redis pool error (or a message), keeping it as the source.
    pub fn pool(e: impl Into<BoxError>) -> Self {
        Error::Pool(e.into())
    }
}
