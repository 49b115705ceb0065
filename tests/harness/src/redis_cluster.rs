//! A real Redis Cluster on loopback: six `redis-server --cluster-enabled
//! yes` nodes joined by `redis-cli --cluster create --cluster-replicas 1`
//! (three masters, one replica each), with a short node timeout so a
//! killed master's replica takes over within seconds. [`RedisCluster::start_tls`]
//! runs it with TLS for clients (certificates required), the cluster bus
//! and replication.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::redis_node::{redis_cli, words, Node};
use crate::{free_port, wait_until};

/// Nodes: three masters and their replicas.
const NODES: usize = 6;
/// Free ports tried per node before giving up.
const PORT_ATTEMPTS: u32 = 5;
/// How long the cluster may take to form, or to settle after a failover.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
/// `cluster-node-timeout`: how long a silent master takes to be failed
/// over (short, so tests do not wait for the default 15 s).
pub const NODE_TIMEOUT_MS: u64 = 1000;

/// Six-node Redis Cluster; every node is killed on Drop.
pub struct RedisCluster {
    nodes: Vec<Node>,
    /// Each node's TLS port, in node order, when started with TLS.
    tls_ports: Vec<u16>,
    tls: Option<Tls>,
    dir: tempfile::TempDir,
}

/// The PEM files of a TLS cluster.
#[derive(Clone)]
struct Tls {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

impl Tls {
    /// `redis-cli`'s TLS options.
    fn cli_args(&self) -> Vec<String> {
        vec![
            "--tls".into(),
            "--cacert".into(),
            self.ca.display().to_string(),
            "--cert".into(),
            self.cert.display().to_string(),
            "--key".into(),
            self.key.display().to_string(),
        ]
    }

    /// `redis-server`'s TLS options on `tls_port`: clients must present a
    /// certificate signed by the CA; the bus and replication use TLS, and
    /// every node shows itself to peers with the same certificate.
    fn server_args(&self, tls_port: u16) -> Vec<String> {
        let (ca, cert, key) = (
            self.ca.display().to_string(),
            self.cert.display().to_string(),
            self.key.display().to_string(),
        );
        [
            "--tls-port",
            &tls_port.to_string(),
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
            "--tls-auth-clients",
            "yes",
            "--tls-cluster",
            "yes",
            "--tls-replication",
            "yes",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }
}

impl RedisCluster {
    /// Starts six nodes, creates the cluster, and waits until every node
    /// reports `cluster_state:ok` and knows all six.
    pub fn start() -> RedisCluster {
        RedisCluster::start_with(None)
    }

    /// [`RedisCluster::start`] with TLS: each node also listens on a TLS
    /// port whose clients must present a certificate signed by the CA in
    /// `ca` (PEM); the cluster bus and replication run over TLS. `cert` /
    /// `key` (PEM) are every node's certificate, shown both as a server and
    /// to its peers as a client, so it needs the serverAuth and clientAuth
    /// usages. [`RedisCluster::url`] lists the TLS ports (`rediss://`), and
    /// the cluster names TLS ports to TLS clients; the plain ports stay
    /// open on loopback for this harness's own probes only.
    pub fn start_tls(ca: &Path, cert: &Path, key: &Path) -> RedisCluster {
        RedisCluster::start_with(Some(Tls {
            ca: ca.to_path_buf(),
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
        }))
    }

    fn start_with(tls: Option<Tls>) -> RedisCluster {
        let dir = tempfile::Builder::new()
            .prefix("caucus-redis-cluster-")
            .tempdir()
            .expect("tempdir");
        let (nodes, tls_ports) = (0..NODES)
            .map(|i| start_node(&dir.path().join(format!("node-{i}")), tls.as_ref()))
            .unzip::<_, _, Vec<_>, Vec<_>>();
        let cluster = RedisCluster {
            nodes,
            tls_ports: tls_ports.into_iter().flatten().collect(),
            tls,
            dir,
        };
        cluster.create();
        cluster.wait_settled();
        cluster
    }

