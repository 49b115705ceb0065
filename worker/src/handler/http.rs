//! `http:URL`: POST the task JSON; a 2xx body is the result. Time-outs,
//! connection errors, 429 and 5xx are transient; other statuses permanent.
//! `https://` agents are verified against the system's roots plus
//! `worker.http_ca_file`; every request is bounded by `worker.http_timeout`.
//! The request carries the `task` span's W3C `traceparent` (and
//! `tracestate`) headers, so the agent's spans join the task's trace.

use std::path::PathBuf;
use std::time::Duration;

use caucus_shared::config::WorkerConfig;
use caucus_shared::task::{TaskDispatch, TaskError};

use super::trace_context;
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
    let mut req = client.post(url).header("content-type", "application/json");
    // Handlers run inside the `task` span: this is its context.
    let trace = trace_context::current();
    if let Some(tp) = trace.traceparent {
        req = req.header("traceparent", tp);
    }
    if let Some(ts) = trace.tracestate {
        req = req.header("tracestate", ts);
    }
    let resp = req.body(body).send().await.map_err(|e| {
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
        return Ok(split_findings(v, &task.task_id));
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

    #[tokio::test]
    async fn the_request_carries_the_task_spans_trace_context() {
        use opentelemetry::trace::TraceContextExt;
        use tracing::Instrument;
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        use wiremock::matchers::header_exists;
        crate::test_trace::init();
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(header_exists("traceparent"))
            .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({"ok": true})))
            .mount(&server)
            .await;
        let mut dispatch = async_nats::HeaderMap::new();
        dispatch.insert(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        );
        dispatch.insert("tracestate", "vendor=x");
        let span = crate::runtime::task_span::task_span(&task(), "w1", Some(&dispatch));
        let sc = span.context().span().span_context().clone();
        let client = client(&WorkerConfig::default()).unwrap();
        let out = run(&client, &server.uri(), &task())
            .instrument(span)
            .await
            .unwrap();
        assert_eq!(out.output["ok"], true);
        let got = server.received_requests().await.unwrap();
        assert_eq!(got.len(), 1);
        let header = |name: &str| {
            got[0]
                .headers
                .get(name)
                .map(|v| v.to_str().unwrap().to_string())
        };
        assert_eq!(
            header("traceparent"),
            Some(format!(
                "00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01",
                sc.span_id()
            )),
            "the task span's trace id and its own span id"
        );
        assert_eq!(header("tracestate").as_deref(), Some("vendor=x"));
    }

    #[tokio::test]
    async fn outside_a_span_the_request_has_no_traceparent() {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(200).set_body_json(serde_json::json!({})))
            .mount(&server)
            .await;
        let client = client(&WorkerConfig::default()).unwrap();
        run(&client, &server.uri(), &task()).await.unwrap();
        let got = server.received_requests().await.unwrap();
        assert!(got[0].headers.get("traceparent").is_none());
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
