//! A real `redis-server` on a free loopback port.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::process::Proc;
use crate::{find_binary, free_port, wait_until};

const INSTALL: &str = "apt-get install -y redis-server";

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
        let port = free_port();
        let proc = spawn(port, dir.path(), 0);
        let r = Redis {
            proc,
            port,
            dir,
            starts: 0,
        };
        r.wait_ready();
        r
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
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

    fn wait_ready(&self) {
        let log = log_path(self.dir.path(), self.starts);
        wait_until(
            &format!("redis-server PONG (log {})", log.display()),
            Duration::from_secs(20),
            || {
                raw(self.port, "PING")
                    .ok()
                    .filter(|r| r.starts_with("+PONG"))
                    .map(|_| ())
            },
        );
    }
}

fn raw(port: u16, line: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(format!("{line}\r\n").as_bytes())?;
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

fn log_path(dir: &Path, starts: u32) -> PathBuf {
    dir.join(format!("redis-{starts}.log"))
}

fn spawn(port: u16, dir: &Path, starts: u32) -> Proc {
    let bin = find_binary("CAUCUS_REDIS_SERVER", "redis-server", INSTALL);
    let mut cmd = Command::new(bin);
    cmd.arg("--port")
        .arg(port.to_string())
        .arg("--bind")
        .arg("127.0.0.1")
        .arg("--save")
        .arg("")
        .arg("--appendonly")
        .arg("no")
        .arg("--dir")
        .arg(dir);
    Proc::spawn(cmd, &log_path(dir, starts))
}
