//! A pooled Redis connection, established with retry and backoff.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};
use redis::{ClientTlsConfig, ConnectionInfo, IntoConnectionInfo, TlsCertificates};

pub use crate::config::redact_url;
use crate::config::RedisConfig;
use crate::Error;

/// The pool every component uses.
pub type RedisPool = deadpool_redis::Pool;

/// Builds the pool and proves it works with a `PING`, retrying with
/// exponential backoff up to `connect_attempts`. The error names the URL
/// (password removed) and the last failure.
pub async fn connect(cfg: &RedisConfig) -> Result<RedisPool, Error> {
    let manager = deadpool_redis::Manager::new(connection_info(cfg)?)
        .map_err(|e| Error::Config(format!("redis.url {}: {e}", redact_url(&cfg.url))))?;
    let pool = deadpool_redis::Pool::builder(manager)
        .max_size(cfg.pool_size.max(1))
        .wait_timeout(Some(cfg.connect_timeout))
        .create_timeout(Some(cfg.connect_timeout))
        .runtime(deadpool_redis::Runtime::Tokio1)
        .build()
        .map_err(Error::pool)?;
    let started = Instant::now();
    let attempts = cfg.connect_attempts.max(1);
    let attempt = AtomicU32::new(0);
    let outcome = (|| async {
        attempt.fetch_add(1, Ordering::Relaxed);
        ping(&pool).await
    })
    .retry(startup_backoff(attempts, cfg.connect_backoff_max))
    .await;
    match outcome {
        Ok(()) => Ok(pool),
        Err(e) => Err(Error::Unreachable {
            what: "Redis",
            url: redact_url(&cfg.url),
            attempts: attempt.load(Ordering::Relaxed),
            elapsed: started.elapsed(),
            last_error: e.to_string(),
        }),
    }
}

/// Where and how to connect: `redis.url`, with `redis.username` /
/// `redis.password` replacing the URL's credentials when set, and for a
/// `rediss://` URL the configured CA and client certificate. Errors name
/// the setting, never the password.
pub fn connection_info(cfg: &RedisConfig) -> Result<ConnectionInfo, Error> {
    let shown = || redact_url(&cfg.url);
    let info = cfg
        .url
        .as_str()
        .into_connection_info()
        .map_err(|e| Error::Config(format!("redis.url {}: {e}", shown())))?;
    let mut settings = info.redis_settings().clone();
    if let Some(user) = &cfg.username {
        settings = settings.set_username(user);
    }
    if let Some(password) = &cfg.password {
        settings = settings.set_password(password.expose());
    }
    let info = info.set_redis_settings(settings);
    let Some(certs) = tls_certificates(cfg)? else {
        return Ok(info);
    };
    if !matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. }) {
        return Err(Error::Config(format!(
            "redis.tls_* files are set but redis.url {} is not rediss://",
            shown()
        )));
    }
    // The client turns the PEM files into the connection's TLS parameters.
    let client = redis::Client::build_with_tls(info, certs)
        .map_err(|e| Error::Config(format!("redis TLS files: {e}")))?;
    Ok(client.get_connection_info().clone())
}

/// The CA and client certificate files, read; `None` when none is set.
fn tls_certificates(cfg: &RedisConfig) -> Result<Option<TlsCertificates>, Error> {
    let read = |key: &str, path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|e| Error::Config(format!("redis.{key} {}: {e}", path.display())))
    };
    let client_tls = match (&cfg.tls_cert_file, &cfg.tls_key_file) {
        (Some(c), Some(k)) => Some(ClientTlsConfig {
            client_cert: read("tls_cert_file", c)?,
            client_key: read("tls_key_file", k)?,
        }),
        (None, None) => None,
        _ => {
            return Err(Error::Config(
                "redis.tls_cert_file and redis.tls_key_file must be set together".into(),
            ))
        }
    };
    let root_cert = match &cfg.tls_ca_file {
        Some(ca) => Some(read("tls_ca_file", ca)?),
        None => None,
    };
    if client_tls.is_none() && root_cert.is_none() {
        return Ok(None);
    }
    Ok(Some(TlsCertificates {
        client_tls,
        root_cert,
    }))
}

/// The start-up backoff of both servers: `attempts` tries in all, pauses
/// doubling from 50 ms up to `max`.
pub(crate) fn startup_backoff(attempts: u32, max: Duration) -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(50))
        .with_factor(2.0)
        .with_max_delay(max)
        .with_max_times(attempts.saturating_sub(1) as usize)
}

/// One `PING` on a pooled connection.
pub(crate) async fn ping(pool: &RedisPool) -> Result<(), Error> {
    let mut c = pool.get().await.map_err(Error::pool)?;
    redis::cmd("PING").query_async::<String>(&mut c).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(cfg: &RedisConfig) -> (Option<String>, Option<String>, i64) {
        let i = connection_info(cfg).unwrap();
        let s = i.redis_settings();
        (
            s.username().map(str::to_string),
            s.password().map(str::to_string),
            s.db(),
        )
    }

    #[test]
    fn credentials_come_from_the_url_unless_configured() {
        let mut cfg = RedisConfig {
            url: "redis://urluser:urlpw@127.0.0.1:6379/2".into(),
            ..RedisConfig::default()
        };
        assert_eq!(
            info(&cfg),
            (Some("urluser".into()), Some("urlpw".into()), 2)
        );
        cfg.username = Some("worker".into());
        cfg.password = Some("s3cret".into());
        assert_eq!(
            info(&cfg),
            (Some("worker".into()), Some("s3cret".into()), 2)
        );
        cfg.url = "redis://127.0.0.1:6379".into();
        assert_eq!(
            info(&cfg),
            (Some("worker".into()), Some("s3cret".into()), 0)
        );
        cfg.username = None;
        assert_eq!(info(&cfg), (None, Some("s3cret".into()), 0));
    }

    #[test]
    fn errors_never_carry_the_password() {
        let cfg = RedisConfig {
            url: "nope://u:secret@h".into(),
            ..RedisConfig::default()
        };
        let e = connection_info(&cfg).unwrap_err().to_string();
        assert!(e.contains("redis.url nope://u:***@h"), "{e}");
        assert!(!e.contains("secret"), "{e}");
        let cfg = RedisConfig {
            url: "redis://u:secret@h".into(),
            tls_ca_file: Some("/nonexistent/ca.pem".into()),
            ..RedisConfig::default()
        };
        let e = connection_info(&cfg).unwrap_err().to_string();
        assert!(e.contains("redis.tls_ca_file /nonexistent/ca.pem"), "{e}");
        let cfg = RedisConfig {
            tls_cert_file: Some("/x".into()),
            ..RedisConfig::default()
        };
        let e = connection_info(&cfg).unwrap_err().to_string();
        assert!(e.contains("must be set together"), "{e}");
    }

    #[tokio::test]
    async fn unreachable_names_the_url() {
        let cfg = RedisConfig {
            url: format!("redis://:secret@127.0.0.1:{}", unused_port()),
            connect_attempts: 2,
            connect_backoff_max: Duration::from_millis(10),
            connect_timeout: Duration::from_millis(200),
            ..RedisConfig::default()
        };
        let e = connect(&cfg).await.unwrap_err().to_string();
        assert!(
            e.contains("could not reach Redis at redis://:***@127.0.0.1:"),
            "{e}"
        );
        assert!(!e.contains("secret"), "{e}");
    }

    fn unused_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }
}
