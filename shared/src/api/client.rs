//! The typed client of the control API.

use std::time::{Duration, Instant};

use serde_json::Value;

pub use super::decode::{decode_reply, decode_request};
use super::error::ApiError;
use super::server::api_request_on;
use super::{identity, Operation, CODE_STANDBY};
use crate::subjects::Subjects;

/// How long a call keeps retrying `standby` answers by default: long
/// enough for a standby coordinator to take over from a dead leader.
pub const STANDBY_RETRY: Duration = Duration::from_secs(20);

/// Pause between two `standby` answers.
const STANDBY_PAUSE: Duration = Duration::from_millis(100);

/// Calls operations on `caucus.api.<service>.<operation>` with typed
/// requests and replies; cheap to clone. With an identity
/// ([`ApiClient::with_identity`]), mutating operations go to
/// `….<operation>.as.<identity>` instead.
#[derive(Clone)]
pub struct ApiClient {
    nats: async_nats::Client,
    subjects: Subjects,
    timeout: Duration,
    standby_retry: Duration,
    identity: Option<String>,
}

impl std::fmt::Debug for ApiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiClient")
            .field("prefix", &self.subjects.prefix())
            .field("timeout", &self.timeout)
            .field("identity", &self.identity)
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
            identity: None,
        }
    }

    /// Calls mutating operations as `name`, on `….<operation>.as.<name>`
    /// (the server then records `name` as who acted; NATS permissions
    /// decide whether this connection may speak as `name`). Read
    /// operations stay on their bare subjects.
    pub fn with_identity(mut self, name: impl Into<String>) -> ApiClient {
        self.identity = Some(name.into());
        self
    }

    /// The identity mutating calls are made as, if any.
    pub fn identity(&self) -> Option<&str> {
        self.identity.as_deref()
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
        let reply = self.send(O::SERVICE, O::NAME, O::MUTATES, &body).await?;
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
    /// newer service added). `standby` is retried as in [`ApiClient::call`];
    /// an operation the catalog marks mutating is called as the identity.
    pub async fn call_value(
        &self,
        service: &str,
        operation: &str,
        body: &Value,
    ) -> Result<Value, ApiError> {
        let mutates = super::catalog()
            .iter()
            .any(|d| d.service == service && d.name == operation && d.mutates);
        self.send(service, operation, mutates, body).await
    }

    /// The subject `operation` is called on: as the identity when it
    /// mutates and there is one.
    fn subject(&self, service: &str, operation: &str, mutates: bool) -> String {
        match &self.identity {
            Some(id) if mutates => identity::subject_as(&self.subjects, service, operation, id),
            _ => self.subjects.api(service, operation),
        }
    }

    async fn send(
        &self,
        service: &str,
        operation: &str,
        mutates: bool,
        body: &Value,
    ) -> Result<Value, ApiError> {
        let subject = self.subject(service, operation, mutates);
        let deadline = Instant::now() + self.standby_retry;
        loop {
            match api_request_on(&self.nats, subject.clone(), service, body, self.timeout).await {
                Err(e) if e.code == CODE_STANDBY && Instant::now() < deadline => {
                    tokio::time::sleep(STANDBY_PAUSE).await;
                }
                r => return r,
            }
        }
    }
}
