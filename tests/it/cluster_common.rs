//! Helpers for the tests on clustered servers (a NATS cluster, a Redis
//! Cluster): processes wired by an environment list instead of a
//! [`caucus_harness::Stack`], a status poll that rides out a server's
//! death, the two-stage run the fault tests submit, and the checks every
//! fault test makes (each recorded completion applied once, capacity never
//! exceeded).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use async_nats::jetstream;
use caucus_harness::{bin_path, NatsCluster, RedisCluster, Service, ServiceBuilder};
use caucus_shared::nats::api_request;
use caucus_shared::subjects::Subjects;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use crate::common::{fast_env, peak_concurrency, pipeline, task_events, Api};

/// Error codes of an API call that mean "not now": a coordinator standing
/// by or reconnecting, or a request lost with the server it went through.
const TRANSIENT: [&str; 4] = ["standby", "unavailable", "no_responders", "timeout"];

/// Services started so far (numbers their log files).
static SERVICES: AtomicUsize = AtomicUsize::new(0);

/// The environment pointing caucus processes at clustered servers.
#[derive(Debug, Clone)]
pub struct ClusterEnv {
    nats_url: String,
    vars: Vec<(String, String)>,
    /// Where the processes' logs go (kept for a post-mortem), if anywhere.
    log_dir: Option<PathBuf>,
}

impl ClusterEnv {
    /// Processes on the NATS seed list `nats_url` with R3 streams, consumers
    /// and buckets, and on Redis at `redis_url`.
    pub fn new(nats_url: String, redis_url: String) -> ClusterEnv {
        ClusterEnv {
            vars: vec![
                ("CAUCUS_NATS_URL".into(), nats_url.clone()),
                ("CAUCUS_NATS_REPLICAS".into(), "3".into()),
                ("CAUCUS_REDIS_URL".into(), redis_url),
            ],
            nats_url,
            log_dir: None,
        }
    }

    /// What the fault tests on `nats` and `redis` (a Redis Cluster) run
    /// with: `coordinator.leader_lease` `leader_lease` (whole seconds), at
    /// most `cap` alpha tasks at once, logs in the NATS cluster's dir, and
    /// worker timings whose silence (ack_wait + lease_ttl) outlasts a
    /// stream's leader election (4 to 9 s) and whose capacity lease
    /// outlasts a Redis failover (node timeout 1 s plus the election), as
    /// the defaults (30 s + 10 s) do.
    pub fn for_faults(
        nats: &NatsCluster,
        redis: &RedisCluster,
        leader_lease: Duration,
        cap: usize,
    ) -> ClusterEnv {
        ClusterEnv::new(nats.url(), redis.url())
            .with("CAUCUS_REDIS_MODE", "cluster")
            .with(
                "CAUCUS_COORDINATOR_LEADER_LEASE",
                &format!("{}s", leader_lease.as_secs()),
            )
            .with("CAUCUS_WORKER_ACK_WAIT", "10s")
            .with("CAUCUS_WORKER_LEASE_TTL", "6s")
            .with("CAUCUS_WORKER_HEARTBEAT_INTERVAL", "300ms")
            .with("CAUCUS_WORKER_CAPACITY_CAP__ALPHA", &cap.to_string())
            .logs_in(nats.dir())
    }

    /// The same with every process's output in `<dir>/<bin>-<n>.log`.
    pub fn logs_in(mut self, dir: &Path) -> ClusterEnv {
        self.log_dir = Some(dir.to_path_buf());
        self
    }

    /// The same with `key = value` added (e.g. `CAUCUS_REDIS_MODE`).
    pub fn with(mut self, key: &str, value: &str) -> ClusterEnv {
        self.vars.push((key.into(), value.into()));
        self
    }

    /// The fast timings of [`fast_env`], then this environment's own
    /// variables (which win).
    fn env(&self) -> Vec<(String, String)> {
        fast_env()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .chain(self.vars.iter().cloned())
            .collect()
    }

    /// A builder for `bin` with this environment and `extra`.
    fn service(&self, bin: &str, extra: &[(&str, &str)]) -> ServiceBuilder {
        let mut b = ServiceBuilder::new(bin);
        if let Some(dir) = &self.log_dir {
            let n = SERVICES.fetch_add(1, Ordering::Relaxed);
            b = b.log_file(dir.join(format!("{bin}-{n}.log")));
        }
        for (k, v) in self.env() {
            b = b.env(k, v);
        }
        for (k, v) in extra {
            b = b.env(*k, *v);
        }
        b
    }

    /// Starts a coordinator.
    pub fn coordinator(&self, extra: &[(&str, &str)]) -> Service {
        self.service("caucus-coordinator", extra).start()
    }

