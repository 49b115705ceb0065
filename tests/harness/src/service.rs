//! The project's own binaries, spawned with config pointing at a [`crate::Stack`].

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;

use crate::process::Proc;
use crate::wait_until;

/// The log line every caucus binary prints once it is connected, has set up
/// its topology and answers health requests.
pub const READY_MARKER: &str = "service ready";

/// Path of a workspace binary (e.g. `caucus-coordinator`).
///
/// `$CAUCUS_BIN_DIR` wins, used as it is (nothing is built). Otherwise the
/// cargo target dir this test binary runs from, after [`build_binaries`] has
/// brought the workspace's binaries up to date there, so a plain
/// `cargo test -p caucus-tests` never runs stale binaries. Panics when the
/// binary is missing.
pub fn bin_path(name: &str) -> PathBuf {
    let dir = match std::env::var_os("CAUCUS_BIN_DIR") {
        Some(d) => PathBuf::from(d),
        None => {
            let dir = exe_profile_dir();
            build_binaries(&dir);
            dir
        }
    };
    let path = dir.join(name);
    if !path.is_file() {
        panic!(
            "binary `{name}` not found at {}: build it first with `cargo build --workspace --bins` \
             (scripts/test does this)",
            path.display()
        );
    }
    path
}

/// The profile dir (`target/debug`, `target/release`, …) this process runs
/// from: test and bench binaries live in its `deps/`.
fn exe_profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let mut dir = exe.parent().expect("exe dir").to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

/// Runs `$CARGO build --workspace --bins` once per process (the first
/// [`bin_path`] call; the others wait for it), into `profile_dir`'s target
/// dir with its profile (`debug` = dev, `release`, or a custom profile), so
/// the binaries match the test binary's build. Silent when it succeeds;
/// panics with cargo's stderr when it fails, in every test that asks.
///
/// Why this cannot deadlock: `cargo test` (and `cargo bench`, `cargo run`)
/// releases the target dir's build lock once compiling is done, before it
/// runs anything, so the nested build takes the lock freely. Test binaries
/// that cargo or a developer run in parallel each build once, and cargo's
/// file lock serialises them: the first does the work, the rest find
/// everything fresh. After `scripts/test`'s own build step it is a no-op.
/// A cross-compiled run (`--target`, binaries under `target/<triple>/`)
/// should set `$CAUCUS_BIN_DIR`.
fn build_binaries(profile_dir: &Path) {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
        let target_dir = profile_dir.parent().unwrap_or(profile_dir);
        let mut cmd = Command::new(&cargo);
        // What cargo set for this test process describes the test crate, not
        // the build: left in, a build script that reruns on one of them (ring
        // on CARGO_MANIFEST_DIR) would see it change between this build and
        // a developer's, and each would rebuild ring and everything above it.
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            if is_cargo_runtime_var(&k) {
                cmd.env_remove(&*k);
            }
        }
        cmd.args(["build", "--workspace", "--bins"])
            .arg("--manifest-path")
            .arg(&manifest)
            .arg("--target-dir")
            .arg(target_dir);
        match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") | None => {}
            Some("release") => {
                cmd.arg("--release");
            }
            Some(other) => {
                cmd.args(["--profile", other]);
            }
        }
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("run {}: {e}", cargo.to_string_lossy()))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "`{cmd:?}` failed ({}):\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    });
    if let Err(e) = built {
        panic!("building the workspace binaries for this test: {e}");
    }
}

/// Variables cargo sets for the processes it runs (`cargo test`, `cargo
/// run`): <https://doc.rust-lang.org/cargo/reference/environment-variables.html>.
fn is_cargo_runtime_var(k: &str) -> bool {
    matches!(
        k,
        "CARGO"
            | "CARGO_MANIFEST_DIR"
            | "CARGO_MANIFEST_PATH"
            | "CARGO_CRATE_NAME"
            | "CARGO_BIN_NAME"
            | "CARGO_PRIMARY_PACKAGE"
            | "CARGO_TARGET_TMPDIR"
            | "CARGO_RUSTC_CURRENT_DIR"
            | "OUT_DIR"
    ) || k.starts_with("CARGO_PKG_")
        || k.starts_with("CARGO_BIN_EXE_")
}

/// Builder for a [`Service`]. Cloneable, so a tool can spawn the same
/// service again after killing it.
#[derive(Debug, Clone)]
pub struct ServiceBuilder {
    bin: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    log: Option<PathBuf>,
}

