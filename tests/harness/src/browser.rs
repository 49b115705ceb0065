//! A real browser for the console's tests: Debian's `chromedriver` on a
//! free loopback port driving a headless `chromium` (issue 13's browser
//! tests). The WebDriver client itself lives with the tests (fantoccini);
//! this starts the driver, knows when it is ready, and says which browser
//! binary and flags a session should ask for.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::process::Proc;
use crate::{find_binary, free_port};

/// How to install both when they are missing (scripts/install-servers does).
pub const INSTALL: &str =
    "apt-get install -y chromium chromium-driver (or scripts/install-servers)";

/// Flags every session starts chromium with: no display, no sandbox (CI
/// containers run as root, where chromium refuses its sandbox), no GPU,
/// no /dev/shm (small in containers), and a fixed window so screenshots
/// are comparable.
pub const CHROMIUM_ARGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
];

/// A running chromedriver; on Drop its whole process group is killed, so
/// the browsers it started go too even when a test panicked before closing
/// its session.
pub struct ChromeDriver {
    proc: Proc,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl ChromeDriver {
    /// Starts chromedriver (`$CAUCUS_CHROMEDRIVER`, else `chromedriver` on
    /// PATH) on a free port and waits until `GET /status` says it is ready
    /// for new sessions. Panics with the install command when it is
    /// missing and with its output when it never gets ready.
    pub fn start() -> ChromeDriver {
        let bin = find_binary("CAUCUS_CHROMEDRIVER", "chromedriver", INSTALL);
        let dir = tempfile::Builder::new()
            .prefix("chromedriver-")
            .tempdir()
            .expect("tempdir");
        let log = dir.path().join("out.log");
        // A port taken between free_port and the bind makes chromedriver
        // exit; try a few before giving up.
        let mut last = String::new();
        for _ in 0..3 {
            let port = free_port();
            let mut cmd = Command::new(&bin);
            // Its own process group: chromium and its helpers inherit it.
            cmd.arg(format!("--port={port}"))
                .current_dir(dir.path())
                .process_group(0);
            let mut proc = Proc::spawn(cmd, &log);
            let ready = poll_ready(&mut proc, port, Duration::from_secs(20));
            if ready {
                return ChromeDriver {
                    proc,
                    port,
                    log,
                    _dir: dir,
                };
            }
            kill_group(&mut proc);
            last = std::fs::read_to_string(&log).unwrap_or_default();
        }
        panic!(
            "chromedriver ({}) never became ready; output:\n{last}",
            bin.display()
        );
    }

    /// The WebDriver endpoint, e.g. `http://127.0.0.1:9515`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Everything chromedriver printed so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The file its output goes to.
    pub fn log_path(&self) -> &Path {
        &self.log
    }
}

impl Drop for ChromeDriver {
    fn drop(&mut self) {
        kill_group(&mut self.proc);
    }
}

/// SIGKILLs the process group `proc` leads, then reaps `proc`.
fn kill_group(proc: &mut Proc) {
    if let Some(pid) = proc.pid() {
        let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
    proc.kill();
}

/// The browser binary sessions ask chromedriver for: `$CAUCUS_CHROMIUM`,
/// else `chromium` on PATH (Debian's), panicking with the install command.
pub fn chromium_binary() -> PathBuf {
    find_binary("CAUCUS_CHROMIUM", "chromium", INSTALL)
}

/// Polls chromedriver's `/status` until it reports `"ready": true`;
/// `false` when the process exits first or `timeout` passes.
fn poll_ready(proc: &mut Proc, port: u16, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(5);
    loop {
        if status(port).is_some_and(|body| body.replace(' ', "").contains("\"ready\":true")) {
            return true;
        }
        if proc.try_wait().is_some() || Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// The answer to `GET /status`, or `None` while nothing answers.
/// chromedriver keeps the connection open despite `Connection: close`, so
/// this reads until the JSON body is complete (or a short read time-out).
fn status(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    s.write_all(b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
        if out.ends_with(b"}}") {
            break;
        }
    }
    let out = String::from_utf8_lossy(&out).into_owned();
    out.starts_with("HTTP/1.1 200").then_some(out)
}
