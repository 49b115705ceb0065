//! Connecting to NATS: auth and TLS from config, bounded retry at start-up,
//! then async-nats' own endless reconnect for the life of the process.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use async_nats::{ConnectErrorKind, ConnectOptions, Event};
use backon::Retryable;

use crate::config::{redact_urls, NatsConfig};
use crate::redis::startup_backoff;
use crate::Error;

/// Connects with the configured credentials, retrying with exponential
/// backoff up to `connect_attempts`.
///
/// Errors: [`Error::Unreachable`] (naming the redacted URL) when no attempt
/// succeeds; [`Error::Config`] for unreadable credential files; and
/// [`Error::Nats`] at once, without retrying, when the server rejects our
/// credentials or TLS setup, because retrying cannot fix those.
pub async fn connect(cfg: &NatsConfig, name: &str) -> Result<async_nats::Client, Error> {
    let servers = server_list(&cfg.url)?;
    let shown = redacted_urls(&cfg.url);
    let attempts = cfg.connect_attempts.max(1);
    let started = Instant::now();
    let attempt = AtomicU32::new(0);
    let once = || async {
        let n = attempt.fetch_add(1, Ordering::Relaxed) + 1;
        let opts = options(cfg, name, &shown).await.map_err(Attempt::Fatal)?;
        match opts.connect(servers.clone()).await {
            Ok(client) => {
                tracing::debug!(url = %shown, attempt = n, "connected to NATS");
                Ok(client)
            }
            Err(e) if is_permanent(e.kind()) => Err(Attempt::Fatal(Error::nats(format!(
                "NATS at {shown} refused the connection: {e}"
            )))),
            Err(e) => {
                tracing::warn!(url = %shown, attempt = n, attempts, error = %e, "NATS not reachable yet");
                Err(Attempt::Transient(e.to_string()))
            }
        }
    };
    let outcome = once
        .retry(startup_backoff(attempts, cfg.connect_backoff_max))
        .when(|e| matches!(e, Attempt::Transient(_)))
        .await;
    match outcome {
        Ok(client) => Ok(client),
        Err(Attempt::Fatal(e)) => Err(e),
        Err(Attempt::Transient(last_error)) => Err(Error::Unreachable {
            what: "NATS",
            url: shown,
            attempts: attempt.load(Ordering::Relaxed),
            elapsed: started.elapsed(),
            last_error,
        }),
    }
}

/// One connection attempt's failure: `Fatal` ends the retries (bad
/// credentials, TLS, config), `Transient` (the last error's text) does not.
enum Attempt {
    Fatal(Error),
    Transient(String),
}

/// Waits until the server has processed everything this client sent so
/// far (subscriptions included).
///
/// `Client::flush` only writes the socket; this sends a request on a subject
/// nobody serves, and the server's "no responders" answer arrives after it
/// processed every earlier operation of the connection. Never fails: if no
/// answer comes within `timeout` (someone listens on `>`), it just returns.
pub async fn round_trip(client: &async_nats::Client, timeout: Duration) {
    let subject = format!("_CAUCUS.rtt.{}", uuid::Uuid::new_v4().simple());
    let request = async_nats::client::Request::new().timeout(Some(timeout));
    if let Err(e) = client.send_request(subject, request).await {
        if e.kind() != async_nats::client::RequestErrorKind::NoResponders {
            tracing::debug!(error = %e, "NATS round trip not confirmed");
        }
    }
}

fn is_permanent(kind: ConnectErrorKind) -> bool {
    matches!(
        kind,
        ConnectErrorKind::ServerParse
            | ConnectErrorKind::Authentication
            | ConnectErrorKind::AuthorizationViolation
            | ConnectErrorKind::Tls
    )
}

fn server_list(url: &str) -> Result<Vec<String>, Error> {
    let list: Vec<String> = url
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if list.is_empty() {
        return Err(Error::Config("nats.url is empty".into()));
    }
    Ok(list)
}

