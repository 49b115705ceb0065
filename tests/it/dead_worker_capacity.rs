//! Capacity of dead workers (issue 16, item 3): an agent type whose last
//! worker is gone leaves `coordinator.workers` (and `caucus workers`) after
//! its registration lapses, and a dead extra type never reaches the demo's
//! plan of the built-in pipeline.

use std::time::Duration;

use crate::common::{caucus, coordinator, eventually, pipeline, worker, Api};
use caucus_harness::{bin_path, Stack};
use serde_json::{json, Value};

/// The built-in pipeline's agent types (plus the level reviewer).
const STOCK_AGENTS: &str = "screening,business,financial,strategy,valuation,report,reviewer";

async fn workers(api: &Api) -> Vec<Value> {
    let v = api
        .call("coordinator", "workers", Value::Null)
        .await
        .expect("coordinator.workers");
    v["agents"].as_array().cloned().unwrap_or_default()
}

fn row<'a>(rows: &'a [Value], agent: &str) -> Option<&'a Value> {
    rows.iter().find(|r| r["agent_type"] == agent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_extra_type_leaves_the_registry_and_the_demo_still_plans() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let _stock = worker(&stack, STOCK_AGENTS, 2, "builtin", &[]);
    // The extra type runs a task first, so the scheduler knows it too (it
    // kept every type it had ever seen, at capacity 0, once the worker died).
    let mut dev = worker(&stack, "dev", 1, "noop", &[]);
    let api = Api::connect(&stack).await;
    let dev_pipeline = pipeline("devp", json!([{"name": "work", "agent": "dev"}]));
    let ids = api.submit(&["D1"], dev_pipeline.clone(), 10).await;
    api.wait_completed(&ids, Duration::from_secs(30)).await;
    let rows = workers(&api).await;
    assert_eq!(row(&rows, "dev").expect("dev listed")["capacity"], 1);

    // SIGKILL: no deregistration; the registration lapses after its ttl
    // (1 s in the fast env).
    dev.kill();
    let rows = eventually(
        "dev to leave coordinator.workers",
        Duration::from_secs(15),
        || {
            let api = &api;
            async move {
                let rows = workers(api).await;
                row(&rows, "dev").is_none().then_some(rows)
            }
        },
    )
    .await;
    assert_eq!(
        row(&rows, "valuation").expect("valuation listed")["capacity"],
        2
    );
    let (code, out, err) = caucus(&stack, &["workers"]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("dev"), "{out}");
    assert!(out.contains("valuation"), "{out}");

    // A type with tasks waiting and no worker stays visible (capacity 0,
    // the live bottleneck): that is the case the demo must not pass on.
    let waiting = api.submit(&["D2"], dev_pipeline, 10).await;
    let rows = eventually("dev waiting at capacity 0", Duration::from_secs(15), || {
        let api = &api;
        async move {
            let rows = workers(api).await;
            row(&rows, "dev")
                .is_some_and(|r| r["ready"] == 1)
                .then_some(rows)
        }
    })
    .await;
    assert_eq!(row(&rows, "dev").unwrap()["capacity"], 0);

    // `caucus demo` plans the built-in pipeline with its own types' live
    // capacities only (it failed with "agent type `dev` has capacity 0").
    let home = tempfile::tempdir().expect("tempdir");
    let nats = stack.nats.url().to_string();
    let redis = stack.redis.url().to_string();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(bin_path("caucus"))
            .args(["demo", "--tickers", "2", "--unit-ms", "10"])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("CAUCUS_NATS_URL", nats)
            .env("CAUCUS_REDIS_URL", redis)
            .env("CAUCUS_HOME", home.path())
            .current_dir(home.path())
            .output()
            .expect("run caucus demo")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("capacity 0"), "{stderr}");
    assert!(stdout.contains("== Result =="), "{stdout}");
    assert!(!stdout.contains("\"dev\""), "{stdout}");
    // The waiting dev workflow is untouched (still waiting for a worker).
    let state = api.status(&waiting).await[0]["state"].clone();
    assert!(state != "completed" && state != "failed", "{state}");
}
