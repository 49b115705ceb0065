//! A real Prometheus (Debian's `prometheus` package) for the dashboard
//! test: found on the machine, started on a free loopback port with a
//! config the test writes, asked over its HTTP API, killed on Drop.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// How to get the binary when it is missing (scripts/install-servers runs it).
const INSTALL: &str =
    "apt-get install -y prometheus (Debian/Ubuntu; scripts/install-servers does it)";

/// `$CAUCUS_PROMETHEUS`, else `prometheus` on PATH, else `/usr/bin/prometheus`
/// (Debian installs there); panics saying how to install it.
pub fn binary() -> PathBuf {
    let given = std::env::var_os("CAUCUS_PROMETHEUS").map(PathBuf::from);
    let on_path = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default();
    // A set variable is the only candidate: a wrong one is not silently
    // replaced by another binary.
    let candidates: Vec<PathBuf> = match given {
        Some(p) => vec![p],
        None => on_path
            .into_iter()
            .chain([PathBuf::from("/usr/bin")])
            .map(|dir| dir.join("prometheus"))
            .collect(),
    };
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "`prometheus` (2.42, Debian's package) was not found on PATH, in /usr/bin or \
                 $CAUCUS_PROMETHEUS: this test runs the dashboard's queries against a real one. \
                 Install it with: {INSTALL}"
            )
        })
}

/// `promtool` beside the `prometheus` binary, when the package ships it.
pub fn promtool(prometheus: &Path) -> Option<PathBuf> {
    let p = prometheus.with_file_name("promtool");
    p.is_file().then_some(p)
}

/// A running Prometheus; SIGKILLed on Drop (its data is a temp dir).
pub struct Prometheus {
    child: Child,
    /// `127.0.0.1:<port>` of its HTTP API.
    pub addr: String,
    /// Where its log goes (printed when a check fails).
    pub log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    /// Starts `bin` with `config` (the YAML text) on a free port.
    pub fn start(bin: &Path, config: &str) -> Prometheus {
        let dir = tempfile::Builder::new()
            .prefix("prometheus-")
            .tempdir()
            .expect("tempdir");
        let cfg = dir.path().join("prometheus.yml");
        std::fs::write(&cfg, config).expect("write prometheus.yml");
        let log = dir.path().join("prometheus.log");
        let out = std::fs::File::create(&log).expect("log file");
        let addr = format!("127.0.0.1:{}", caucus_harness::free_port());
        let child = Command::new(bin)
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        let p = Prometheus {
            child,
            addr,
            log,
            _dir: dir,
        };
        caucus_harness::wait_until("prometheus to be ready", Duration::from_secs(30), || {
            p.get("/-/ready").ok().filter(|(code, _)| *code == 200)
        });
        p
    }

    /// Its log so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET path` → (status, body). HTTP/1.0, so the body is never chunked
    /// and ends when the server closes the connection.
    pub fn get(&self, path: &str) -> std::io::Result<(u16, String)> {
        let mut s = TcpStream::connect(&self.addr)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr)?;
        let mut raw = String::new();
        s.read_to_string(&mut raw)?;
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
        let code = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        Ok((code, body.to_string()))
    }

    /// `GET /api/v1/<path>` → its `data`; panics unless `status` is success.
    pub fn api(&self, path: &str) -> Value {
        let (code, body) = self
            .get(&format!("/api/v1/{path}"))
            .unwrap_or_else(|e| panic!("GET /api/v1/{path}: {e}"));
        let v: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("GET /api/v1/{path} → {code}: not JSON ({e}): {body}"));
        assert_eq!(v["status"], "success", "GET /api/v1/{path} → {code}: {v}");
        v["data"].clone()
    }

    /// The instant query `expr` evaluated now: its result vector.
    pub fn query(&self, expr: &str) -> Vec<Value> {
        let data = self.api(&format!("query?query={}", encode(expr)));
        data["result"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
