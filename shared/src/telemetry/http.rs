//! The small HTTP listener of every process at `telemetry.metrics_addr`:
//! `GET /metrics` (Prometheus text), `GET /healthz` (the health report;
//! 503 while degraded) and whatever routes the service adds (the
//! coordinator's `/scaling/<agent_type>`).

use std::net::SocketAddr;

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use tokio_util::sync::CancellationToken;

use crate::health::Health;
use crate::Error;

/// The content type Prometheus expects of the text format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The base routes plus `extra`.
pub fn router(health: Health, extra: Router) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .merge(health_route(health))
        .merge(extra)
}

/// `GET /healthz` alone (the console serves it on its public listener,
/// where `/metrics` does not belong).
pub fn health_route<S: Clone + Send + Sync + 'static>(health: Health) -> Router<S> {
    Router::new().route("/healthz", get(move || healthz(health.clone())))
}

async fn metrics() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, PROMETHEUS_TEXT)],
        super::metrics::encode(),
    )
}

async fn healthz(health: Health) -> impl IntoResponse {
    let problems = health.problems();
    let status = if problems.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = serde_json::json!({ "status": health.status(), "problems": problems });
    (status, axum::Json(body))
}

/// Binds `addr` and serves `app` until `shutdown`; returns the bound
/// address (the port is chosen when `addr` asks for 0).
pub async fn serve(
    addr: &str,
    app: Router,
    shutdown: CancellationToken,
) -> Result<SocketAddr, Error> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::Config(format!("telemetry.metrics_addr `{addr}`: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| Error::Config(format!("telemetry.metrics_addr `{addr}`: {e}")))?;
    tokio::spawn(async move {
        let r = axum::serve(listener, app)
            .with_graceful_shutdown(async move { shutdown.cancelled().await })
            .await;
        if let Err(e) = r {
            tracing::warn!(error = %e, "metrics listener stopped");
        }
    });
    Ok(bound)
}
