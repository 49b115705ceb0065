//! Scenario 4, the scheduler's side: finishing workflows one by one while
//! a large backlog waits in the ready queues (a capacity-limited batch),
//! on the in-memory engine alone (no servers).

use std::time::Instant;

use anyhow::{Context as _, Result};
use caucus_coordinator::engine::Engine;
use caucus_coordinator::pipeline::builtin;
use caucus_coordinator::runtime::pipelines::stages_of;
use caucus_coordinator::workflow::instantiate;
use chrono::Utc;

/// One timed run.
pub struct Finished {
    /// Workflows that waited in the queues.
    pub queued: usize,
    /// Workflows dispatched and finished (removed from the engine).
    pub finished: usize,
    /// Seconds the dispatches and removals took.
    pub secs: f64,
}

/// Queues `queued` stock-analysis workflows, then `finished` times
/// dispatches one task (capacity 1 per agent type) and removes its
/// workflow, as the scheduler does once a finished record is stored.
pub fn run(queued: usize, finished: usize) -> Result<Finished> {
    let spec = builtin("stock-analysis").context("built-in stock-analysis")?;
    let stages = std::sync::Arc::new(
        stages_of(&spec).map_err(|e| anyhow::anyhow!("stock-analysis stages: {e:?}"))?,
    );
    let now = Utc::now();
    let mut engine = Engine::new();
    for i in 0..queued {
        engine.insert(instantiate(
            format!("q{i}"),
            format!("Q{i}"),
            spec.name.clone(),
            stages.clone(),
            1000,
            now,
        ));
    }
    let t0 = Instant::now();
    let mut done = 0;
    while done < finished {
        let (dispatches, _) = engine.next_dispatches(now, |_| 1);
        if dispatches.is_empty() {
            break;
        }
        for d in dispatches {
            if engine.remove(&d.workflow_id).is_some() {
                done += 1;
            }
        }
    }
    Ok(Finished {
        queued,
        finished: done,
        secs: t0.elapsed().as_secs_f64(),
    })
}
