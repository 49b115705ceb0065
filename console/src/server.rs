//! The `caucus-console` process: checks that the listen address is safe
//! for the authentication configured, connects to NATS (no Redis: every
//! figure comes through the control API), answers
//! `caucus.api.console.health`, serves HTTP on `console.listen`, logs the
//! ready marker, and drains on SIGTERM/SIGINT (a second signal exits at
//! once with 130).
//!
//! It reuses the shared API server, health state and task tracker rather
//! than `shared::service::Service`, which also connects to Redis and sets
//! up the streams.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::Request;
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use caucus_shared::api::ApiClient;
use caucus_shared::config::ConsoleAuth;
use caucus_shared::health::Health;
use caucus_shared::nats::{self, ApiServer};
use caucus_shared::service::{probe, Signals};
use caucus_shared::service::{Tasks, FORCED_EXIT_CODE};
use caucus_shared::subjects::Subjects;
use caucus_shared::Config;

use crate::auth::Auth;
use crate::state::AppState;

/// The service name in API subjects (`caucus.api.console.health`).
pub const SERVICE: &str = "console";

/// Why the console stopped or did not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration is unsafe or unusable (exit code 2).
    #[error("{0}")]
    Config(String),
    /// NATS, the listener or the API server failed (exit code 1).
    #[error("{0}")]
    Failed(String),
}

impl ServeError {
    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            ServeError::Config(_) => caucus_shared::service::CONFIG_EXIT_CODE,
            ServeError::Failed(_) => 1,
        }
    }
}

/// Refuses, with `console.auth = "none"`, any listen address that is not
/// loopback: without a login anybody who reaches it could approve gates.
pub async fn check_listen(listen: &str, auth: ConsoleAuth) -> Result<Vec<SocketAddr>, ServeError> {
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(listen)
        .await
        .map_err(|e| ServeError::Config(format!("console.listen `{listen}`: {e}")))?
        .collect();
    if addrs.is_empty() {
        return Err(ServeError::Config(format!(
            "console.listen `{listen}` names no address"
        )));
    }
    if auth == ConsoleAuth::None {
        if let Some(open) = addrs.iter().find(|a| !a.ip().is_loopback()) {
            return Err(ServeError::Config(format!(
                "refusing to listen on {open} (console.listen `{listen}`) with console.auth = \"none\": \
                 anybody reaching it could act without logging in. Listen on loopback \
                 (127.0.0.1:8080, the default), or turn authentication on: \
                 console.auth = \"users\" with console.users_file (caucus console add-user), \
                 or \"header\" behind an authenticating proxy"
            )));
        }
    }
    Ok(addrs)
}

