//! Test support for caucus: real `nats-server -js` and `redis-server` on free
//! loopback ports, each in its own temp dir, plus the project's binaries
//! spawned with config pointing at them. Everything is killed on Drop.
//!
//! No mock brokers: every test that needs NATS or Redis gets real servers, and
//! fault tests can [`Nats::kill`] / [`Nats::restart`] them (same port, same
//! data dir) or SIGKILL a [`Service`].

pub mod browser;
mod nats;
mod nats_cluster;
mod pki;
mod process;
mod redis;
mod redis_cluster;
mod redis_node;
mod redis_sentinel;
mod secured;
mod service;
mod wait;

pub use nats::Nats;
pub use nats_cluster::NatsCluster;
pub use pki::Pki;
pub use redis::Redis;
pub use redis_cluster::RedisCluster;
pub use redis_sentinel::RedisSentinel;
pub use secured::{read_env_file, AclRedis, SecuredStack};
pub use service::{bin_path, Service, ServiceBuilder, READY_MARKER};
pub use wait::wait_until;

use std::net::TcpListener;

/// A NATS and a Redis server for one test.
pub struct Stack {
    /// The JetStream-enabled NATS server.
    pub nats: Nats,
    /// The Redis server.
    pub redis: Redis,
}

impl Stack {
    /// Starts both servers and waits until each accepts connections.
    pub fn start() -> Stack {
        Stack {
            nats: Nats::start(),
            redis: Redis::start(),
        }
    }

    /// [`Stack::start`] with `extra` appended to the NATS server's config
    /// file ([`Nats::start_with_config`]).
    pub fn start_with_nats_config(extra: &str) -> Stack {
        Stack {
            nats: Nats::start_with_config(extra),
            redis: Redis::start(),
        }
    }

    /// Environment a caucus process needs to reach this stack.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("CAUCUS_NATS_URL".into(), self.nats.url()),
            ("CAUCUS_REDIS_URL".into(), self.redis.url()),
        ]
    }

    /// A builder for a caucus binary wired to this stack.
    pub fn service(&self, bin: &str) -> ServiceBuilder {
        let mut b = ServiceBuilder::new(bin);
        for (k, v) in self.env() {
            b = b.env(k, v);
        }
        b
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr").port()
}

/// Finds a server binary: the env override first, then `PATH`. Panics with
/// the exact install command when it is missing.
pub fn find_binary(env_var: &str, name: &str, install: &str) -> std::path::PathBuf {
    if let Ok(p) = std::env::var(env_var) {
        return p.into();
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!("`{name}` was not found on PATH (or in ${env_var}). Install it with: {install}");
}