    /// The seed list for `redis.url`: every node, comma-separated
    /// (`rediss://` and the TLS ports for [`RedisCluster::start_tls`]).
    pub fn url(&self) -> String {
        if self.tls.is_some() {
            return self
                .tls_ports
                .iter()
                .map(|p| format!("rediss://127.0.0.1:{p}"))
                .collect::<Vec<_>>()
                .join(",");
        }
        self.nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port()))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Node `i`'s port.
    pub fn port(&self, i: usize) -> u16 {
        self.nodes[i].port()
    }

    /// The directory holding every node's files and logs.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// Leaves the directory in place when dropped (logs for a post-mortem).
    pub fn keep_files(&mut self) {
        self.dir.disable_cleanup(true);
    }

    /// Indexes of the running nodes that are masters now.
    pub fn masters(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&i| self.nodes[i].running() && self.role(i).as_deref() == Some("master"))
            .collect()
    }

    /// SIGKILLs the `k`-th running master (in node order) and returns its
    /// node index (for [`RedisCluster::restart`]).
    pub fn kill_master(&mut self, k: usize) -> usize {
        let masters = self.masters();
        let i = *masters
            .get(k)
            .unwrap_or_else(|| panic!("no master #{k}: masters are nodes {masters:?}"));
        self.nodes[i].kill();
        i
    }

    /// Keys `<prefix><n>` whose slots are served by every master, one per
    /// master (so a command on each reaches every node).
    pub fn keys_on_every_master(&self, prefix: &str) -> Vec<String> {
        let mut keys = Vec::new();
        let mut masters = std::collections::BTreeSet::new();
        for i in 0.. {
            let key = format!("{prefix}{i}");
            if masters.insert(self.master_for(&key)) {
                keys.push(key);
            }
            if masters.len() == self.masters().len() {
                return keys;
            }
            assert!(i < 10_000, "no key found for every master");
        }
        unreachable!()
    }

