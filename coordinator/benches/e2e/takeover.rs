//! Scenario: a takeover with a long history. The workflows bucket holds
//! `finished` finished records and `unfinished` unfinished ones (submitted
//! through the API with no worker, so they stay held); a new coordinator is
//! started and timed from spawn to `loaded unfinished workflows`. It reads
//! the unfinished records through the `workflows_active` index, so the
//! finished history costs it nothing.
//!
//! The finished records are copies of a real stock-analysis record marked
//! completed, written straight into the bucket (as a coordinator would have
//! written them over weeks), pipelined.

use std::future::IntoFuture;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use async_nats::jetstream;
use caucus_harness::Stack;
use futures::StreamExt;
use serde_json::{json, Value};

use crate::support::{coordinator, items, Api};

/// Publishes in flight at once while filling the history.
const FILL_IN_FLIGHT: usize = 4_096;

pub struct Run {
    pub finished: usize,
    pub unfinished: usize,
    /// Time to write the finished history (setup, not measured behaviour).
    pub fill: Duration,
    /// Spawn of the new coordinator → its `loaded unfinished workflows`.
    pub takeover: Duration,
    /// How many it loaded.
    pub loaded: usize,
}

pub async fn run(finished: usize, unfinished: usize) -> Result<Run> {
    let stack = Stack::start();
    let mut c1 = coordinator(&stack);
    let api = Api::connect(&stack).await?;
    let names = items("T", unfinished);
    let mut ids = Vec::with_capacity(unfinished);
    for chunk in names.chunks(1_000) {
        ids.extend(api.submit(chunk, json!("stock-analysis"), 1000).await?);
    }
    let js = jetstream::new(api.nats.clone());
    let kv = js.get_key_value("caucus_workflows").await?;
    let sample = kv
        .get(ids.first().context("no workflow submitted")?)
        .await?
        .context("sample record")?;
    let mut done: Value = serde_json::from_slice(&sample)?;
    done["state"] = json!("completed");
    done["finished_at"] = json!(chrono::Utc::now());
    // A graceful stop releases the leader lock: the time measured below
    // is the new coordinator's start and load, not a lease running out.
    c1.sigterm();
    c1.wait_exit(Duration::from_secs(60));

    let t0 = Instant::now();
    let mut acks = futures::stream::FuturesUnordered::new();
    for i in 0..finished {
        let id = format!("hist-{i:08}");
        done["workflow_id"] = json!(id);
        let body = serde_json::to_vec(&done)?;
        let ack = js
            .publish(format!("$KV.caucus_workflows.{id}"), body.into())
            .await?;
        acks.push(ack.into_future());
        while acks.len() >= FILL_IN_FLIGHT {
            acks.next().await.context("ack")??;
        }
    }
    while let Some(a) = acks.next().await {
        a?;
    }
    let fill = t0.elapsed();

    let t1 = Instant::now();
    let c2 = coordinator(&stack);
    let deadline = Instant::now() + Duration::from_secs(600);
    let loaded = loop {
        if let Some(n) = loaded_count(&c2.output()) {
            break n;
        }
        if Instant::now() > deadline {
            bail!("no takeover within 10 minutes:\n{}", c2.output());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let takeover = t1.elapsed();
    if loaded != unfinished {
        bail!("loaded {loaded} workflows, expected {unfinished}");
    }
    Ok(Run {
        finished,
        unfinished,
        fill,
        takeover,
        loaded,
    })
}

/// `workflows=N` of the coordinator's `loaded unfinished workflows` line.
fn loaded_count(log: &str) -> Option<usize> {
    let line = log
        .lines()
        .find(|l| l.contains("loaded unfinished workflows"))?;
    let rest = &line[line.find("workflows=")? + "workflows=".len()..];
    rest.chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()
}
