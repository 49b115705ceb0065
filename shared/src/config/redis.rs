//! `[redis]`: how to reach Redis.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::secret::{redact_urls, Secret};
use super::InvalidSetting;

/// How the servers in `redis.url` are spoken to.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum RedisMode {
    /// One server (`redis.url` is one URL).
    #[default]
    Standalone,
    /// Redis Cluster: `redis.url` lists seed nodes, comma-separated; the
    /// client discovers the rest and follows slot moves and failovers.
    Cluster,
    /// Redis Sentinel: `redis.url` lists the sentinels, comma-separated;
    /// they name the current master of `redis.sentinel_master`.
    Sentinel,
}

impl fmt::Display for RedisMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RedisMode::Standalone => "standalone",
            RedisMode::Cluster => "cluster",
            RedisMode::Sentinel => "sentinel",
        })
    }
}

/// Redis connection settings.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct RedisConfig {
    /// `standalone`, `cluster` or `sentinel` (`CAUCUS_REDIS_MODE`).
    pub mode: RedisMode,
    /// `redis://[user:pass@]host:port[/db]` or `rediss://` for TLS
    /// (`CAUCUS_REDIS_URL`); in cluster mode the seed nodes and in sentinel
    /// mode the sentinels, comma-separated.
    pub url: String,
    /// The master's name the sentinels watch (`CAUCUS_REDIS_SENTINEL_MASTER`);
    /// required in sentinel mode, refused otherwise.
    pub sentinel_master: Option<String>,
    /// ACL user (`CAUCUS_REDIS_USERNAME`); overrides a user in `url`.
    pub username: Option<String>,
    /// Password (`CAUCUS_REDIS_PASSWORD`); overrides a password in `url`.
    /// Never printed: `--dump-config` and `Debug` show `***`.
    pub password: Option<Secret>,
    /// PEM CA bundle that verifies a `rediss://` server instead of the
    /// system's roots (a private CA).
    pub tls_ca_file: Option<PathBuf>,
    /// PEM client certificate for mutual TLS (with `tls_key_file`).
    pub tls_cert_file: Option<PathBuf>,
    /// PEM client key for mutual TLS (with `tls_cert_file`).
    pub tls_key_file: Option<PathBuf>,
    /// Connections in the pool.
    pub pool_size: usize,
    /// Attempts before giving up at start-up.
    pub connect_attempts: u32,
    /// Timeout of one connection attempt.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Largest pause between attempts.
    #[serde(with = "humantime_serde")]
    pub connect_backoff_max: Duration,
}

impl Default for RedisConfig {
    fn default() -> Self {
        RedisConfig {
            mode: RedisMode::Standalone,
            url: "redis://127.0.0.1:6379".into(),
            sentinel_master: None,
            username: None,
            password: None,
            tls_ca_file: None,
            tls_cert_file: None,
            tls_key_file: None,
            pool_size: 16,
            connect_attempts: 10,
            connect_timeout: Duration::from_secs(2),
            connect_backoff_max: Duration::from_secs(2),
        }
    }
}

// By hand so the URL's password is not shown (the password field is a
// `Secret`, which redacts itself).
impl fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisConfig")
            .field("mode", &self.mode)
            .field("url", &redact_urls(&self.url))
            .field("sentinel_master", &self.sentinel_master)
            .field("username", &self.username)
            .field("password", &self.password)
            .field("tls_ca_file", &self.tls_ca_file)
            .field("tls_cert_file", &self.tls_cert_file)
            .field("tls_key_file", &self.tls_key_file)
            .field("pool_size", &self.pool_size)
            .field("connect_attempts", &self.connect_attempts)
            .field("connect_timeout", &self.connect_timeout)
            .field("connect_backoff_max", &self.connect_backoff_max)
            .finish()
    }
}

impl RedisConfig {
    /// The URLs of `redis.url`: one in standalone mode, the seed nodes or
    /// the sentinels otherwise (blank entries skipped).
    pub fn urls(&self) -> Vec<&str> {
        self.url
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .collect()
    }

