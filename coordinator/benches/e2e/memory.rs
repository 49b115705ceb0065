//! Scenario 5: coordinator memory per in-flight workflow. No worker is
//! registered, so capacity is 0 and every submitted workflow stays held.

use anyhow::{bail, Context as _, Result};
use caucus_harness::Stack;
use serde_json::json;

use crate::support::{coordinator, items, rss_bytes, Api};

pub struct Run {
    pub workflows: usize,
    pub before: u64,
    pub after: u64,
}

impl Run {
    pub fn per_workflow(&self) -> f64 {
        (self.after.saturating_sub(self.before)) as f64 / self.workflows as f64
    }
}

pub async fn run(workflows: usize, per_request: usize) -> Result<Run> {
    let stack = Stack::start();
    let c = coordinator(&stack);
    let pid = c.pid().context("coordinator pid")?;
    let api = Api::connect(&stack).await?;
    // One status round trip so the API path is warmed up before "before".
    api.call("status", json!({"ids": ["-"]})).await?;
    let before = rss_bytes(pid)?;
    let names = items("M", workflows);
    for chunk in names.chunks(per_request) {
        api.submit(chunk, json!("stock-analysis"), 1000).await?;
    }
    let after = rss_bytes(pid)?;
    // They are still in flight (nothing can run them). The list comes in
    // pages of at most 1,000.
    let mut held = 0;
    let mut body = json!({"states": ["pending"], "limit": 1000});
    loop {
        let r = api.call("status", body.clone()).await?;
        held += r["workflows"].as_array().map(Vec::len).unwrap_or(0);
        match r["next_cursor"].as_str() {
            Some(c) => body["cursor"] = json!(c),
            None => break,
        }
    }
    if held != workflows {
        bail!("{held} of {workflows} workflows held as pending");
    }
    Ok(Run {
        workflows,
        before,
        after,
    })
}
