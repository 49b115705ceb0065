//! A pooled Redis connection, established with retry and backoff, in the
//! mode `redis.mode` names.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};
use deadpool::managed::Pool;
use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{ClientTlsConfig, ConnectionInfo, IntoConnectionInfo, TlsCertificates};

use super::managers::{ClusterManager, SentinelManager};
use super::RedisPool;
pub use crate::config::redact_url;
use crate::config::{redact_urls, RedisConfig, RedisMode};
use crate::Error;

/// Builds the pool of `redis.mode` and proves it works with a `PING`,
/// retrying with exponential backoff up to `connect_attempts`. The error
/// names the URLs (passwords removed) and the last failure.
pub async fn connect(cfg: &RedisConfig) -> Result<RedisPool, Error> {
    cfg.validate()?;
    let pool = build_pool(cfg)?;
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
            url: redact_urls(&cfg.url),
            attempts: attempt.load(Ordering::Relaxed),
            elapsed: started.elapsed(),
            last_error: e.to_string(),
        }),
    }
}

/// The pool of `redis.mode`, not yet connected (connections open on first
/// use).
fn build_pool(cfg: &RedisConfig) -> Result<RedisPool, Error> {
    let config_error = |e: redis::RedisError| {
        Error::Config(format!(
            "redis.url {} (redis.mode = {}): {e}",
            redact_urls(&cfg.url),
            cfg.mode
        ))
    };
    let pool_config = deadpool_redis::PoolConfig {
        max_size: cfg.pool_size.max(1),
        timeouts: deadpool_redis::Timeouts {
            wait: Some(cfg.connect_timeout),
            create: Some(cfg.connect_timeout),
            recycle: None,
        },
        ..deadpool_redis::PoolConfig::default()
    };
    // The pool of type `$pool` on `$manager`, with the settings above (a
    // macro: the standalone pool's object type is deadpool-redis's own
    // wrapper, the others deadpool's `Object`).
    macro_rules! pooled {
        ($pool:ty, $manager:expr) => {
            <$pool>::builder($manager)
                .config(pool_config)
                .runtime(deadpool_redis::Runtime::Tokio1)
                .build()
                .map_err(Error::pool)
        };
    }
    Ok(match cfg.mode {
        RedisMode::Standalone => {
            let manager =
                deadpool_redis::Manager::new(connection_info(cfg)?).map_err(config_error)?;
            RedisPool::standalone(pooled!(deadpool_redis::Pool, manager)?)
        }
        RedisMode::Cluster => {
            let nodes = cfg
                .urls()
                .into_iter()
                .map(|u| node_info(cfg, u))
                .collect::<Result<Vec<_>, _>>()?;
            // The certificates go to the builder: the cluster client opens
            // every node connection (seeds included) from its own TLS
            // parameters, never from a seed's.
            let mut client = redis::cluster::ClusterClientBuilder::new(nodes);
            if let Some(certs) = tls_certificates(cfg)? {
                client = client.certs(certs);
            }
            let manager = ClusterManager::new(client.build().map_err(config_error)?);
            RedisPool::cluster(pooled!(Pool<ClusterManager>, manager)?)
        }
        RedisMode::Sentinel => {
            let sentinels = cfg
                .urls()
                .into_iter()
                .map(|u| parse_url(cfg, u))
                .collect::<Result<Vec<_>, _>>()?;
            let master = cfg.sentinel_master().unwrap_or_default().to_string();
            let node = sentinel_node_info(cfg, &sentinels[0]);
            let client = match tls_certificates(cfg)? {
                None => SentinelClient::build(
                    sentinels,
                    master,
                    Some(node.into()),
                    SentinelServerType::Master,
                ),
                Some(certs) => sentinel_client_with_certs(&sentinels, master, node, certs),
            }
            .map_err(config_error)?;
            RedisPool::sentinel(pooled!(
                Pool<SentinelManager>,
                SentinelManager::new(client)
            )?)
        }
    })
}