    /// The sentinel master's name, if one is set (an empty value, e.g. from
    /// an unset Helm value, counts as none).
    pub fn sentinel_master(&self) -> Option<&str> {
        self.sentinel_master
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty())
    }

    /// Checks the rules between the settings; messages name the setting
    /// and show URLs without their password.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        let urls = self.urls();
        if urls.is_empty() {
            return Err(InvalidSetting::new("redis.url", "must name a server"));
        }
        match self.mode {
            RedisMode::Standalone if urls.len() > 1 => {
                return Err(InvalidSetting::new(
                    "redis.url",
                    format!(
                        "{} lists {} servers but redis.mode is standalone (set redis.mode = cluster or sentinel)",
                        redact_urls(&self.url),
                        urls.len()
                    ),
                ))
            }
            RedisMode::Sentinel if self.sentinel_master().is_none() => {
                return Err(InvalidSetting::new(
                    "redis.sentinel_master",
                    "must name the master the sentinels watch when redis.mode is sentinel",
                ))
            }
            RedisMode::Standalone | RedisMode::Cluster if self.sentinel_master().is_some() => {
                return Err(InvalidSetting::new(
                    "redis.sentinel_master",
                    format!("is set but redis.mode is {} (it needs redis.mode = sentinel)", self.mode),
                ))
            }
            _ => {}
        }
        // The files are used only on TLS connections; with a plain URL they
        // would be silently ignored.
        let files = [
            ("redis.tls_ca_file", &self.tls_ca_file),
            ("redis.tls_cert_file", &self.tls_cert_file),
            ("redis.tls_key_file", &self.tls_key_file),
        ];
        if let Some((key, _)) = files.iter().find(|(_, f)| f.is_some()) {
            if let Some(plain) = urls.iter().find(|u| !is_tls_url(u)) {
                return Err(InvalidSetting::new(
                    "redis.url",
                    format!(
                        "{} is not rediss:// but {key} is set (the TLS files need TLS URLs{})",
                        redact_urls(plain),
                        if urls.len() > 1 {
                            ", every one of the list"
                        } else {
                            ""
                        }
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Whether `url` asks for TLS (`rediss://`, or `valkeys://` which the
/// client takes too).
fn is_tls_url(url: &str) -> bool {
    url.split_once("://").is_some_and(|(scheme, _)| {
        scheme.eq_ignore_ascii_case("rediss") || scheme.eq_ignore_ascii_case("valkeys")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(mode: RedisMode, url: &str, master: Option<&str>) -> RedisConfig {
        RedisConfig {
            mode,
            url: url.into(),
            sentinel_master: master.map(str::to_string),
            ..RedisConfig::default()
        }
    }

    #[test]
    fn the_default_is_one_standalone_server() {
        let d = RedisConfig::default();
        assert_eq!(d.mode, RedisMode::Standalone);
        assert_eq!(d.urls(), ["redis://127.0.0.1:6379"]);
        assert_eq!(d.validate(), Ok(()));
    }

    #[test]
    fn cluster_and_sentinel_take_url_lists() {
        let c = cfg(
            RedisMode::Cluster,
            "redis://a:1, redis://b:2,,redis://c:3",
            None,
        );
        assert_eq!(c.urls(), ["redis://a:1", "redis://b:2", "redis://c:3"]);
        assert_eq!(c.validate(), Ok(()));
        let s = cfg(RedisMode::Sentinel, "redis://s1:1,redis://s2:2", Some("m1"));
        assert_eq!(s.validate(), Ok(()));
        assert_eq!(s.sentinel_master(), Some("m1"));
    }

    #[test]
    fn errors_name_the_setting_and_hide_the_password() {
        let e = cfg(
            RedisMode::Standalone,
            "redis://:hunter2@a:1,redis://:hunter2@b:2",
            None,
        )
        .validate()
        .unwrap_err();
        assert_eq!(e.key, "redis.url");
        assert!(e.to_string().contains("lists 2 servers"), "{e}");
        assert!(e.to_string().contains("redis://:***@a:1"), "{e}");
        assert!(!e.to_string().contains("hunter2"), "{e}");

        for master in [None, Some(""), Some("  ")] {
            let e = cfg(RedisMode::Sentinel, "redis://s:1", master)
                .validate()
                .unwrap_err();
            assert_eq!(e.key, "redis.sentinel_master", "{master:?}");
        }
        let e = cfg(RedisMode::Cluster, "redis://a:1", Some("m"))
            .validate()
            .unwrap_err();
        assert_eq!(e.key, "redis.sentinel_master");
        assert!(e.to_string().contains("redis.mode is cluster"), "{e}");

        let e = cfg(RedisMode::Cluster, " , ", None).validate().unwrap_err();
        assert_eq!(e.key, "redis.url");

        for mode in [
            RedisMode::Standalone,
            RedisMode::Cluster,
            RedisMode::Sentinel,
        ] {
            let master = (mode == RedisMode::Sentinel).then_some("m");
            let mut c = cfg(mode, "rediss://:hunter2@a:1", master);
            c.tls_ca_file = Some("/ca.pem".into());
            assert_eq!(c.validate(), Ok(()), "{mode}");
            if mode != RedisMode::Standalone {
                c.url = "rediss://:hunter2@a:1,redis://:hunter2@b:2".into();
            } else {
                c.url = "redis://:hunter2@b:2".into();
            }
            let e = c.validate().unwrap_err();
            assert_eq!(e.key, "redis.url", "{mode}");
            let e = e.to_string();
            assert!(e.contains("redis://:***@b:2 is not rediss://"), "{e}");
            assert!(e.contains("redis.tls_ca_file is set"), "{e}");
            assert!(!e.contains("hunter2"), "{e}");
        }
    }

    #[test]
    fn debug_hides_every_password_of_a_list() {
        let c = cfg(
            RedisMode::Cluster,
            "redis://:pw1@a:1,redis://:pw2@b:2",
            None,
        );
        let d = format!("{c:?}");
        assert!(!d.contains("pw1") && !d.contains("pw2"), "{d}");
        assert!(d.contains("Cluster"), "{d}");
    }

    fn load(env: &[(&str, &str)]) -> Result<crate::config::Config, crate::Error> {
        crate::config::ConfigLoader::new()
            .env(env.iter().map(|(k, v)| (k.to_string(), v.to_string())))
            .load()
    }

    #[test]
    fn env_sets_the_mode_and_master_and_dump_config_shows_them() {
        let c = load(&[
            ("CAUCUS_REDIS_MODE", "sentinel"),
            ("CAUCUS_REDIS_SENTINEL_MASTER", "mymaster"),
            ("CAUCUS_REDIS_URL", "redis://:pw1@s1:1,redis://:pw2@s2:2"),
        ])
        .unwrap();
        assert_eq!(c.redis.mode, RedisMode::Sentinel);
        assert_eq!(c.redis.sentinel_master(), Some("mymaster"));
        let dump = c.to_toml();
        assert!(dump.contains("mode = \"sentinel\""), "{dump}");
        assert!(dump.contains("sentinel_master = \"mymaster\""), "{dump}");
        assert!(
            dump.contains("redis://:***@s1:1,redis://:***@s2:2"),
            "{dump}"
        );
        assert!(!dump.contains("pw1") && !dump.contains("pw2"), "{dump}");
    }

    #[test]
    fn loading_checks_the_rules() {
        let e = load(&[("CAUCUS_REDIS_MODE", "sentinel")]).unwrap_err();
        assert!(e.to_string().contains("redis.sentinel_master"), "{e}");
        let e = load(&[("CAUCUS_REDIS_MODE", "clustered")]).unwrap_err();
        assert!(e.to_string().contains("clustered"), "{e}");
        let c = load(&[("CAUCUS_REDIS_MODE", "cluster")]).unwrap();
        assert_eq!(c.redis.mode, RedisMode::Cluster);
    }
}