/// Runs the console until it is asked to stop; `Ok(true)` after a clean
/// drain, `Ok(false)` when open connections outlived `shutdown_grace`.
pub async fn run(config: Config) -> Result<bool, ServeError> {
    let started = Instant::now();
    let c = config.console.clone();
    let addrs = check_listen(&c.listen, c.auth).await?;
    let auth = Arc::new(Auth::from_config(&c).map_err(|e| ServeError::Config(e.to_string()))?);
    let mut signals = Signals::install().map_err(|e| ServeError::Failed(e.to_string()))?;

    let instance_id = format!("{SERVICE}-{}", &hex::encode(rand::random::<[u8; 6]>()));
    let subjects = Subjects::new(config.subject_prefix.clone());
    tracing::info!(instance_id, nats = %nats::redacted_urls(&config.nats.url), "connecting to NATS");
    let client = nats::connect(&config.nats, &format!("caucus-{instance_id}"))
        .await
        .map_err(|e| ServeError::Failed(e.to_string()))?;

    let shutdown = CancellationToken::new();
    let health = Health::new();
    let tasks = Tasks::new(health.clone());
    ApiServer::new(client.clone(), subjects.clone(), SERVICE)
        .with_instance_id(instance_id.clone())
        .with_health(health.clone())
        .start(shutdown.clone(), tasks.tracker())
        .await
        .map_err(|e| ServeError::Failed(e.to_string()))?;
    let probe = tokio::spawn(probe(
        client.clone(),
        None,
        health.clone(),
        shutdown.clone(),
    ));

    let api = ApiClient::new(client.clone(), subjects, config.nats.request_timeout);
    let grace = config.shutdown_grace;
    let state = AppState {
        api,
        config: Arc::new(config),
    };
    let ending = shutdown.clone();
    if let Some(addr) = state.config.telemetry.metrics_addr.as_deref() {
        // Its own listener, as every process: `/metrics` needs no login and
        // must not sit on the console's public address.
        let app = caucus_shared::telemetry::http::router(health.clone(), axum::Router::new());
        let bound = caucus_shared::telemetry::http::serve(addr, app, shutdown.clone())
            .await
            .map_err(|e| ServeError::Failed(e.to_string()))?;
        tracing::info!(service = SERVICE, addr = %bound, "serving /metrics");
    }
    let app = crate::app(state, auth)
        .merge(caucus_shared::telemetry::http::health_route(health.clone()))
        .layer(axum::middleware::from_fn(move |req, next| {
            end_streams(ending.clone(), req, next)
        }));
    let listener = tokio::net::TcpListener::bind(addrs.as_slice())
        .await
        .map_err(|e| ServeError::Failed(format!("listen on {}: {e}", c.listen)))?;
    let bound = listener
        .local_addr()
        .map_err(|e| ServeError::Failed(e.to_string()))?;
    let stop = shutdown.clone();
    let mut serve = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await
    });
    tracing::info!(
        service = SERVICE,
        instance_id = %instance_id,
        addr = %bound,
        url = %format!("http://{bound}/"),
        auth = ?c.auth,
        startup_ms = started.elapsed().as_millis() as u64,
        "service ready"
    );

    let mut failed = None;
    tokio::select! {
        name = signals.next() => {
            tracing::info!(signal = name, ?grace, "shutting down; send the signal again to exit at once");
        }
        r = &mut serve => failed = Some(format!("the HTTP server stopped: {}", joined(r))),
    }
    let forced = tokio::spawn(async move {
        let name = signals.next().await;
        eprintln!("{name} received again: exiting now");
        std::process::exit(FORCED_EXIT_CODE);
    });
    shutdown.cancel();
    tasks.close();
    let drained = tokio::time::timeout(grace, async {
        if failed.is_none() {
            let r = (&mut serve).await;
            tracing::debug!(result = %joined(r), "HTTP server stopped");
        }
        tasks.wait().await;
    })
    .await
    .is_ok();
    if !drained {
        serve.abort();
        tracing::warn!(?grace, "shutdown grace expired with connections open");
    }
    let _ = client.flush().await;
    forced.abort();
    probe.abort();
    if let Some(e) = failed {
        return Err(ServeError::Failed(e));
    }
    tracing::info!(service = SERVICE, "drained; bye");
    Ok(drained)
}

fn joined(r: Result<std::io::Result<()>, tokio::task::JoinError>) -> String {
    match r {
        Ok(Ok(())) => "ok".into(),
        Ok(Err(e)) => e.to_string(),
        Err(e) => e.to_string(),
    }
}

/// Ends event streams (`text/event-stream` responses) when `shutdown` is
/// cancelled: an open page would otherwise hold the drain for the whole
/// grace. The browser's EventSource reconnects, to another console.
async fn end_streams(shutdown: CancellationToken, req: Request, next: Next) -> Response {
    let res = next.run(req).await;
    let streaming = res
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !streaming {
        return res;
    }
    let (parts, body) = res.into_parts();
    let body = body
        .into_data_stream()
        .take_until(shutdown.cancelled_owned());
    Response::from_parts(parts, Body::from_stream(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_authentication_only_loopback_is_allowed() {
        assert!(check_listen("127.0.0.1:0", ConsoleAuth::None).await.is_ok());
        assert!(check_listen("[::1]:0", ConsoleAuth::None).await.is_ok());
        let e = check_listen("0.0.0.0:8080", ConsoleAuth::None)
            .await
            .unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("console.auth = \"none\""), "{e}");
        assert!(check_listen("0.0.0.0:8080", ConsoleAuth::Users)
            .await
            .is_ok());
        assert!(check_listen("0.0.0.0:8080", ConsoleAuth::Header)
            .await
            .is_ok());
        assert!(check_listen("no port", ConsoleAuth::Users).await.is_err());
    }
}
