//! The CLI's connection to the control API: the typed [`ApiClient`] plus
//! the error wording the commands print.

use std::time::Duration;

use serde_json::Value;

use caucus_shared::api::{ApiClient, Operation};
use caucus_shared::nats::{connect, ApiError};
use caucus_shared::subjects::Subjects;
use caucus_shared::Config;

/// The variable naming the person the CLI acts as (written into each
/// person's env file by `caucus auth init --operator NAME`).
pub const IDENTITY_VAR: &str = "CAUCUS_IDENTITY";

/// The identity a `CAUCUS_IDENTITY` value names: none when unset or blank.
fn identity(value: Option<String>) -> Option<String> {
    value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Connection to the control API.
#[derive(Clone)]
pub struct Client {
    api: ApiClient,
}

impl Client {
    /// Connects to NATS as configured. Mutating calls are made as
    /// `$CAUCUS_IDENTITY` when it is set (docs/SECURITY.md, "Who decided").
    pub async fn connect(config: &Config) -> anyhow::Result<Client> {
        let nats = connect(&config.nats, "caucus-cli").await?;
        let api = ApiClient::new(
            nats,
            Subjects::new(config.subject_prefix.clone()),
            config.nats.request_timeout,
        );
        let api = match identity(std::env::var(IDENTITY_VAR).ok()) {
            Some(name) => api.with_identity(name),
            None => api,
        };
        Ok(Client { api })
    }

    /// The typed client underneath.
    pub fn api(&self) -> &ApiClient {
        &self.api
    }

    /// Calls the typed operation `O`. A coordinator that stands by (just
    /// started, or another instance leads and the queue group picked this
    /// one) answers `standby`: the call is retried for up to
    /// [`caucus_shared::api::client::STANDBY_RETRY`] (20 s).
    pub async fn op<O: Operation>(&self, request: &O::Request) -> Result<O::Reply, ApiError> {
        self.api.call::<O>(request).await
    }

    /// [`Client::op`], turning an API error into an `anyhow` error that
    /// names the operation and the code.
    pub async fn op_ok<O: Operation>(&self, request: &O::Request) -> anyhow::Result<O::Reply> {
        self.op::<O>(request)
            .await
            .map_err(|e| anyhow::anyhow!("{}.{}: {} ({})", O::SERVICE, O::NAME, e.message, e.code))
    }

    /// Calls `<service>.<operation>` with a JSON body, the reply as it came
    /// (for `--json` output). Retries `standby` as [`Client::op`] does.
    pub async fn call(&self, service: &str, op: &str, body: Value) -> Result<Value, ApiError> {
        self.api.call_value(service, op, &body).await
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
        self.api
            .waiting(timeout)
            .call_value(service, op, &body)
            .await
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
        self.api.nats()
    }
}

#[cfg(test)]
mod tests {
    use super::identity;

    #[test]
    fn a_blank_identity_is_none() {
        assert_eq!(identity(None), None);
        assert_eq!(identity(Some("  ".into())), None);
        assert_eq!(identity(Some(" alice ".into())), Some("alice".into()));
    }
}
