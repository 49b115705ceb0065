//! Scenario 6: what JetStream `sync_interval: always` (fsync before every
//! publish ack, the production setting in deploy/config/nats-server.conf)
//! costs against the default (fsync every 2 minutes), measured both ways in
//! one run: the same stock-analysis no-op workload on fresh servers, first
//! with the default, then with `always`; plus the raw JetStream round trip
//! both ways and this disk's own fsync latency.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use caucus_harness::{free_port, Stack};

use crate::raw;
use crate::throughput::{self, Run};

/// One side of the comparison.
pub struct Side {
    pub run: Run,
    /// Raw JetStream round trips per second on the same server settings.
    pub raw: f64,
    /// `jetstream.config.sync_always` as the server reports it (/varz).
    pub sync_always: bool,
}

/// Both sides and the disk's fsync latency.
pub struct Both {
    pub default: Side,
    pub always: Side,
    /// Median of 512-byte write + fdatasync, in ms.
    pub fsync_ms: f64,
}

/// Runs the workload on a server with `extra` config, then reads back the
/// sync setting it runs with.
async fn side(
    sync_always: bool,
    slots: u32,
    items: usize,
    raw_total: usize,
    raw_in_flight: usize,
) -> Result<Side> {
    let conf = |port: u16| {
        let mut c = format!("http_port: {port}\n");
        if sync_always {
            c.push_str("jetstream {\n  sync_interval: always\n}\n");
        }
        c
    };
    let raw = {
        let port = free_port();
        let stack = Stack::start_with_nats_config(&conf(port));
        raw::round_trip(&stack.nats.url(), raw_total, raw_in_flight, 1).await?
    };
    let port = free_port();
    let stack = Stack::start_with_nats_config(&conf(port));
    let reported = varz_sync_always(port)?;
    if reported != sync_always {
        bail!("nats-server reports sync_always = {reported}, wanted {sync_always}");
    }
    let run = throughput::run_on(stack, 1, slots, items, Duration::from_secs(900)).await?;
    Ok(Side {
        run,
        raw,
        sync_always: reported,
    })
}

/// `jetstream.config.sync_always` from the server's /varz (absent = false).
fn varz_sync_always(port: u16) -> Result<bool> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).context("monitor port")?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "GET /varz HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let v: serde_json::Value = serde_json::from_str(body).context("varz json")?;
    Ok(v["jetstream"]["config"]["sync_always"].as_bool() == Some(true))
}

/// Median latency of `n` 512-byte appends each followed by `sync_data`
/// (fdatasync) in `dir`.
fn fsync_latency_ms(dir: &Path, n: usize) -> Result<f64> {
    let path = dir.join("caucus-fsync-probe");
    let mut f = std::fs::File::create(&path)?;
    let block = [0u8; 512];
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f.write_all(&block)?;
        f.sync_data()?;
        samples.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    drop(f);
    let _ = std::fs::remove_file(&path);
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
}

/// The whole comparison.
pub async fn run(slots: u32, items: usize, raw_total: usize, raw_in_flight: usize) -> Result<Both> {
    let probe_dir = tempfile::tempdir()?;
    let fsync_ms = fsync_latency_ms(probe_dir.path(), 200)?;
    let default = side(false, slots, items, raw_total, raw_in_flight).await?;
    let always = side(true, slots, items, raw_total, raw_in_flight).await?;
    Ok(Both {
        default,
        always,
        fsync_ms,
    })
}
