//! A pooled Redis connection, established with retry and backoff.

use std::time::{Duration, Instant};

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
    let mut pause = Duration::from_millis(50);
    let mut last_error = String::new();
    for attempt in 1..=attempts {
        match ping(&pool).await {
            Ok(()) => return Ok(pool),
            Err(e) => last_error = e,
        }
        if attempt < attempts {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(cfg.connect_backoff_max);
        }
    }
    Err(Error::Unreachable {
        what: "Redis",
        url: redact_url(&cfg.url),
        attempts,
        elapsed: started.elapsed(),
        last_error,
    })
}

pub(crate) async fn ping(pool: &RedisPool) -> Result<(), String> {
    let mut c = pool.get().await.map_err(|e| e.to_string())?;
    redis::cmd("PING")
        .query_async::<String>(&mut c)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
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
