//! The typed client of the control API.

use std::time::{Duration, Instant};

use serde_json::Value;

pub use super::decode::{decode_reply, decode_request};
use super::error::ApiError;
use super::server::api_request;
use super::{Operation, CODE_STANDBY};
use crate::subjects::Subjects;

/// How long a call keeps retrying `standby` answers by default: long
/// enough for a standby coordinator to take over from a dead leader.
pub const STANDBY_RETRY: Duration = Duration::from_secs(20);

/// Pause between two `standby` answers.
const STANDBY_PAUSE: Duration = Duration::from_millis(100);

/// Calls operations on `caucus.api.<service>.<operation>` with typed
/// requests and replies; cheap to clone.
#[derive(Clone)]
pub struct ApiClient {
    nats: async_nats::Client,
    subjects: Subjects,
    timeout: Duration,
    standby_retry: Duration,
}

impl std::fmt::Debug for ApiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiClient")
            .field("prefix", &self.subjects.prefix())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl ApiClient {
    /// A client on `nats` that waits `timeout` for each answer.
    pub fn new(nats: async_nats::Client, subjects: Subjects, timeout: Duration) -> ApiClient {
        ApiClient {
            nats,
            subjects,
            timeout,
            standby_retry: STANDBY_RETRY,
        }
    }

    /// Retries `standby` answers for `retry` (zero: never).
    pub fn with_standby_retry(mut self, retry: Duration) -> ApiClient {
        self.standby_retry = retry;
        self
    }

    /// The same client waiting at least `timeout` (a large `submit` takes
    /// longer than `nats.request_timeout`).
    pub fn waiting(&self, timeout: Duration) -> ApiClient {
        let mut c = self.clone();
        c.timeout = timeout.max(self.timeout);
        c
    }

    /// The NATS connection underneath.
    pub fn nats(&self) -> &async_nats::Client {
        &self.nats
    }

    /// The subjects it calls under.
    pub fn subjects(&self) -> &Subjects {
        &self.subjects
    }

    /// Calls `O` with `request`. Error replies, nobody listening
    /// (`no_responders`) and no answer in time (`timeout`) are
    /// [`ApiError`]s; a reply that does not read as `O::Reply` is
    /// `bad_reply` naming the field.
    pub async fn call<O: Operation>(&self, request: &O::Request) -> Result<O::Reply, ApiError> {
        let body = serde_json::to_value(request)
            .map_err(|e| ApiError::bad_request(format!("request not serialisable: {e}")))?;
        let reply = self.call_value(O::SERVICE, O::NAME, &body).await?;
        decode_reply::<O>(reply)
    }

    /// [`ApiClient::call`] for `health`, which every service answers.
    pub async fn health(&self, service: &str) -> Result<super::HealthReply, ApiError> {
        let reply = self
            .call_value(service, super::Health::NAME, &Value::Null)
            .await?;
        decode_reply::<super::Health>(reply)
    }

    /// Calls `<service>.<operation>` with a JSON body and returns the JSON
    /// reply as it came (for `--json` output, which must not drop fields a
    /// newer service added). `standby` is retried as in [`ApiClient::call`].
    pub async fn call_value(
        &self,
        service: &str,
        operation: &str,
        body: &Value,
    ) -> Result<Value, ApiError> {
        let deadline = Instant::now() + self.standby_retry;
        loop {
            match api_request(
                &self.nats,
                &self.subjects,
                service,
                operation,
                body,
                self.timeout,
            )
            .await
            {
                Err(e) if e.code == CODE_STANDBY && Instant::now() < deadline => {
                    tokio::time::sleep(STANDBY_PAUSE).await;
                }
                r => return r,
            }
        }
    }
}
