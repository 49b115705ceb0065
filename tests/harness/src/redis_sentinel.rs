//! Redis with Sentinel on loopback: a master, one replica, and three
//! sentinels (`redis-server <conf> --sentinel`, quorum 2) with a short
//! `down-after-milliseconds`, so a killed master is replaced within seconds.
//! [`RedisSentinel::start_tls`] runs it with TLS for clients (certificates
//! required), replication and the sentinels' own links.

use std::cell::Cell;
use std::path::{Path, PathBuf};
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
    /// With TLS, the TLS port of each data node and each sentinel (in the
    /// order of `data` and `sentinels`): the ports clients, replication
    /// and the sentinels use.
    tls_ports: Option<(Vec<u16>, Vec<u16>)>,
    dir: tempfile::TempDir,
}

/// The PEM files of a TLS group.
struct Tls {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl Tls {
    /// `redis-server`'s TLS settings on `tls_port`, as `(name, value)`:
    /// clients must present a certificate signed by the CA; replication
    /// and the sentinels' links use TLS, every server showing the same
    /// certificate to its peers.
    fn settings(&self, tls_port: u16) -> Vec<(&'static str, String)> {
        vec![
            ("tls-port", tls_port.to_string()),
            ("tls-cert-file", self.cert.display().to_string()),
            ("tls-key-file", self.key.display().to_string()),
            ("tls-ca-cert-file", self.ca.display().to_string()),
            ("tls-auth-clients", "yes".into()),
            ("tls-replication", "yes".into()),
        ]
    }

    /// [`Tls::settings`] as command-line options.
    fn args(&self, tls_port: u16) -> Vec<String> {
        self.settings(tls_port)
            .into_iter()
            .flat_map(|(k, v)| [format!("--{k}"), v])
            .collect()
    }
}

impl RedisSentinel {
    /// Starts the master, the replica (waits until it is in sync) and the
    /// sentinels (waits until each sees the replica and the other two).
    pub fn start() -> RedisSentinel {
        RedisSentinel::start_with(None)
    }

    /// [`RedisSentinel::start`] with TLS: every server also listens on a
    /// TLS port whose clients must present a certificate signed by the CA
    /// in `ca` (PEM); replication and the sentinels' links to the servers
    /// and to each other run over TLS, so the sentinels name the master's
    /// TLS port. `cert` / `key` (PEM) are every server's certificate, shown
    /// both as a server and to its peers as a client (serverAuth and
    /// clientAuth usages). [`RedisSentinel::url`] lists the sentinels' TLS
    /// ports (`rediss://`); the plain ports stay open on loopback for this
    /// harness's own probes only.
    pub fn start_tls(ca: &Path, cert: &Path, key: &Path) -> RedisSentinel {
        RedisSentinel::start_with(Some(Tls {
            ca: ca.to_path_buf(),
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
        }))
    }

    fn start_with(tls: Option<Tls>) -> RedisSentinel {
        let dir = tempfile::Builder::new()
            .prefix("caucus-redis-sentinel-")
            .tempdir()
            .expect("tempdir");
        let tls = tls.as_ref();
        // Each server's TLS port, picked afresh with each attempt to start
        // it (as its plain port).
        let data_tls: Vec<Cell<u16>> = (0..2).map(|_| Cell::new(0)).collect();
        let sentinel_tls: Vec<Cell<u16>> = (0..SENTINELS).map(|_| Cell::new(0)).collect();
        let tls_port = |cell: &Cell<u16>| {
            cell.set(free_port());
            cell.get()
        };
        let data_args = |i: usize, extra: &[String]| {
            let mut args: Vec<String> = ["--save", "", "--appendonly", "no"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            if let Some(tls) = tls {
                args.extend(tls.args(tls_port(&data_tls[i])));
            }
            args.extend_from_slice(extra);
            args
        };
        let master = start_node(&dir.path().join("data-0"), |_| data_args(0, &[]));
        // Replicas and sentinels reach the master on its TLS port with TLS.
        let master_port = match tls {
            Some(_) => data_tls[0].get(),
            None => master.port(),
        };
        let replica = start_node(&dir.path().join("data-1"), |_| {
            data_args(
                1,
                &[
                    "--replicaof".into(),
                    "127.0.0.1".into(),
                    master_port.to_string(),
                ],
            )
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
                    let mut text = sentinel_conf(port, master_port);
                    if let Some(tls) = tls {
                        for (k, v) in tls.settings(tls_port(&sentinel_tls[i])) {
                            text.push_str(&format!("{k} {v}\n"));
                        }
                    }
                    std::fs::write(&conf, text)
                        .unwrap_or_else(|e| panic!("write {}: {e}", conf.display()));
                    vec![conf.display().to_string(), "--sentinel".into()]
                })
            })
            .collect();
        let s = RedisSentinel {
            data: vec![master, replica],
            sentinels,
            tls_ports: tls.map(|_| {
                let ports =
                    |cells: Vec<Cell<u16>>| cells.into_iter().map(Cell::into_inner).collect();
                (ports(data_tls), ports(sentinel_tls))
            }),
            dir,
        };
        s.wait_watching();
        s
    }

    /// The sentinels for `redis.url`, comma-separated (`rediss://` and
    /// the TLS ports for [`RedisSentinel::start_tls`]).
    pub fn url(&self) -> String {
        match &self.tls_ports {
            Some((_, sentinels)) => sentinels
                .iter()
                .map(|p| format!("rediss://127.0.0.1:{p}"))
                .collect::<Vec<_>>()
                .join(","),
            None => self
                .sentinels
                .iter()
                .map(|n| format!("redis://127.0.0.1:{}", n.port()))
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    /// The port data node `i` is known by to clients and sentinels (its
    /// TLS port with TLS).
    fn client_port(&self, i: usize) -> u16 {
        match &self.tls_ports {
            Some((data, _)) => data[i],
            None => self.data[i].port(),
        }
    }

    /// For `redis.sentinel_master`.
    pub fn master_name(&self) -> &'static str {
        MASTER_NAME
    }

    /// The port of the master every sentinel names now (its TLS port with
    /// TLS); `None` while they disagree or do not answer.
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
        let gone = (0..self.data.len())
            .find(|&i| self.client_port(i) == old)
            .expect("the master is one of ours");
        let kept = (0..self.data.len())
            .find(|&i| i != gone)
            .expect("a replica");
        self.data[gone].kill();
        let new = self.client_port(kept);
        wait_until(
            &format!(
                "the sentinels fail over from port {old} to {new} (logs in {})",
                self.dir.path().display()
            ),
            SETTLE_TIMEOUT,
            || (self.master_port() == Some(new)).then_some(()),
        );
        let promoted = &self.data[kept];
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
