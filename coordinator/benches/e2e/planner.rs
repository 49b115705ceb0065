//! Scenario 4: planner time for many items through stock-analysis.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{Context as _, Result};
use caucus_coordinator::pipeline::builtin;
use caucus_coordinator::planner::plan;

use crate::support::items;

/// Seconds to plan `n_items`, and the number of tasks planned.
pub fn run(n_items: usize) -> Result<(f64, usize, f64)> {
    let spec = builtin("stock-analysis").context("built-in stock-analysis")?;
    let names = items("P", n_items);
    let t0 = Instant::now();
    let p = plan(&names, &spec, &BTreeMap::new())?;
    let secs = t0.elapsed().as_secs_f64();
    Ok((secs, p.tasks.len(), p.makespan))
}
