//! Redis with Sentinel on loopback: a master, one replica, and three
//! sentinels (`redis-server <conf> --sentinel`, quorum 2) with a short
//! `down-after-milliseconds`, so a killed master is replaced within seconds.

use std::time::Duration;

use crate::redis_node::{field, words, Node};
use crate::{free_port, wait_until};

/// The name the sentinels know the master by.
pub const MASTER_NAME: &str = "caucus-master";
/// Sentinels watching the master.
const SENTINELS: usize = 3;
/// Sentinels that must agree the master is down.
const QUORUM: usize = 2;
/// How long the master may be silent before it is considered down.
const DOWN_AFTER_MS: u64 = 1000;
/// `failover-timeout` (short: a stuck failover is retried soon).
const FAILOVER_TIMEOUT_MS: u64 = 5000;
/// Free ports tried per server before giving up.
const PORT_ATTEMPTS: u32 = 5;
/// How long the group may take to form, or to fail over.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(40);

/// A master, its replica and three sentinels; all killed on Drop.
pub struct RedisSentinel {
    /// `[0]` starts as the master, `[1]` as its replica.
    data: Vec<Node>,
    sentinels: Vec<Node>,
    dir: tempfile::TempDir,
}

impl RedisSentinel {
    /// Starts the master, the replica (waits until it is in sync) and the
    /// sentinels (waits until each sees the replica and the other two).
    pub fn start() -> RedisSentinel {
        let dir = tempfile::Builder::new()
            .prefix("caucus-redis-sentinel-")
            .tempdir()
            .expect("tempdir");
        let plain = |extra: &[String]| {
            let mut args: Vec<String> = ["--save", "", "--appendonly", "no"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            args.extend_from_slice(extra);
            args
        };
        let master = start_node(&dir.path().join("data-0"), |_| plain(&[]));
        let master_port = master.port();
        let replica = start_node(&dir.path().join("data-1"), |_| {
            plain(&[
                "--replicaof".into(),
                "127.0.0.1".into(),
                master_port.to_string(),
            ])
        });
        wait_until(
            "the replica in sync with the master",
            SETTLE_TIMEOUT,
            || {
                let info = replica.ask("INFO replication")?;
                info.contains("master_link_status:up").then_some(())
            },
        );
        let sentinels = (0..SENTINELS)
            .map(|i| {
                let d = dir.path().join(format!("sentinel-{i}"));
                start_node(&d, |port| {
                    let conf = d.join("sentinel.conf");
                    std::fs::create_dir_all(&d).expect("mkdir sentinel dir");
                    std::fs::write(&conf, sentinel_conf(port, master_port))
                        .unwrap_or_else(|e| panic!("write {}: {e}", conf.display()));
                    vec![conf.display().to_string(), "--sentinel".into()]
                })
            })
            .collect();
        let s = RedisSentinel {
            data: vec![master, replica],
            sentinels,
            dir,
        };
        s.wait_watching();
        s
    }

    /// The sentinels for `redis.url`, comma-separated.
    pub fn url(&self) -> String {
        self.sentinels
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port()))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// For `redis.sentinel_master`.
    pub fn master_name(&self) -> &'static str {
        MASTER_NAME
    }

    /// The port of the master every sentinel names now; `None` while they
    /// disagree or do not answer.
    pub fn master_port(&self) -> Option<u16> {
        let mut ports = self.sentinels.iter().filter(|s| s.running()).map(|s| {
            let reply = s.ask(&format!("SENTINEL get-master-addr-by-name {MASTER_NAME}"))?;
            words(&reply).get(1)?.parse::<u16>().ok()
        });
        let first = ports.next()??;
        ports.all(|p| p == Some(first)).then_some(first)
    }

    /// The directory holding every server's files and logs.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Leaves the directory in place when dropped (logs for a post-mortem).
    pub fn keep_files(&mut self) {
        self.dir.disable_cleanup(true);
    }

    /// SIGKILLs the current master and waits until every sentinel names
    /// the replica as the new master and it accepts writes. Returns the new
    /// master's port.
    pub fn kill_master(&mut self) -> u16 {
        let old = self.master_port().expect("the sentinels agree on a master");
        let (gone, promoted): (Vec<_>, Vec<_>) =
            self.data.iter_mut().partition(|n| n.port() == old);
        gone.into_iter().for_each(|n| n.kill());
        let new = promoted.first().expect("a replica").port();
        wait_until(
            &format!(
                "the sentinels fail over from port {old} to {new} (logs in {})",
                self.dir.path().display()
            ),
            SETTLE_TIMEOUT,
            || (self.master_port() == Some(new)).then_some(()),
        );
        let promoted = self
            .data
            .iter()
            .find(|n| n.port() == new)
            .expect("promoted");
        wait_until(
            "the promoted replica reports role master",
            SETTLE_TIMEOUT,
            || {
                let reply = promoted.ask("ROLE")?;
                (words(&reply).first() == Some(&"master")).then_some(())
            },
        );
        new
    }

    /// Every sentinel: names the master, sees the replica and the other
    /// sentinels (so a quorum can form and a failover has a target).
    fn wait_watching(&self) {
        let others = (SENTINELS - 1).to_string();
        wait_until(
            &format!(
                "every sentinel sees the replica and {others} other sentinels (logs in {})",
                self.dir.path().display()
            ),
            SETTLE_TIMEOUT,
            || {
                self.sentinels
                    .iter()
                    .all(|s| {
                        s.ask(&format!("SENTINEL master {MASTER_NAME}"))
                            .is_some_and(|r| {
                                field(&r, "num-slaves") == Some("1")
                                    && field(&r, "num-other-sentinels") == Some(others.as_str())
                            })
                    })
                    .then_some(())
            },
        );
    }
}

fn sentinel_conf(port: u16, master_port: u16) -> String {
    format!(
        "port {port}\n\
         sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} {QUORUM}\n\
         sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n\
         sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n\
         sentinel parallel-syncs {MASTER_NAME} 1\n"
    )
}

/// A server on a free port, its arguments made for that port by `args`.
fn start_node(dir: &std::path::Path, args: impl Fn(u16) -> Vec<String>) -> Node {
    for _ in 0..PORT_ATTEMPTS {
        let port = free_port();
        if let Some(node) = Node::start(dir, port, &args(port)) {
            return node;
        }
    }
    panic!(
        "redis-server did not start on any of {PORT_ATTEMPTS} free ports (logs in {})",
        dir.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fails_over_to_the_replica() {
        let mut s = RedisSentinel::start();
        let before = s.master_port().expect("a master");
        assert_eq!(s.url().split(',').count(), 3);
        let after = s.kill_master();
        assert_ne!(before, after);
        assert_eq!(s.master_port(), Some(after));
    }
}
