//! A pooled Redis connection, established with retry and backoff.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};

use crate::config::RedisConfig;
use crate::Error;

/// The pool every component uses.
pub type RedisPool = deadpool_redis::Pool;

/// Builds the pool and proves it works with a `PING`, retrying with
/// exponential backoff up to `connect_attempts`. The error names the URL
/// (password removed) and the last failure.
pub async fn connect(cfg: &RedisConfig) -> Result<RedisPool, Error> {
    let pool = deadpool_redis::Config::from_url(cfg.url.clone())
        .builder()
        .map_err(Error::pool)?
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

/// `redis://user:secret@host` → `redis://user:***@host` (same for nats URLs).
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s + 3 => {
            let creds = &url[s + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            if creds.contains(':') {
                format!("{}{user}:***{}", &url[..s + 3], &url[at..])
            } else {
                format!("{}***{}", &url[..s + 3], &url[at..])
            }
        }
        _ => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_credentials() {
        assert_eq!(redact_url("redis://:pw@h:1"), "redis://:***@h:1");
        assert_eq!(redact_url("rediss://u:pw@h:1/0"), "rediss://u:***@h:1/0");
        assert_eq!(redact_url("nats://tok@h:1"), "nats://***@h:1");
        assert_eq!(redact_url("redis://h:1"), "redis://h:1");
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