/// Every URL of a comma-separated list with credentials removed.
pub fn redacted_urls(url: &str) -> String {
    redact_urls(url)
}

async fn options(cfg: &NatsConfig, name: &str, shown: &str) -> Result<ConnectOptions, Error> {
    let mut o = match &cfg.credentials_file {
        Some(path) => ConnectOptions::with_credentials_file(path)
            .await
            .map_err(|e| Error::Config(format!("nats.credentials_file {}: {e}", path.display())))?,
        None => ConnectOptions::new(),
    };
    if let Some(seed) = &cfg.nkey_seed {
        o = o.nkey(seed.expose().to_string());
    }
    if let Some(token) = &cfg.token {
        o = o.token(token.expose().to_string());
    }
    match (&cfg.user, &cfg.password) {
        (Some(u), Some(p)) => o = o.user_and_password(u.clone(), p.expose().to_string()),
        (Some(_), None) | (None, Some(_)) => {
            return Err(Error::Config(
                "nats.user and nats.password must be set together".into(),
            ))
        }
        (None, None) => {}
    }
    if cfg.tls_required {
        o = o.require_tls(true);
    }
    if let Some(ca) = &cfg.tls_ca_file {
        o = o.add_root_certificates(ca.clone());
    }
    match (&cfg.tls_cert_file, &cfg.tls_key_file) {
        (Some(c), Some(k)) => o = o.add_client_certificate(c.clone(), k.clone()),
        (Some(_), None) | (None, Some(_)) => {
            return Err(Error::Config(
                "nats.tls_cert_file and nats.tls_key_file must be set together".into(),
            ))
        }
        (None, None) => {}
    }
    let shown = shown.to_string();
    Ok(o.name(name)
        .connection_timeout(cfg.connect_timeout)
        .request_timeout(Some(cfg.request_timeout))
        // After the first connection, never give up: a NATS restart must not
        // take the process down.
        .max_reconnects(None)
        .event_callback(move |event| {
            let shown = shown.clone();
            async move { log_event(&shown, event) }
        }))
}

fn log_event(url: &str, event: Event) {
    match event {
        Event::Connected => tracing::info!(url, "NATS (re)connected"),
        Event::Disconnected => tracing::warn!(url, "NATS disconnected; reconnecting"),
        Event::LameDuckMode => tracing::warn!(url, "NATS server entered lame duck mode"),
        Event::SlowConsumer(sid) => tracing::warn!(url, sid, "NATS slow consumer"),
        other => tracing::info!(url, event = %other, "NATS event"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_split_and_redacted() {
        assert_eq!(
            server_list("nats://a:1, nats://b:2").unwrap(),
            vec!["nats://a:1", "nats://b:2"]
        );
        assert!(server_list(" , ").is_err());
        assert_eq!(
            redacted_urls("nats://u:pw@a:1,nats://b:2"),
            "nats://u:***@a:1,nats://b:2"
        );
    }

    #[tokio::test]
    async fn unreachable_names_nats_and_the_url() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let cfg = NatsConfig {
            url: format!("nats://u:secret@127.0.0.1:{port}"),
            connect_attempts: 2,
            connect_backoff_max: Duration::from_millis(10),
            connect_timeout: Duration::from_millis(200),
            ..NatsConfig::default()
        };
        let e = connect(&cfg, "t").await.unwrap_err();
        assert!(matches!(e, Error::Unreachable { attempts: 2, .. }), "{e}");
        let text = e.to_string();
        assert!(
            text.contains(&format!(
                "could not reach NATS at nats://u:***@127.0.0.1:{port}"
            )),
            "{text}"
        );
        assert!(!text.contains("secret"), "{text}");
    }

    #[tokio::test]
    async fn half_configured_auth_is_a_config_error() {
        let cfg = NatsConfig {
            user: Some("u".into()),
            ..NatsConfig::default()
        };
        let e = connect(&cfg, "t").await.unwrap_err();
        assert!(matches!(e, Error::Config(_)), "{e}");
    }
}
