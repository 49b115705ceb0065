//! `http:URL`: POST the task JSON; a 2xx body is the result. Time-outs,
//! connection errors, 429 and 5xx are transient; other statuses permanent.
//! `https://` agents are verified against the system's roots plus
//! `worker.http_ca_file`; every request is bounded by `worker.http_timeout`.

use std::path::PathBuf;
use std::time::Duration;

use caucus_shared::config::WorkerConfig;
use caucus_shared::task::{TaskDispatch, TaskError};

use super::{error_from_body, permanent, split_findings, transient, HandlerOutput};

/// Why the `http:` client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum HttpClientError {
    /// `worker.http_ca_file` could not be read.
    #[error("worker.http_ca_file {path}: {source}")]
    ReadCa {
        /// The configured file.
        path: PathBuf,
        /// The read failure.
        source: std::io::Error,
    },
    /// `worker.http_ca_file` holds no usable PEM certificate.
    #[error("worker.http_ca_file {path}: {source}")]
    BadCa {
        /// The configured file.
        path: PathBuf,
        /// What reqwest found wrong.
        source: reqwest::Error,
    },
    /// The TLS client could not be set up.
    #[error("http client: {0}")]
    Build(#[source] reqwest::Error),
}

/// The client of `http:` handlers per `cfg`: request timeout
/// `http_timeout`, extra CA `http_ca_file`.
pub fn client(cfg: &WorkerConfig) -> Result<reqwest::Client, HttpClientError> {
    install_crypto_provider();
    let mut builder = reqwest::Client::builder().timeout(cfg.http_timeout);
    if let Some(path) = &cfg.http_ca_file {
        let pem = std::fs::read(path).map_err(|source| HttpClientError::ReadCa {
            path: path.clone(),
            source,
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|source| {
            HttpClientError::BadCa {
                path: path.clone(),
                source,
            }
        })?;
        builder = builder.tls_certs_merge(certs);
    }
    builder.build().map_err(HttpClientError::Build)
}

/// The client before any configuration: system roots, the default
/// `worker.http_timeout`. Infallible: it reads no file.
pub fn default_client() -> reqwest::Client {
    install_crypto_provider();
    reqwest::Client::builder()
        .timeout(default_timeout())
        .build()
        // Only TLS set-up can fail, and the provider is installed above:
        // the same condition under which reqwest::Client::new() panics.
        .expect("an http client without custom TLS settings")
}

fn default_timeout() -> Duration {
    WorkerConfig::default().http_timeout
}

/// reqwest is built without a crypto provider of its own (the workspace
/// uses ring, which async-nats already brings, instead of compiling
/// aws-lc): make ring the process default. Installing twice is a no-op.
fn install_crypto_provider() {
    let _ = async_nats::rustls::crypto::ring::default_provider().install_default();
}

pub(super) async fn run(
    client: &reqwest::Client,
    url: &str,
    task: &TaskDispatch,
) -> Result<HandlerOutput, TaskError> {
    let body = serde_json::to_vec(task).map_err(|e| permanent("encode", e.to_string()))?;
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| {
            let kind = if e.is_timeout() {
                "timeout"
            } else {
                "connection_error"
            };
            transient(kind, format!("POST {url}: {e}"))
        })?;
    let status = resp.status();
    let bytes = resp.bytes().await.map_err(|e| {
        transient(
            "connection_error",
            format!("reading the reply of {url}: {e}"),
        )
    })?;
    if status.is_success() {
        let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
            permanent(
                "bad_output",
                format!("{url} answered {status} with a body that is not JSON: {e}"),
            )
        })?;
        return Ok(split_findings(v));
    }
    if let Some(e) = error_from_body(&bytes) {
        return Err(e);
    }
    let text = String::from_utf8_lossy(&bytes);
    let msg = format!(
        "{url} answered {status}: {}",
        text.chars().take(500).collect::<String>()
    );
    Err(if status.as_u16() == 429 || status.is_server_error() {
        transient("http_status", msg)
    } else {
        permanent("http_status", msg)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wiremock::{matchers::method, Mock, MockServer, ResponseTemplate};

    fn task() -> TaskDispatch {
        serde_json::from_value(serde_json::json!({
            "task_id": "wf/x", "workflow_id": "wf", "item": "A", "pipeline": "p",
            "stage": "x", "agent_type": "x", "attempt": 1,
            "dispatched_at": "2025-11-16T10:30:00Z", "timeout_ms": 0, "inputs": {}
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn a_reply_slower_than_http_timeout_is_a_transient_timeout() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(serde_json::json!({"ok": true}))
                    .set_delay(Duration::from_secs(5)),
            )
            .mount(&server)
            .await;
        let cfg = WorkerConfig {
            http_timeout: Duration::from_millis(200),
            ..WorkerConfig::default()
        };
        let started = std::time::Instant::now();
        let e = run(&client(&cfg).unwrap(), &server.uri(), &task())
            .await
            .unwrap_err();
        assert_eq!(e.error_type, "timeout", "{e:?}");
        assert!(started.elapsed() < Duration::from_secs(4), "{e:?}");
    }

    #[test]
    fn the_default_timeout_is_30_seconds() {
        assert_eq!(default_timeout(), Duration::from_secs(30));
    }

    #[test]
    fn a_bad_ca_file_is_named() {
        let cfg = WorkerConfig {
            http_ca_file: Some("/nonexistent/ca.pem".into()),
            ..WorkerConfig::default()
        };
        let e = client(&cfg).unwrap_err().to_string();
        assert!(e.contains("worker.http_ca_file /nonexistent/ca.pem"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("ca.pem");
        std::fs::write(
            &f,
            "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let cfg = WorkerConfig {
            http_ca_file: Some(f.clone()),
            ..WorkerConfig::default()
        };
        let e = client(&cfg).unwrap_err();
        assert!(matches!(e, HttpClientError::BadCa { .. }), "{e}");
    }
}
