//! Scenario 9: the cost of authentication. Scenario 1's no-op throughput
//! workload, run on plain servers and on servers configured by
//! `caucus auth init` (nats-server with `nats.conf`'s users and
//! permissions, redis-server with `redis-users.acl`, every process with its
//! role's env file, the submits as the operator), alternating
//! plain, auth, auth, plain, … so a drift of the machine's load weighs on
//! both sides alike.

use std::time::Duration;

use anyhow::{Context as _, Result};
use caucus_harness::{read_env_file, SecuredStack};
use caucus_shared::auth::{init, InitOptions};

use crate::support::{coordinator_from, server_pid, worker_from, Api, STOCK_AGENTS};
use crate::throughput::{self, measure, Rig, Run};

/// How long the last completion may take to arrive.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Every run of the comparison, in the order they ran.
pub struct Comparison {
    /// (authentication on, result).
    pub runs: Vec<(bool, Run)>,
}

impl Comparison {
    /// Mean tasks/s of the runs with authentication `on` (or off).
    pub fn mean(&self, on: bool) -> f64 {
        let tps: Vec<f64> = self
            .runs
            .iter()
            .filter(|(a, _)| *a == on)
            .map(|(_, r)| r.tasks_per_sec())
            .collect();
        tps.iter().sum::<f64>() / tps.len().max(1) as f64
    }
}

/// `rounds` pairs of runs (`workers` processes of `slots` slots,
/// `n_items` stock-analysis items each), ordered plain/auth in even rounds
/// and auth/plain in odd ones.
pub async fn run(rounds: usize, workers: usize, slots: u32, n_items: usize) -> Result<Comparison> {
    let mut runs = Vec::with_capacity(2 * rounds);
    for round in 0..rounds {
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for on in order {
            let r = if on {
                secured(workers, slots, n_items).await?
            } else {
                throughput::run_on(
                    caucus_harness::Stack::start(),
                    workers,
                    slots,
                    n_items,
                    TIMEOUT,
                )
                .await?
            };
            runs.push((on, r));
        }
    }
    Ok(Comparison { runs })
}

/// One run with authentication on, on fresh servers and fresh credentials.
async fn secured(workers: usize, slots: u32, n_items: usize) -> Result<Run> {
    let tmp = tempfile::Builder::new()
        .prefix("caucus-bench-auth-")
        .tempdir()?;
    let dir = tmp.path().join("auth");
    init(&InitOptions {
        dir: dir.clone(),
        prefix: "caucus".into(),
        operators: vec![],
        rotate: false,
    })
    .context("caucus auth init")?;
    let stack = SecuredStack::start(&dir);
    // The coordinator first: it alone creates the streams and the
    // workers' consumers, which the workers bind to.
    let coordinator = coordinator_from(stack.service("caucus-coordinator", "coordinator.env"));
    let workers: Vec<_> = (0..workers)
        .map(|_| {
            worker_from(
                stack.service("caucus-worker", "worker.env"),
                STOCK_AGENTS,
                slots,
                "noop",
            )
        })
        .collect();
    let api = Api::with_client(connect_as(&stack, "operator.env").await?);
    // The operator may not subscribe to events nor read stream counts: the
    // bench's own counting runs as the admin.
    let observer = connect_as(&stack, "admin.env").await?;
    let rig = Rig {
        coordinator,
        others: Vec::new(),
        workers,
        api,
        observer,
        nats_pids: stack.nats.pid().into_iter().collect(),
        redis_pid: server_pid("redis-server", stack.redis.port()),
    };
    // `stack` and `tmp` outlive the measurement.
    measure(rig, slots, n_items, TIMEOUT).await
}

/// A NATS connection with the user and password of env file `file`.
async fn connect_as(stack: &SecuredStack, file: &str) -> Result<async_nats::Client> {
    let env = read_env_file(&stack.auth_dir.join(file));
    let get = |k: &str| {
        env.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .with_context(|| format!("{file}: no {k}"))
    };
    let nats = async_nats::ConnectOptions::with_user_and_password(
        get("CAUCUS_NATS_USER")?,
        get("CAUCUS_NATS_PASSWORD")?,
    )
    .connect(stack.nats.url())
    .await
    .with_context(|| format!("connect as {file}"))?;
    Ok(nats)
}
