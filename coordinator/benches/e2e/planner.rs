//! Scenario 4: planner time for many items through stock-analysis, and the
//! time and memory of a plan of about 1,000,000 tasks.
//!
//! The large plan runs in a child process (this bench binary again, with
//! [`CHILD_ENV`] set) so its memory figure is its own: the child reads
//! VmRSS from /proc/self/status before planning and VmHWM (the peak) after,
//! free of whatever the scenarios before it left in this process's heap.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context as _, Result};
use caucus_coordinator::pipeline::builtin;
use caucus_coordinator::planner::plan;

use crate::support::items;

/// Set (to the number of items) in the child that plans the large plan.
pub const CHILD_ENV: &str = "CAUCUS_BENCH_PLANNER_CHILD";

/// One timed plan.
pub struct Planned {
    /// Items planned.
    pub items: usize,
    /// Tasks in the plan (gates included).
    pub tasks: usize,
    /// Seconds `plan` took.
    pub secs: f64,
    /// The plan's makespan in time units (a check that the plan is real).
    pub makespan: f64,
}

/// Memory of the child process that planned, from /proc/self/status.
pub struct Memory {
    /// VmRSS once the items were built, just before planning.
    pub rss_before: u64,
    /// VmHWM (peak resident set) after planning.
    pub peak: u64,
    /// VmRSS after planning, with the plan still held.
    pub rss_held: u64,
}

impl Memory {
    /// Peak resident memory the planning added.
    pub fn peak_delta(&self) -> u64 {
        self.peak.saturating_sub(self.rss_before)
    }

    /// Resident memory the finished plan keeps.
    pub fn held_delta(&self) -> u64 {
        self.rss_held.saturating_sub(self.rss_before)
    }
}

/// Plans `n_items` in this process.
pub fn run(n_items: usize) -> Result<Planned> {
    let spec = builtin("stock-analysis").context("built-in stock-analysis")?;
    let names = items("P", n_items);
    let t0 = Instant::now();
    let p = plan(&names, &spec, &BTreeMap::new())?;
    let secs = t0.elapsed().as_secs_f64();
    Ok(Planned {
        items: n_items,
        tasks: p.tasks.len(),
        secs,
        makespan: p.makespan,
    })
}

/// Items of stock-analysis that make at least `tasks` tasks (every copy of
/// every stage, gates included, is one task).
pub fn items_for_tasks(tasks: usize) -> Result<usize> {
    let spec = builtin("stock-analysis").context("built-in stock-analysis")?;
    let per_item: usize = spec.stages.iter().map(|s| s.copies() as usize).sum();
    Ok(tasks.div_ceil(per_item.max(1)))
}

/// Plans `n_items` in a child process; its time and memory.
pub fn run_in_child(n_items: usize) -> Result<(Planned, Memory)> {
    let exe = std::env::current_exe()?;
    let out = Command::new(exe)
        .arg("--bench")
        .env(CHILD_ENV, n_items.to_string())
        .output()
        .context("starting the planner child")?;
    if !out.status.success() {
        bail!(
            "planner child failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("planner-child "))
        .with_context(|| format!("planner child printed no result: {stdout}"))?;
    let f: Vec<&str> = line.split_whitespace().collect();
    let [items, tasks, secs, makespan, rss_before, peak, rss_held] = f[..] else {
        bail!("planner child printed {line:?}");
    };
    Ok((
        Planned {
            items: items.parse()?,
            tasks: tasks.parse()?,
            secs: secs.parse()?,
            makespan: makespan.parse()?,
        },
        Memory {
            rss_before: rss_before.parse()?,
            peak: peak.parse()?,
            rss_held: rss_held.parse()?,
        },
    ))
}

/// The child's side of [`run_in_child`]: plans `n_items` and prints one
/// `planner-child` line for the parent.
pub fn child(n_items: usize) -> Result<()> {
    let spec = builtin("stock-analysis").context("built-in stock-analysis")?;
    let names = items("P", n_items);
    let rss_before = self_status("VmRSS")?;
    let t0 = Instant::now();
    let p = plan(&names, &spec, &BTreeMap::new())?;
    let secs = t0.elapsed().as_secs_f64();
    let peak = self_status("VmHWM")?;
    let rss_held = self_status("VmRSS")?;
    println!(
        "planner-child {n_items} {} {secs} {} {rss_before} {peak} {rss_held}",
        p.tasks.len(),
        p.makespan
    );
    Ok(())
}

/// A `kB` field of /proc/self/status (VmRSS, VmHWM), in bytes.
fn self_status(field: &str) -> Result<u64> {
    let s = std::fs::read_to_string("/proc/self/status")?;
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .with_context(|| format!("no {field} in /proc/self/status"))?
        .split_whitespace()
        .next()
        .with_context(|| format!("{field} without a value"))?
        .parse()?;
    Ok(kb * 1024)
}
