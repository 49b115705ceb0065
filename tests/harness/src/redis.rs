//! A real `redis-server` on a free loopback port.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;

use crate::free_port;
use crate::process::Proc;
use crate::redis_node::{self, raw, wait_own_server};

/// Free ports tried before giving up.
const PORT_ATTEMPTS: u32 = 5;

/// A Redis server with persistence off; killed on Drop.
pub struct Redis {
    proc: Proc,
    port: u16,
    dir: tempfile::TempDir,
    starts: u32,
}

impl Redis {
    /// Starts the server in a fresh temp dir and waits for PONG.
    pub fn start() -> Redis {
        let dir = tempfile::Builder::new()
            .prefix("caucus-redis-")
            .tempdir()
            .expect("tempdir");
        Redis::start_at(dir)
    }

    /// [`Redis::start`] with its temp dir (logs) inside `parent`.
    pub fn start_in(parent: &Path) -> Redis {
        let dir = tempfile::Builder::new()
            .prefix("redis-")
            .tempdir_in(parent)
            .unwrap_or_else(|e| panic!("tempdir in {}: {e}", parent.display()));
        Redis::start_at(dir)
    }

    fn start_at(dir: tempfile::TempDir) -> Redis {
        // A free port can be taken by a parallel test before our server
        // binds it; our server then exits and another one answers. Retry
        // on a new port when that happens.
        let port = free_port();
        let mut r = Redis {
            proc: spawn(port, dir.path(), 0),
            port,
            dir,
            starts: 0,
        };
        for attempt in 1..=PORT_ATTEMPTS {
            if r.wait_ready_or_exit() {
                return r;
            }
            if attempt < PORT_ATTEMPTS {
                r.starts += 1;
                r.port = free_port();
                r.proc = spawn(r.port, r.dir.path(), r.starts);
            }
        }
        panic!(
            "redis-server did not start on any of {PORT_ATTEMPTS} free ports (logs in {})",
            r.dir.path().display()
        );
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory holding the logs.
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
    /// [`Redis::kill`] or [`Redis::restart`]).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.proc.try_wait()
    }

    /// SIGKILL the server.
    pub fn kill(&mut self) {
        self.proc.kill();
    }

    /// Kill if running and start again on the same port: it comes back empty.
    pub fn restart(&mut self) {
        self.proc.kill();
        self.starts += 1;
        self.proc = spawn(self.port, self.dir.path(), self.starts);
        self.wait_ready();
    }

    /// Sends one inline command (e.g. `FLUSHALL`) and returns the raw reply.
    pub fn command(&self, line: &str) -> String {
        raw(self.port, line).unwrap_or_else(|e| panic!("redis {line}: {e}"))
    }

    fn wait_ready(&mut self) {
        if !self.wait_ready_or_exit() {
            panic!(
                "redis-server exited on port {} (log {})",
                self.port,
                log_path(self.dir.path(), self.starts).display()
            );
        }
    }

    /// Waits until *our* server answers (its `process_id` is our child's:
    /// a PONG from another test's server on a reused port does not count);
    /// `false` when our server exited first.
    fn wait_ready_or_exit(&mut self) -> bool {
        let log = log_path(self.dir.path(), self.starts);
        let port = self.port;
        wait_own_server(
            &mut self.proc,
            &format!("redis-server PONG (log {})", log.display()),
            || raw(port, "INFO server").ok(),
        )
    }
}

fn log_path(dir: &Path, starts: u32) -> PathBuf {
    dir.join(format!("redis-{starts}.log"))
}

fn spawn(port: u16, dir: &Path, starts: u32) -> Proc {
    let args = ["--save", "", "--appendonly", "no"].map(String::from);
    redis_node::spawn(port, dir, &args, starts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_servers_pong_on_our_port_is_not_our_server_ready() {
        let a = Redis::start();
        let dir = tempfile::tempdir().unwrap();
        // B cannot bind A's port and exits; A answers PING on that port.
        let mut b = Redis {
            proc: spawn(a.port, dir.path(), 0),
            port: a.port,
            dir,
            starts: 0,
        };
        assert!(!b.wait_ready_or_exit(), "A's PONG must not count for B");
        assert!(a.command("PING").starts_with("+PONG"));
    }
}
