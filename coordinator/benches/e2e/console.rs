//! Scenario 11: the console's overview with 10,000 workflows held. No
//! worker is registered (as in scenario 5), so every workflow stays held;
//! a `caucus-console` on a free loopback port answers `GET /` (one page of
//! `console.page_size` workflows, the counts, the agents) and each request
//! is timed from connect to the last byte.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use caucus_harness::{free_port, Stack};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{coordinator, items, Api};

/// The timings of one path, in ms, sorted.
pub struct Timings {
    /// The path requested.
    pub path: String,
    /// One per request, ascending.
    pub ms: Vec<f64>,
}

impl Timings {
    /// The `p`-th percentile (nearest rank).
    pub fn percentile(&self, p: f64) -> f64 {
        let rank = ((p / 100.0) * self.ms.len() as f64).ceil() as usize;
        self.ms[rank.clamp(1, self.ms.len()) - 1]
    }
}

/// What the run measured.
pub struct Run {
    /// Workflows held while it was measured.
    pub workflows: usize,
    /// `GET /`, then the filtered overview (which scans status pages).
    pub paths: Vec<Timings>,
}

/// One `GET path` over a fresh loopback connection: (status, body bytes).
async fn get(addr: &str, path: &str) -> Result<(u16, usize)> {
    let mut s = TcpStream::connect(addr).await?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await?;
    let head = String::from_utf8_lossy(&raw[..raw.len().min(32)]).into_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("GET {path}: no status line in {head:?}"))?;
    Ok((status, raw.len()))
}

/// Submits `workflows` in requests of `per_request`, starts a console and
/// times `requests` overview requests per path.
pub async fn run(workflows: usize, per_request: usize, requests: usize) -> Result<Run> {
    let stack = Stack::start();
    let _c = coordinator(&stack);
    let api = Api::connect(&stack).await?;
    let names = items("C", workflows);
    for chunk in names.chunks(per_request) {
        api.submit(chunk, json!("stock-analysis"), 1000).await?;
    }
    let listen = format!("127.0.0.1:{}", free_port());
    let _console = stack
        .service("caucus-console")
        .env("CAUCUS_CONSOLE_LISTEN", &listen)
        .env("CAUCUS_TELEMETRY_LOG_LEVEL", "warn")
        .spawn();
    let deadline = Instant::now() + Duration::from_secs(30);
    while TcpStream::connect(&listen).await.is_err() {
        if Instant::now() > deadline {
            bail!("the console never listened on {listen}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let last = names.last().context("no items")?;
    let mut paths = Vec::new();
    for path in ["/".to_string(), format!("/?item={last}")] {
        // One request first: connections and caches warm, as in use.
        let (status, _) = get(&listen, &path).await?;
        if status != 200 {
            bail!("GET {path}: status {status}");
        }
        let mut ms = Vec::with_capacity(requests);
        for _ in 0..requests {
            let t = Instant::now();
            let (status, bytes) = get(&listen, &path).await?;
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
            if status != 200 || bytes == 0 {
                bail!("GET {path}: status {status}, {bytes} bytes");
            }
        }
        ms.sort_by(f64::total_cmp);
        paths.push(Timings { path, ms });
    }
    // The overview counted what the coordinator holds.
    let r = api.call("status", json!({"limit": 1})).await?;
    let held: u64 = r["counts"]
        .as_object()
        .map(|c| c.values().filter_map(|v| v.as_u64()).sum())
        .unwrap_or(0);
    if held as usize != workflows {
        bail!("{held} of {workflows} workflows held");
    }
    Ok(Run { workflows, paths })
}