    /// The node index of the running master that serves `key`'s slot.
    pub fn master_for(&self, key: &str) -> usize {
        let any = self
            .nodes
            .iter()
            .find(|n| n.running())
            .expect("a running node");
        let reply = any
            .ask(&format!("CLUSTER KEYSLOT {key}"))
            .unwrap_or_else(|| panic!("CLUSTER KEYSLOT {key}: no answer"));
        let slot: u16 = words(&reply)
            .first()
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("CLUSTER KEYSLOT {key}: {reply}"));
        self.masters()
            .into_iter()
            .find(|&i| self.serves(i, slot))
            .unwrap_or_else(|| panic!("no running master serves slot {slot} of {key}"))
    }

    /// SIGKILLs node `i` (see [`RedisCluster::master_for`]).
    pub fn kill(&mut self, i: usize) {
        self.nodes[i].kill();
    }

    /// Whether node `i` says it serves `slot` (the slot ranges at the end
    /// of its own `CLUSTER NODES` line).
    fn serves(&self, i: usize, slot: u16) -> bool {
        let Some(reply) = self.nodes[i].ask("CLUSTER NODES") else {
            return false;
        };
        let Some(own) = reply.lines().find(|l| l.contains("myself")) else {
            return false;
        };
        own.split_whitespace().skip(8).any(|range| {
            let (lo, hi) = range.split_once('-').unwrap_or((range, range));
            matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if (lo..=hi).contains(&slot))
        })
    }

    /// Waits until the killed master's replica was promoted (three running
    /// masters again) and every running node reports `cluster_state:ok`.
    pub fn wait_failover(&self) {
        wait_until(
            "a replica promoted: three running masters",
            SETTLE_TIMEOUT,
            || (self.masters().len() == NODES / 2).then_some(()),
        );
        self.wait_settled();
    }

    /// Starts node `i` again (same port and directory) and waits until it
    /// rejoined as a replica (its slots moved to the promoted one) and the
    /// cluster settled. Only for a node whose master role was taken over.
    pub fn restart(&mut self, i: usize) {
        self.nodes[i].restart();
        wait_until(
            &format!("node {i} rejoins as a replica"),
            SETTLE_TIMEOUT,
            || {
                (self.role(i).as_deref() == Some("slave") && self.masters().len() == NODES / 2)
                    .then_some(())
            },
        );
        self.wait_settled();
    }

    /// `master` or `slave` as node `i` reports its role.
    fn role(&self, i: usize) -> Option<String> {
        let reply = self.nodes[i].ask("ROLE")?;
        words(&reply).first().map(|w| w.to_string())
    }

    fn create(&self) {
        let mut cmd = Command::new(redis_cli());
        // A TLS cluster is created over TLS, so the nodes meet on their
        // TLS addresses.
        let ports: Vec<u16> = match &self.tls {
            Some(tls) => {
                cmd.args(tls.cli_args());
                self.tls_ports.clone()
            }
            None => self.nodes.iter().map(Node::port).collect(),
        };
        cmd.arg("--cluster").arg("create");
        for p in ports {
            cmd.arg(format!("127.0.0.1:{p}"));
        }
        cmd.args(["--cluster-replicas", "1", "--cluster-yes"]);
        let out = cmd
            .output()
            .unwrap_or_else(|e| panic!("run {:?}: {e}", cmd.get_program()));
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Every running node: `cluster_state:ok`, all slots assigned, and it
    /// knows every node.
    fn wait_settled(&self) {
        wait_until(
            &format!(
                "cluster_state:ok on every node (logs in {})",
                self.dir.path().display()
            ),
            SETTLE_TIMEOUT,
            || {
                self.nodes
                    .iter()
                    .filter(|n| n.running())
                    .all(|n| {
                        n.ask("CLUSTER INFO").is_some_and(|info| {
                            info.contains("cluster_state:ok")
                                && info.contains("cluster_slots_assigned:16384")
                                && info.contains(&format!("cluster_known_nodes:{NODES}"))
                        })
                    })
                    .then_some(())
            },
        );
    }
}

/// One cluster node on a free port (and a free bus port: the default
/// port + 10000 can pass 65535 for ports from the ephemeral range), and
/// its TLS port with `tls`.
fn start_node(dir: &Path, tls: Option<&Tls>) -> (Node, Option<u16>) {
    for _ in 0..PORT_ATTEMPTS {
        let mut args: Vec<String> = [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-port",
            &free_port().to_string(),
            "--cluster-node-timeout",
            &NODE_TIMEOUT_MS.to_string(),
            // Any replica may take over, however long it was cut off.
            "--cluster-replica-validity-factor",
            "0",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let tls_port = tls.map(|tls| {
            let port = free_port();
            args.extend(tls.server_args(port));
            port
        });
        if let Some(node) = Node::start(dir, free_port(), &args) {
            return (node, tls_port);
        }
    }
    panic!(
        "a cluster node did not start on any of {PORT_ATTEMPTS} free ports (logs in {})",
        dir.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_and_fails_over() {
        let mut c = RedisCluster::start();
        assert_eq!(c.masters().len(), 3);
        assert_eq!(c.url().split(',').count(), 6);
        let owner = c.master_for("caucus:{sem:alpha}:holders");
        assert_eq!(
            owner,
            c.master_for("caucus:{sem:alpha}:cap"),
            "one hash tag, one slot"
        );
        let killed = c.kill_master(0);
        c.wait_failover();
        assert_ne!(c.master_for("caucus:{sem:alpha}:holders"), killed);
        assert!(!c.masters().contains(&killed));
        c.restart(killed);
        assert_eq!(
            c.masters().len(),
            3,
            "the restarted node rejoins as a replica"
        );
        assert_eq!(c.role(killed).as_deref(), Some("slave"));
    }
}