    /// Starts a worker for `agents` (comma separated) after `caucus init`
    /// made their consumers.
    pub fn worker(
        &self,
        agents: &str,
        slots: u32,
        handler: &str,
        extra: &[(&str, &str)],
    ) -> Service {
        self.init(&agents.split(',').collect::<Vec<_>>());
        self.service("caucus-worker", extra)
            .args([
                "--agent",
                agents,
                "--slots",
                &slots.to_string(),
                "--handler",
                handler,
            ])
            .start()
    }

    /// Runs `caucus init` for `agent_types` (streams, buckets, consumers).
    pub fn init(&self, agent_types: &[&str]) {
        let mut cmd = std::process::Command::new(bin_path("caucus"));
        cmd.arg("init")
            .arg("--agent-types")
            .arg(agent_types.join(","))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("CAUCUS_HOME", "/nonexistent")
            .envs(self.env());
        let out = cmd.output().expect("run caucus init");
        assert!(
            out.status.success(),
            "caucus init failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A client for the test itself, on the whole seed list (it reconnects
    /// to another node when its own dies).
    pub async fn api(&self) -> Api {
        let seeds: Vec<async_nats::ServerAddr> = self
            .nats_url
            .split(',')
            .map(|u| u.parse().expect("a NATS URL"))
            .collect();
        Api {
            nats: async_nats::connect(seeds).await.expect("connect"),
            subjects: Subjects::default(),
        }
    }
}

/// What the fault tests on clustered servers run: two workers for
/// `alpha,beta` (2 slots each, 60 ms tasks) and the pipeline `two`, `x` on
/// alpha then `y` on beta, so a fault meets tasks of both agent types.
pub struct TwoStages {
    /// The workers, held so that they run until the test ends.
    _workers: Vec<Service>,
    /// The test's client, on the whole seed list.
    pub api: Api,
    /// The pipeline `two`, as a submission carries it.
    pub pipeline: Value,
}

impl TwoStages {
    /// The pipeline's stage names.
    pub const STAGES: [&'static str; 2] = ["x", "y"];

    /// Starts the two workers on `env` with `extra` (after the
    /// coordinators, which the caller starts) and connects the client.
    pub async fn start(env: &ClusterEnv, extra: &[(&str, &str)]) -> TwoStages {
        TwoStages {
            _workers: (0..2)
                .map(|_| env.worker("alpha,beta", 2, "sleep:60", extra))
                .collect(),
            api: env.api().await,
            pipeline: pipeline(
                "two",
                json!([
                    {"name": "x", "agent": "alpha", "expected_duration": 1.0},
                    {"name": "y", "agent": "beta", "expected_duration": 1.0, "depends_on": ["x"]}
                ]),
            ),
        }
    }

    /// Submits one workflow of the pipeline per number of `numbers`; see
    /// [`submit_numbered`].
    pub async fn submit(
        &self,
        prefix: &str,
        numbers: impl IntoIterator<Item = usize>,
    ) -> Vec<String> {
        submit_numbered(&self.api, self.pipeline.clone(), prefix, numbers).await
    }

    /// After a fault: one more workflow (`<prefix><batch.len()>`), then the
    /// checks every fault test makes on it and `batch`: each completed,
    /// each recorded completion applied once, never more than `cap` alpha
    /// tasks at once.
    pub async fn one_more_and_check(
        &self,
        prefix: &str,
        batch: Vec<String>,
        cap: usize,
    ) -> Checked {
        let api = &self.api;
        let last = self.submit(prefix, [batch.len()]).await;
        wait_completed(api, &last, 1, Duration::from_secs(60)).await;

        let all = [batch, last].concat();
        let wfs = status(api, &all, Instant::now() + Duration::from_secs(30)).await;
        assert_eq!(wfs.len(), all.len());
        let events = task_events(&api.nats).await;
        let reruns = assert_each_completion_applied_once(&wfs, &TwoStages::STAGES, &events);
        let peak = peak_concurrency(&events, "alpha");
        assert!(peak <= cap, "{peak} alpha runs at once with a cap of {cap}");
        Checked { all, reruns, peak }
    }
}

/// What [`TwoStages::one_more_and_check`] found.
pub struct Checked {
    /// Every workflow's id: the batch's, then the last one's.
    pub all: Vec<String>,
    /// How many tasks ran more than once.
    pub reruns: u64,
    /// The most alpha tasks that ran at once.
    pub peak: usize,
}

/// Brings back the SIGKILLed NATS `node` and Redis `master` (as a replica,
/// once the cluster has promoted another).
pub fn bring_back(nats: &mut NatsCluster, node: usize, redis: &mut RedisCluster, master: usize) {
    tokio::task::block_in_place(|| {
        redis.wait_failover();
        redis.restart(master);
        nats.restart(node);
    });
}

/// Submits one workflow of `pipeline` per number `n` of `numbers`, its item
/// `<prefix><n>` (10 ms time unit); returns their ids in that order.
pub async fn submit_numbered(
    api: &Api,
    pipeline: Value,
    prefix: &str,
    numbers: impl IntoIterator<Item = usize>,
) -> Vec<String> {
    let items: Vec<String> = numbers
        .into_iter()
        .map(|n| format!("{prefix}{n}"))
        .collect();
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    api.submit(&refs, pipeline, 10).await
}

/// The status of `ids`, retrying (until `deadline`) the answers a server's
/// or the leader's death causes for a while.
pub async fn status(api: &Api, ids: &[String], deadline: Instant) -> Vec<Value> {
    let body = json!({"ids": ids, "tasks": true});
    loop {
        let r = api_request(
            &api.nats,
            &api.subjects,
            "coordinator",
            "status",
            &body,
            Duration::from_secs(5),
        )
        .await;
        match r {
            Ok(r) => return r["workflows"].as_array().cloned().unwrap_or_default(),
            Err(e) if TRANSIENT.contains(&e.code.as_str()) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("status: {e:?}"),
        }
    }
}

/// How many of `ids` are completed (panics if one failed).
pub async fn completed(api: &Api, ids: &[String], deadline: Instant) -> usize {
    let wfs = status(api, ids, deadline).await;
    if let Some(f) = wfs.iter().find(|w| w["state"] == "failed") {
        panic!("workflow failed: {f}");
    }
    wfs.iter().filter(|w| w["state"] == "completed").count()
}

/// Polls until at least `n` of `ids` are completed; returns when.
pub async fn wait_completed(api: &Api, ids: &[String], n: usize, timeout: Duration) -> Instant {
    let deadline = Instant::now() + timeout;
    loop {
        let done = completed(api, ids, deadline).await;
        if done >= n {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "only {done} of {n} workflows completed within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Asserts that every task of `wfs` (stages `stages`) is completed and
/// that the attempt its record names has exactly one `completed` event in
/// `events`; returns how many tasks ran more than once.
pub fn assert_each_completion_applied_once(
    wfs: &[Value],
    stages: &[&str],
    events: &[Value],
) -> u64 {
    let mut completions: HashMap<(String, u64), usize> = HashMap::new();
    for e in events.iter().filter(|e| e["status"] == "completed") {
        *completions
            .entry((
                e["task_id"].as_str().unwrap().to_string(),
                e["attempt"].as_u64().unwrap(),
            ))
            .or_default() += 1;
    }
    let mut reruns = 0;
    for w in wfs {
        assert_eq!(w["state"], "completed", "{w}");
        for k in stages {
            let t = &w["tasks"][k];
            assert_eq!(t["state"], "completed", "{w}");
            let id = format!("{}/{k}", w["workflow_id"].as_str().unwrap());
            let attempt = t["attempt"].as_u64().unwrap();
            assert_eq!(
                completions.get(&(id.clone(), attempt)),
                Some(&1),
                "{id} attempt {attempt}"
            );
            reruns += attempt - 1;
        }
    }
    reruns
}

/// The RAFT leader of `stream` and how many of its peers are current,
/// as the cluster reports them now (`(None, 0)` when nobody answers within
/// 250 ms: a stream without a leader does not answer at all).
pub async fn stream_cluster(nats: &async_nats::Client, stream: &str) -> (Option<String>, usize) {
    let js = jetstream::ContextBuilder::new()
        .timeout(Duration::from_millis(250))
        .build(nats.clone());
    let Ok(mut s) = js.get_stream(stream).await else {
        return (None, 0);
    };
    let Ok(info) = s.info().await else {
        return (None, 0);
    };
    let cluster = info.cluster.clone().unwrap_or_default();
    let current = cluster.replicas.iter().filter(|p| p.current).count();
    (cluster.leader, current)
}

/// The longest wait, from `from` on, for the next `completed` event
/// (by the events' own times): how long a fault at `from` stalled the
/// batch.
pub fn longest_stall(events: &[Value], from: DateTime<Utc>) -> Duration {
    let mut ats: Vec<DateTime<Utc>> = events
        .iter()
        .filter(|e| e["status"] == "completed")
        .filter_map(|e| e["at"].as_str()?.parse().ok())
        .filter(|at| *at >= from)
        .collect();
    ats.sort();
    let mut last = from;
    let mut longest = chrono::Duration::zero();
    for at in ats {
        longest = longest.max(at - last);
        last = at;
    }
    longest.to_std().unwrap_or_default()
}
