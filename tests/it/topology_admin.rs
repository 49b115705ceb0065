//! Stream administration (#11): only the coordinator and `caucus init`
//! create streams, buckets and durable consumers; a worker started before
//! any coordinator waits, saying what it waits for, and proceeds once one
//! starts; after `caucus init` a facilitator starts without a coordinator.
//!
//! The servers here run without authentication (an admin-like connection);
//! the role tests check the permissions themselves.

use std::collections::BTreeSet;
use std::time::Duration;

use async_nats::jetstream;
use caucus_harness::Stack;
use caucus_shared::nats::consumers;
use caucus_shared::subjects::{StreamKind, Subjects};
use serde::Deserialize;

use crate::common::{caucus, eventually, fast_env};

/// What `caucus init --json` prints.
#[derive(Debug, Deserialize)]
struct Initialised {
    /// Stream names.
    streams: Vec<String>,
    /// Bucket names.
    buckets: Vec<String>,
    /// `<consumer> on <stream>`.
    consumers: Vec<String>,
}

/// Runs `caucus init` on `stack` for `agent_types` with `env` added (give
/// it the env of the service about to start, so consumer settings such as
/// `CAUCUS_WORKER_ACK_WAIT` match): what a test that starts a worker,
/// facilitator or correlator before (or without) a coordinator needs.
/// Panics with the CLI's output when it fails.
pub fn init(stack: &Stack, agent_types: &[&str], env: &[(&str, &str)]) {
    let mut cmd = std::process::Command::new(caucus_harness::bin_path("caucus"));
    cmd.arg("init")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("CAUCUS_HOME", "/nonexistent");
    if !agent_types.is_empty() {
        cmd.arg("--agent-types").arg(agent_types.join(","));
    }
    for (k, v) in stack.env() {
        cmd.env(k, v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run caucus init");
    assert!(
        out.status.success(),
        "caucus init failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// [`init`] in process (no CLI), with the default settings.
pub async fn init_topology(stack: &Stack, agent_types: &[&str]) -> anyhow::Result<()> {
    let mut cfg = caucus_shared::Config::default();
    cfg.nats.url = stack.nats.url();
    let client = caucus_shared::nats::connect(&cfg.nats, "test-init").await?;
    let js = jetstream::new(client);
    let types: Vec<String> = agent_types.iter().map(|t| t.to_string()).collect();
    caucus_shared::nats::admin::everything(&js, &Subjects::default(), &cfg, &types).await?;
    Ok(())
}

/// The durable consumers of `stream` on the server.
async fn consumer_names(js: &jetstream::Context, stream: &str) -> anyhow::Result<BTreeSet<String>> {
    use futures::TryStreamExt;
    let s = js.get_stream(stream).await?;
    Ok(s.consumer_names().try_collect().await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_creates_every_stream_bucket_and_consumer() -> anyhow::Result<()> {
    let stack = Stack::start();
    let (code, out, err) = caucus(
        &stack,
        &["--json", "init", "--agent-types", "valuation,BRK.B"],
    );
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    let done: Initialised = serde_json::from_str(&out)?;
    let subjects = Subjects::default();

    let client = async_nats::connect(stack.nats.url()).await?;
    let js = jetstream::new(client);
    for kind in StreamKind::ALL {
        let name = subjects.stream(kind);
        assert!(done.streams.contains(&name), "{name} listed: {done:?}");
        js.get_stream(&name).await?;
    }
    for bucket in [
        "caucus_debates",
        "caucus_credibility",
        "caucus_facilitator",
        "caucus_correlations",
    ] {
        assert!(
            done.buckets.iter().any(|b| b == bucket),
            "{bucket} listed: {done:?}"
        );
        js.get_key_value(bucket).await?;
    }
    let want = [
        ("CAUCUS_TASKS", "workers-valuation"),
        ("CAUCUS_TASKS", "workers-BRK~2EB"),
        ("CAUCUS_MESSAGES", "agents-valuation"),
        ("CAUCUS_MESSAGES", "agents-BRK~2EB"),
        ("CAUCUS_MESSAGES", consumers::FACILITATOR_MESSAGES),
        ("CAUCUS_MESSAGES", consumers::FACILITATOR_BROADCASTS),
        ("CAUCUS_DEBATES", consumers::FACILITATOR_DEBATES),
        ("CAUCUS_FAILURES", consumers::CORRELATOR),
    ];
    for (stream, consumer) in want {
        let listed = format!("{consumer} on {stream}");
        assert!(
            done.consumers.contains(&listed),
            "{listed} listed: {done:?}"
        );
        assert!(
            consumer_names(&js, stream).await?.contains(consumer),
            "{consumer} exists on {stream}"
        );
    }
    assert_eq!(done.consumers.len(), want.len(), "nothing else: {done:?}");

    // A second run changes nothing and succeeds.
    let (code, out, err) = caucus(&stack, &["init", "--agent-types", "valuation"]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert!(out.contains("workers-valuation on CAUCUS_TASKS"), "{out}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_init_a_facilitator_starts_without_a_coordinator() -> anyhow::Result<()> {
    let stack = Stack::start();
    init(&stack, &[], &[]);
    let mut facilitator = stack.service("caucus-facilitator").spawn();
    assert!(
        facilitator.ready_within(Duration::from_secs(30)),
        "facilitator ready after init: {}",
        facilitator.output()
    );
    let (code, out, err) = caucus(&stack, &["health", "facilitator"]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    assert!(
        !facilitator.output().contains("does not exist"),
        "{}",
        facilitator.output()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_started_before_the_coordinator_waits_then_proceeds() -> anyhow::Result<()> {
    let stack = Stack::start();
    // A type no built-in pipeline uses: the coordinator learns it from the
    // worker's capacity registration.
    let agent = "topology_probe";
    let mut worker = stack.service("caucus-worker");
    for (k, v) in fast_env() {
        worker = worker.env(k, v);
    }
    let mut worker = worker.args(["--agent", agent, "--handler", "noop"]).spawn();
    worker.wait_for_output(
        "stream CAUCUS_TASKS does not exist yet: the coordinator creates it at start",
        Duration::from_secs(20),
    );
    assert!(worker.running(), "still waiting: {}", worker.output());
    assert!(
        !worker.output().contains("service ready"),
        "{}",
        worker.output()
    );

    let _coordinator = crate::common::coordinator(&stack, &[]);
    assert!(
        worker.ready_within(Duration::from_secs(30)),
        "worker ready once the coordinator runs: {}",
        worker.output()
    );
    // The coordinator created the type's consumers when it saw the worker
    // register, and the worker pulls from its own.
    let client = async_nats::connect(stack.nats.url()).await?;
    let js = jetstream::new(client);
    let name = consumers::task_consumer_name(agent);
    let waiting = eventually(
        "the worker pulls from its consumer",
        Duration::from_secs(30),
        || {
            let js = js.clone();
            let name = name.clone();
            async move {
                let mut c: jetstream::consumer::PullConsumer = js
                    .get_consumer_from_stream(&name, "CAUCUS_TASKS")
                    .await
                    .ok()?;
                let info = c.info().await.ok()?;
                (info.num_waiting > 0).then_some(info.num_waiting)
            }
        },
    )
    .await;
    assert!(waiting > 0);
    // The coordinator creates the type's task consumer, then its inbox: a
    // `noop` worker binds only the first and may pull before the second
    // exists.
    let inbox = consumers::inbox_consumer_name(agent);
    eventually(
        &format!("agents-{agent} to be created too"),
        Duration::from_secs(30),
        || {
            let js = js.clone();
            let inbox = inbox.clone();
            async move {
                consumer_names(&js, "CAUCUS_MESSAGES")
                    .await
                    .ok()?
                    .contains(&inbox)
                    .then_some(())
            }
        },
    )
    .await;
    assert!(worker.running(), "{}", worker.output());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_init_a_correlator_starts_without_a_coordinator() -> anyhow::Result<()> {
    let stack = Stack::start();
    init_topology(&stack, &[]).await?;
    let mut correlator = stack.service("caucus-correlator").spawn();
    assert!(
        correlator.ready_within(Duration::from_secs(30)),
        "correlator ready after init: {}",
        correlator.output()
    );
    let (code, out, err) = caucus(&stack, &["health", "correlator"]);
    assert_eq!(code, 0, "stdout: {out}\nstderr: {err}");
    Ok(())
}
