//! One `redis-server` of a group ([`crate::RedisCluster`],
//! [`crate::RedisSentinel`]): its own directory, a fixed port kept across
//! restarts, extra arguments, and plain-TCP commands to ask it questions.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::Proc;
use crate::{find_binary, wait_until};

const INSTALL: &str = "apt-get install -y redis-server (redis-tools for redis-cli)";

/// How long a server may take to answer after it was spawned.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// A server of a group; killed on Drop.
pub(crate) struct Node {
    proc: Proc,
    port: u16,
    dir: PathBuf,
    args: Vec<String>,
    starts: u32,
}

impl Node {
    /// Spawns `redis-server` on `port` in `dir` (created) with `args` after
    /// the common ones; `None` when it exited before answering (the port
    /// was taken meanwhile: pick another).
    pub(crate) fn start(dir: &Path, port: u16, args: &[String]) -> Option<Node> {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        let mut node = Node {
            proc: spawn(port, dir, args, 0),
            port,
            dir: dir.to_path_buf(),
            args: args.to_vec(),
            starts: 0,
        };
        node.wait_ready().then_some(node)
    }

    /// The TCP port.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Whether it runs (not killed).
    pub(crate) fn running(&self) -> bool {
        self.proc.running()
    }

    /// SIGKILL.
    pub(crate) fn kill(&mut self) {
        self.proc.kill();
    }

    /// Starts it again on the same port, in the same directory, with the
    /// same arguments; panics if it does not come up.
    pub(crate) fn restart(&mut self) {
        self.proc.kill();
        self.starts += 1;
        self.proc = spawn(self.port, &self.dir, &self.args, self.starts);
        if !self.wait_ready() {
            panic!(
                "redis-server exited on restart, port {} (log {})",
                self.port,
                self.log().display()
            );
        }
    }

    /// The reply to one inline command, `None` when the server does not
    /// answer.
    pub(crate) fn ask(&self, line: &str) -> Option<String> {
        raw(self.port, line).ok()
    }

    /// The current log file.
    pub(crate) fn log(&self) -> PathBuf {
        self.dir.join(format!("redis-{}.log", self.starts))
    }

    /// Waits until *our* server answers (its `process_id` is our child's);
    /// `false` when it exited first.
    fn wait_ready(&mut self) -> bool {
        let port = self.port;
        let what = format!("redis-server on port {port} (log {})", self.log().display());
        wait_own_server(&mut self.proc, &what, || raw(port, "INFO server").ok())
    }
}

/// Waits until the `redis-server` `proc` answers `INFO server` (as `info`
/// reads it) with its own `process_id`, so a reply from another test's
/// server on a reused port does not count; `false` when it exited first.
pub(crate) fn wait_own_server(
    proc: &mut Proc,
    what: &str,
    info: impl Fn() -> Option<String>,
) -> bool {
    let pid = proc.pid().map(|p| format!("process_id:{p}\r\n"));
    wait_until(what, READY_TIMEOUT, || {
        if proc.try_wait().is_some() {
            return Some(false);
        }
        let info = info()?;
        pid.as_ref()
            .filter(|p| info.contains(p.as_str()))
            .map(|_| true)
    })
}

/// The words of a RESP reply (bulk and simple strings, integers), in
/// order, without the protocol's framing lines.
pub(crate) fn words(reply: &str) -> Vec<&str> {
    reply
        .split("\r\n")
        .filter(|l| !l.is_empty() && !l.starts_with('*') && !l.starts_with('$'))
        .map(|l| l.trim_start_matches([':', '+']))
        .collect()
}

/// The value after `field` in a flat RESP field/value reply.
pub(crate) fn field<'a>(reply: &'a str, name: &str) -> Option<&'a str> {
    let w = words(reply);
    w.iter()
        .position(|x| *x == name)
        .and_then(|i| w.get(i + 1).copied())
}

/// `redis-server`: `CAUCUS_REDIS_SERVER`, else `PATH`.
pub(crate) fn redis_server() -> PathBuf {
    find_binary("CAUCUS_REDIS_SERVER", "redis-server", INSTALL)
}

/// `redis-cli`: next to the `redis-server` in use, else `PATH`.
pub(crate) fn redis_cli() -> PathBuf {
    if let Some(sibling) = redis_server().parent().map(|d| d.join("redis-cli")) {
        if sibling.is_file() {
            return sibling;
        }
    }
    find_binary("CAUCUS_REDIS_CLI", "redis-cli", INSTALL)
}

/// One command line sent raw to the server on `port`, and its reply.
pub(crate) fn raw(port: u16, line: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(format!("{line}\r\n").as_bytes())?;
    let mut buf = vec![0u8; 64 * 1024];
    let n = s.read(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// `redis-server` on loopback `port` with its files in `dir`, then `args`
/// (a sentinel's config file first); logs to `redis-<starts>.log`.
pub(crate) fn spawn(port: u16, dir: &Path, args: &[String], starts: u32) -> Proc {
    let mut cmd = Command::new(redis_server());
    // A sentinel's config file must come first; the rest are options.
    let (head, tail) = match args.first() {
        Some(conf) if conf.ends_with(".conf") => (Some(conf), &args[1..]),
        _ => (None, args),
    };
    if let Some(conf) = head {
        cmd.arg(conf);
    }
    cmd.arg("--port")
        .arg(port.to_string())
        .arg("--bind")
        .arg("127.0.0.1")
        .arg("--dir")
        .arg(dir)
        .args(tail);
    Proc::spawn(cmd, &dir.join(format!("redis-{starts}.log")))
}
