//! A thin client over the control API.

use std::time::Duration;

use serde_json::Value;

use caucus_shared::nats::{api_request, connect, ApiError};
use caucus_shared::subjects::Subjects;
use caucus_shared::Config;

/// How long a call keeps retrying `standby` answers.
pub const STANDBY_RETRY: Duration = Duration::from_secs(20);

/// Connection to the control API.
#[derive(Clone)]
pub struct Client {
    nats: async_nats::Client,
    subjects: Subjects,
    timeout: Duration,
}

impl Client {
    /// Connects to NATS as configured.
    pub async fn connect(config: &Config) -> anyhow::Result<Client> {
        let nats = connect(&config.nats, "caucus-cli").await?;
        Ok(Client {
            nats,
            subjects: Subjects::new(config.subject_prefix.clone()),
            timeout: config.nats.request_timeout,
        })
    }

    /// Calls `<service>.<operation>`.
    /// A coordinator that stands by (just started, or another instance
    /// leads and the queue group picked this one) answers `standby`: the
    /// call is retried for up to [`STANDBY_RETRY`].
    pub async fn call(&self, service: &str, op: &str, body: Value) -> Result<Value, ApiError> {
        let deadline = std::time::Instant::now() + STANDBY_RETRY;
        loop {
            match api_request(&self.nats, &self.subjects, service, op, &body, self.timeout).await {
                Err(e) if e.code == "standby" && std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                r => return r,
            }
        }
    }

    /// [`Client::call`] waiting at least `timeout` for the answer (a large
    /// `submit` takes longer than `nats.request_timeout`).
    pub async fn call_waiting(
        &self,
        service: &str,
        op: &str,
        body: Value,
        timeout: Duration,
    ) -> Result<Value, ApiError> {
        let timeout = timeout.max(self.timeout);
        let deadline = std::time::Instant::now() + STANDBY_RETRY;
        loop {
            match api_request(&self.nats, &self.subjects, service, op, &body, timeout).await {
                Err(e) if e.code == "standby" && std::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                r => return r,
            }
        }
    }

    /// Same, turning an API error into an `anyhow` error with its code.
    pub async fn call_ok(&self, service: &str, op: &str, body: Value) -> anyhow::Result<Value> {
        self.call(service, op, body)
            .await
            .map_err(|e| anyhow::anyhow!("{service}.{op}: {} ({})", e.message, e.code))
    }

    /// `caucus health SERVICE`.
    pub async fn health(&self, service: &str) -> anyhow::Result<i32> {
        match self.call(service, "health", Value::Null).await {
            Ok(v) => {
                println!("{}", v);
                Ok(0)
            }
            Err(e) => {
                eprintln!("{service}: {} ({})", e.message, e.code);
                Ok(1)
            }
        }
    }

    /// The raw NATS client.
    pub fn nats(&self) -> &async_nats::Client {
        &self.nats
    }
}
