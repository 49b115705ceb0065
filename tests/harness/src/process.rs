//! A child process that is killed (SIGKILL) and reaped on Drop.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

pub(crate) struct Proc {
    child: Option<Child>,
    /// How it ended when it exited by itself (not through [`Proc::kill`]).
    exit: Option<ExitStatus>,
}

impl Proc {
    /// Spawns `cmd` with stdout and stderr appended to `log`.
    pub(crate) fn spawn(mut cmd: Command, log: &Path) -> Proc {
        let out = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap_or_else(|e| panic!("open log {}: {e}", log.display()));
        let err = out.try_clone().expect("clone log handle");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {:?}: {e}", cmd.get_program()));
        Proc {
            child: Some(child),
            exit: None,
        }
    }

    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    pub(crate) fn signal(&self, sig: Signal) {
        if let Some(pid) = self.pid() {
            let _ = kill(Pid::from_raw(pid as i32), sig);
        }
    }

    /// SIGKILL and reap (a stopped process dies too).
    pub(crate) fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `Some(status)` once the process has exited by itself (it stays
    /// `Some` afterwards); `None` while it runs or after [`Proc::kill`].
    pub(crate) fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.exit.is_some() {
            return self.exit;
        }
        let c = self.child.as_mut()?;
        match c.try_wait() {
            Ok(Some(st)) => {
                self.child = None;
                self.exit = Some(st);
                Some(st)
            }
            _ => None,
        }
    }

    /// Waits for exit up to `timeout`; `None` if still running.
    pub(crate) fn wait_timeout(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.try_wait() {
                return Some(st);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub(crate) fn running(&self) -> bool {
        self.child.is_some()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}