/// A sentinel client whose connections to the sentinels and to the
/// master they name verify with `certs` and present its client
/// certificate. Only the builder takes certificates; it authenticates to
/// every sentinel as the first URL says.
fn sentinel_client_with_certs(
    sentinels: &[ConnectionInfo],
    master: String,
    node: deadpool_redis::sentinel::SentinelNodeConnectionInfo,
    certs: TlsCertificates,
) -> redis::RedisResult<SentinelClient> {
    let mut b = SentinelClientBuilder::new(
        sentinels.iter().map(|s| s.addr().clone()),
        master,
        SentinelServerType::Master,
    )?
    .set_client_to_sentinel_certificates(certs.clone())
    .set_client_to_redis_certificates(certs);
    let first = sentinels[0].redis_settings();
    if let Some(user) = first.username() {
        b = b.set_client_to_sentinel_username(user);
    }
    if let Some(password) = first.password() {
        b = b.set_client_to_sentinel_password(password);
    }
    if let Some(mode) = node.tls_mode {
        b = b.set_client_to_redis_tls_mode(mode.into());
    }
    if let Some(info) = node.redis_connection_info {
        b = b
            .set_client_to_redis_db(info.db)
            .set_client_to_redis_protocol(redis::ProtocolVersion::RESP2);
        if let Some(user) = info.username {
            b = b.set_client_to_redis_username(user);
        }
        if let Some(password) = info.password {
            b = b.set_client_to_redis_password(password);
        }
    }
    b.build()
}

/// How the sentinels' master (and its replicas after a failover) is
/// reached: `redis.username` / `redis.password`, or else the first
/// sentinel URL's credentials and database; TLS when the sentinels are
/// `rediss://`.
fn sentinel_node_info(
    cfg: &RedisConfig,
    first: &ConnectionInfo,
) -> deadpool_redis::sentinel::SentinelNodeConnectionInfo {
    let url = first.redis_settings();
    let tls_mode = match first.addr() {
        redis::ConnectionAddr::TcpTls { insecure: true, .. } => {
            Some(deadpool_redis::sentinel::TlsMode::Insecure)
        }
        redis::ConnectionAddr::TcpTls { .. } => Some(deadpool_redis::sentinel::TlsMode::Secure),
        _ => None,
    };
    deadpool_redis::sentinel::SentinelNodeConnectionInfo {
        tls_mode,
        redis_connection_info: Some(deadpool_redis::RedisConnectionInfo {
            db: url.db(),
            username: cfg
                .username
                .clone()
                .or_else(|| url.username().map(str::to_string)),
            password: cfg
                .password
                .as_ref()
                .map(|p| p.expose().to_string())
                .or_else(|| url.password().map(str::to_string)),
            protocol: deadpool_redis::ProtocolVersion::RESP2,
        }),
    }
}

/// One URL of `redis.url`, parsed; the error names it without its password.
fn parse_url(cfg: &RedisConfig, url: &str) -> Result<ConnectionInfo, Error> {
    url.into_connection_info().map_err(|e| {
        Error::Config(if cfg.mode == RedisMode::Standalone {
            format!("redis.url {}: {e}", redact_url(url))
        } else {
            format!("redis.url entry {}: {e}", redact_url(url))
        })
    })
}

/// One data node's connection info: the URL with `redis.username` /
/// `redis.password` replacing its credentials when set.
fn node_info(cfg: &RedisConfig, url: &str) -> Result<ConnectionInfo, Error> {
    let info = parse_url(cfg, url)?;
    let mut settings = info.redis_settings().clone();
    if let Some(user) = &cfg.username {
        settings = settings.set_username(user);
    }
    if let Some(password) = &cfg.password {
        settings = settings.set_password(password.expose());
    }
    Ok(info.set_redis_settings(settings))
}