impl ServiceBuilder {
    /// A builder for workspace binary `bin`.
    pub fn new(bin: &str) -> Self {
        ServiceBuilder {
            bin: bin.to_string(),
            args: Vec::new(),
            env: vec![("RUST_BACKTRACE".into(), "1".into())],
            log: None,
        }
    }

    /// Appends the output to `path` (the process runs in its directory)
    /// instead of a fresh temp dir that is removed on Drop.
    pub fn log_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.log = Some(path.into());
        self
    }

    /// Appends one argument.
    pub fn arg(mut self, a: impl Into<String>) -> Self {
        self.args.push(a.into());
        self
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, it: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(it.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, k: impl Into<String>, v: impl Into<String>) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    /// Spawns the process (does not wait for readiness).
    pub fn spawn(self) -> Service {
        let (dir, log) = match &self.log {
            Some(log) => (None, log.clone()),
            None => {
                let dir = tempfile::Builder::new()
                    .prefix(&format!("{}-", self.bin))
                    .tempdir()
                    .expect("tempdir");
                let log = dir.path().join("out.log");
                (Some(dir), log)
            }
        };
        let cwd = log.parent().unwrap_or(Path::new(".")).to_path_buf();
        let mut cmd = Command::new(bin_path(&self.bin));
        cmd.args(&self.args).current_dir(&cwd);
        // A clean, explicit environment: only what the test sets plus PATH/HOME.
        cmd.env_clear();
        for k in ["PATH", "HOME"] {
            if let Some(v) = std::env::var_os(k) {
                cmd.env(k, v);
            }
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let proc = Proc::spawn(cmd, &log);
        Service {
            name: self.bin,
            proc,
            log,
            _dir: dir,
        }
    }

    /// Spawns and waits for the readiness line.
    pub fn start(self) -> Service {
        let s = self.spawn();
        s.wait_ready();
        s
    }
}

/// A running caucus process; SIGKILLed on Drop.
pub struct Service {
    name: String,
    proc: Proc,
    log: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

impl Service {
    /// Everything the process printed so far.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the output contains `needle`.
    pub fn wait_for_output(&self, needle: &str, timeout: Duration) {
        wait_until(
            &format!("`{needle}` in the output of {}", self.name),
            timeout,
            || self.output().contains(needle).then_some(()),
        );
    }

    /// The file the output goes to.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Polls for [`READY_MARKER`] until `timeout`; `false` when the process
    /// exited first or the time ran out (never panics).
    pub fn ready_within(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::from_millis(2);
        loop {
            if self.output().contains(READY_MARKER) {
                return true;
            }
            if self.proc.try_wait().is_some() || Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// Waits for [`READY_MARKER`]; panics with the output on exit or time-out.
    pub fn wait_ready(&self) {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.wait_for_output(READY_MARKER, Duration::from_secs(30))
        }));
        if r.is_err() {
            panic!(
                "{} never became ready; output:\n{}",
                self.name,
                self.output()
            );
        }
    }

    /// The OS process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.proc.pid()
    }

    /// Sends SIGTERM (graceful drain).
    pub fn sigterm(&self) {
        self.proc.signal(Signal::SIGTERM);
    }

    /// Freezes the process (SIGSTOP): it keeps its sockets and its memory
    /// but runs nothing until [`Service::resume`].
    pub fn pause(&self) {
        self.proc.signal(Signal::SIGSTOP);
    }

    /// Lets a paused process run again (SIGCONT).
    pub fn resume(&self) {
        self.proc.signal(Signal::SIGCONT);
    }

    /// Sends SIGKILL and reaps.
    pub fn kill(&mut self) {
        self.proc.kill();
    }

    /// `Some(status)` if the process exited by itself (not through
    /// [`Service::kill`]); it stays `Some` afterwards.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.proc.try_wait()
    }

    /// Waits for the process to exit; panics (with output) after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        match self.proc.wait_timeout(timeout) {
            Some(st) => st,
            None => panic!(
                "{} did not exit within {timeout:?}; output:\n{}",
                self.name,
                self.output()
            ),
        }
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.proc.try_wait().is_none() && self.proc.running()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nested_build_drops_what_cargo_set_for_the_test_and_keeps_settings() {
        for k in [
            "CARGO_MANIFEST_DIR",
            "CARGO_PKG_NAME",
            "CARGO_BIN_EXE_caucus-chaos",
            "OUT_DIR",
        ] {
            assert!(is_cargo_runtime_var(k), "{k}");
        }
        for k in [
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_JOBS",
            "CARGO_PROFILE_DEV_DEBUG",
            "PATH",
        ] {
            assert!(!is_cargo_runtime_var(k), "{k}");
        }
    }
}
