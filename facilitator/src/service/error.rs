//! Errors of the facilitator service, with their API codes and whether a
//! consumed message should be retried or dead-lettered.

use caucus_shared::envelope::DecodeError;
use caucus_shared::nats::dlq::DlqReason;
use caucus_shared::nats::ApiError;

use caucus_shared::config::InvalidSetting;

use super::store::StoreError;
use super::sync::SyncError;
use crate::credibility::CredibilityError;
use crate::debate::DebateError;

/// Errors that stop the facilitator from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A `[facilitator]` setting breaks a rule.
    #[error("config: {0}")]
    Config(#[from] InvalidSetting),
    /// The credibility parameters are inconsistent.
    #[error("config: {0}")]
    Credibility(#[from] CredibilityError),
    /// A bucket, consumer or the expert queues could not be set up.
    #[error(transparent)]
    Infra(#[from] caucus_shared::Error),
}

/// What can go wrong handling a message or an API call.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The debate refused the transition (snapshot, sender, state).
    #[error(transparent)]
    Debate(#[from] DebateError),
    /// The request is malformed.
    #[error("{0}")]
    BadRequest(String),
    /// No such debate.
    #[error("no debate `{0}`")]
    NotFound(String),
    /// The body is not a valid envelope.
    #[error("{0}")]
    Decode(#[from] DecodeError),
    /// KV failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The sync protocol failed.
    #[error(transparent)]
    Sync(#[from] SyncError),
    /// Redis or NATS failed.
    #[error("{0}")]
    Infra(#[from] caucus_shared::Error),
}

impl ServiceError {
    /// Machine-readable code.
    pub fn code(&self) -> &str {
        match self {
            ServiceError::Debate(e) => e.code(),
            ServiceError::BadRequest(_) => "bad_request",
            ServiceError::NotFound(_) => "not_found",
            ServiceError::Decode(e) => e.code(),
            ServiceError::Store(StoreError::Conflict(_)) => "conflict",
            ServiceError::Store(_) => "store_unavailable",
            ServiceError::Sync(SyncError::Busy(_)) => "sync_lock_busy",
            ServiceError::Sync(_) => "sync_failed",
            ServiceError::Infra(_) => "unavailable",
        }
    }

    /// True when trying again later may succeed (consumed messages are
    /// redelivered instead of dead-lettered).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ServiceError::Store(_) | ServiceError::Sync(_) | ServiceError::Infra(_)
        )
    }
}

impl DlqReason for ServiceError {
    fn code(&self) -> &str {
        ServiceError::code(self)
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        ApiError::new(e.code(), e.to_string())
    }
}