/// Where and how to connect: `redis.url`, with `redis.username` /
/// `redis.password` replacing the URL's credentials when set, and for a
/// `rediss://` URL the configured CA and client certificate. Errors name
/// the setting, never the password.
pub fn connection_info(cfg: &RedisConfig) -> Result<ConnectionInfo, Error> {
    let shown = || redact_url(&cfg.url);
    let info = node_info(cfg, cfg.url.trim())?;
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
    let certs = TlsCertificates {
        client_tls,
        root_cert,
    };
    // Parsed here once, so unreadable PEM is reported as the TLS files'
    // fault in every mode (the cluster and sentinel builders would blame
    // redis.url).
    redis::Client::build_with_tls("rediss://127.0.0.1:1", certs.clone())
        .map_err(|e| Error::Config(format!("redis TLS files: {e}")))?;
    Ok(Some(certs))
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

/// One `PING` on a pooled connection (on a cluster it reaches one node).
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

    /// The error of connecting (two quick tries) in `mode` to `url`, whose
    /// password is `secret`, checked to name it without the password.
    async fn unreachable(mode: RedisMode, url: String) -> String {
        let cfg = RedisConfig {
            mode,
            url,
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
        e
    }

    #[tokio::test]
    async fn unreachable_names_the_url() {
        let url = format!("redis://:secret@127.0.0.1:{}", unused_port());
        unreachable(RedisMode::Standalone, url).await;
    }

    #[test]
    fn cluster_and_sentinel_entries_are_checked_one_by_one() {
        let cfg = RedisConfig {
            mode: RedisMode::Cluster,
            url: "redis://:secret@127.0.0.1:7000, nope://:secret@h:1".into(),
            ..RedisConfig::default()
        };
        let e = build_pool(&cfg).unwrap_err().to_string();
        assert!(e.contains("redis.url entry nope://:***@h:1"), "{e}");
        assert!(!e.contains("secret"), "{e}");
        let cfg = RedisConfig {
            mode: RedisMode::Cluster,
            url: "redis://127.0.0.1:7000,redis://127.0.0.1:7001".into(),
            ..RedisConfig::default()
        };
        assert!(build_pool(&cfg).unwrap().is_cluster());
    }

    #[test]
    fn sentinel_data_nodes_take_the_configured_credentials_else_the_urls() {
        let mut cfg = RedisConfig {
            mode: RedisMode::Sentinel,
            url: "rediss://surl:spw@127.0.0.1:26379/3".into(),
            sentinel_master: Some("m".into()),
            ..RedisConfig::default()
        };
        let first = parse_url(&cfg, &cfg.url).unwrap();
        let node = |cfg: &RedisConfig| {
            let i = sentinel_node_info(cfg, &first);
            let r = i.redis_connection_info.unwrap();
            (i.tls_mode.is_some(), r.username, r.password, r.db)
        };
        assert_eq!(
            node(&cfg),
            (true, Some("surl".into()), Some("spw".into()), 3)
        );
        cfg.username = Some("worker".into());
        cfg.password = Some("s3cret".into());
        assert_eq!(
            node(&cfg),
            (true, Some("worker".into()), Some("s3cret".into()), 3)
        );
    }

    #[test]
    fn unreadable_tls_files_are_blamed_in_every_mode() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        std::fs::write(
            &ca,
            "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        for (mode, master) in [
            (RedisMode::Standalone, None),
            (RedisMode::Cluster, None),
            (RedisMode::Sentinel, Some("m")),
        ] {
            let cfg = RedisConfig {
                mode,
                url: "rediss://:secret@127.0.0.1:7000".into(),
                sentinel_master: master.map(str::to_string),
                tls_ca_file: Some(ca.clone()),
                ..RedisConfig::default()
            };
            let e = build_pool(&cfg).unwrap_err().to_string();
            assert!(e.contains("redis TLS files"), "{mode}: {e}");
            assert!(!e.contains("secret"), "{mode}: {e}");
        }
    }

    #[test]
    fn cluster_and_sentinel_modes_read_the_tls_files() {
        // No server: the pools open connections on first use.
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("gone.pem");
        for (mode, master) in [(RedisMode::Cluster, None), (RedisMode::Sentinel, Some("m"))] {
            let cfg = RedisConfig {
                mode,
                url: "rediss://127.0.0.1:7000,rediss://127.0.0.1:7001".into(),
                sentinel_master: master.map(str::to_string),
                tls_ca_file: Some(missing.clone()),
                ..RedisConfig::default()
            };
            let e = build_pool(&cfg).unwrap_err().to_string();
            assert!(
                e.contains(&format!("redis.tls_ca_file {}", missing.display())),
                "{mode}: {e}"
            );
        }
    }

    #[tokio::test]
    async fn an_unreachable_cluster_names_every_seed_without_passwords() {
        let url = format!(
            "redis://:secret@127.0.0.1:{},redis://:secret@127.0.0.1:{}",
            unused_port(),
            unused_port()
        );
        let e = unreachable(RedisMode::Cluster, url).await;
        assert_eq!(e.matches(":***@").count(), 2, "{e}");
    }

    fn unused_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }
}
