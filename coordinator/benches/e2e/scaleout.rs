//! Scenario 2: scale-out of 100 ms tasks over 1, 2, 4, 8 single-slot
//! worker processes (capacity follows the worker count).

use std::time::{Duration, Instant};

use anyhow::Result;
use caucus_harness::Stack;
use serde_json::json;

use crate::support::{coordinator, items, worker, Api, Completions};

/// Task run time of the sleep handler.
pub const TASK_MS: u64 = 100;

/// One run's result.
pub struct Run {
    pub workers: usize,
    pub tasks: usize,
    pub secs: f64,
}

impl Run {
    pub fn tasks_per_sec(&self) -> f64 {
        self.tasks as f64 / self.secs
    }

    /// Every worker busy all the time.
    pub fn ideal(&self) -> f64 {
        self.workers as f64 * 1000.0 / TASK_MS as f64
    }
}

pub async fn run(workers: usize, tasks_per_worker: usize) -> Result<Run> {
    let stack = Stack::start();
    let _c = coordinator(&stack);
    let handler = format!("sleep:{TASK_MS}");
    let _w: Vec<_> = (0..workers)
        .map(|_| worker(&stack, "valuation", 1, &handler))
        .collect();
    let api = Api::connect(&stack).await?;
    api.wait_capacity("valuation", workers).await?;
    let mut done = Completions::subscribe(&api.nats).await?;
    let pipeline = json!({
        "name": "one-stage",
        "stages": [{"name": "valuation", "agent": "valuation", "expected_duration": 1.0}],
        "capacities": {"valuation": 1},
    });
    let tasks = tasks_per_worker * workers;
    let t0 = Instant::now();
    // Unit 1 s: the 100 ms tasks are never flagged overdue.
    api.submit(&items("V", tasks), pipeline, 1000).await?;
    done.wait(tasks, Duration::from_secs(120)).await?;
    Ok(Run {
        workers,
        tasks,
        secs: t0.elapsed().as_secs_f64(),
    })
}
