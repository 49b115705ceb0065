//! Helpers shared by the cross-process tests.

use std::collections::HashMap;
use std::future::Future;
use std::time::{Duration, Instant};

use async_nats::jetstream;
use futures::StreamExt;

use caucus_harness::{bin_path, Service, Stack};
use caucus_shared::nats::{api_request, ApiError};
use caucus_shared::subjects::Subjects;
use serde_json::{json, Value};

/// Env that shrinks every duration the runtime uses.
pub fn fast_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("CAUCUS_COORDINATOR_TICK", "50ms"),
        ("CAUCUS_COORDINATOR_LEADER_LEASE", "2s"),
        ("CAUCUS_WORKER_HEARTBEAT_INTERVAL", "200ms"),
        ("CAUCUS_WORKER_LEASE_TTL", "1s"),
        ("CAUCUS_WORKER_FETCH_WAIT", "200ms"),
        ("CAUCUS_WORKER_ACK_WAIT", "2s"),
        ("CAUCUS_SHUTDOWN_GRACE", "10s"),
        ("CAUCUS_TELEMETRY_LOG_LEVEL", "info"),
    ]
}

/// Starts a coordinator on `stack` with `extra` env.
pub fn coordinator(stack: &Stack, extra: &[(&str, &str)]) -> Service {
    let mut b = stack.service("caucus-coordinator");
    for (k, v) in fast_env().into_iter().chain(extra.iter().copied()) {
        b = b.env(k, v);
    }
    b.start()
}

/// Starts a worker for `agents` with `slots` and `handler`.
pub fn worker(
    stack: &Stack,
    agents: &str,
    slots: u32,
    handler: &str,
    extra: &[(&str, &str)],
) -> Service {
    let mut b = stack.service("caucus-worker").args([
        "--agent",
        agents,
        "--slots",
        &slots.to_string(),
        "--handler",
        handler,
    ]);
    for (k, v) in fast_env().into_iter().chain(extra.iter().copied()) {
        b = b.env(k, v);
    }
    // Its consumers come from the coordinator or `caucus init`; tests may
    // start a worker first.
    let types: Vec<&str> = agents.split(',').collect();
    let env: Vec<_> = fast_env()
        .into_iter()
        .chain(extra.iter().copied())
        .collect();
    crate::topology_admin::init(stack, &types, &env);
    b.start()
}

/// A NATS client for the test itself.
pub struct Api {
    pub nats: async_nats::Client,
    pub subjects: Subjects,
}

impl Api {
    pub async fn connect(stack: &Stack) -> Api {
        Api {
            nats: async_nats::connect(stack.nats.url())
                .await
                .expect("connect"),
            subjects: Subjects::default(),
        }
    }

    /// Calls `<service>.<op>`; a coordinator that has not taken (or not
    /// yet re-taken) leadership answers `standby`, which is retried, as the
    /// CLI does.
    pub async fn call(&self, service: &str, op: &str, body: Value) -> Result<Value, ApiError> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let timeout = Duration::from_secs(10);
            let r = api_request(&self.nats, &self.subjects, service, op, &body, timeout).await;
            match r {
                Err(e) if e.code == "standby" && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                r => return r,
            }
        }
    }

    /// Submits and returns the workflow ids.
    pub async fn submit(&self, items: &[&str], pipeline: Value, unit_ms: u64) -> Vec<String> {
        let r = self
            .call(
                "coordinator",
                "submit",
                // Unattended: the built-in pipeline's review gate approves itself
                // (tests of gates submit with their own body).
                json!({"items": items, "pipeline": pipeline, "time_unit_ms": unit_ms,
                       "auto_approve_gates": true}),
            )
            .await
            .expect("submit");
        r["workflow_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    }

    /// Status of `ids`; while a restarted coordinator waits for the old
    /// leader's lock to lapse it answers `standby`, and while it cannot
    /// reach Redis (a fault test just let Redis go again) `unavailable`:
    /// both are retried.
    pub async fn status(&self, ids: &[String]) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match self
                .call("coordinator", "status", json!({"ids": ids, "tasks": true}))
                .await
            {
                Ok(r) => return r["workflows"].as_array().cloned().unwrap_or_default(),
                // A scheduler busy loading the partitions it just took
                // over may answer `timeout`: transient too.
                Err(e)
                    if matches!(e.code.as_str(), "standby" | "unavailable" | "timeout")
                        && Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!("status: {e:?}"),
            }
        }
    }

    /// Polls until at least `n` of `ids` are completed (a batch under way,
    /// ready for a fault).
    pub async fn wait_some_completed(&self, ids: &[String], n: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            let done = self
                .status(ids)
                .await
                .iter()
                .filter(|w| w["state"] == "completed")
                .count();
            if done >= n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "only {done} of {n} completed in time"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Polls until every workflow is completed (panics on failed or timeout).
    pub async fn wait_completed(&self, ids: &[String], timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let wfs = self.status(ids).await;
            if let Some(f) = wfs.iter().find(|w| w["state"] == "failed") {
                panic!("workflow failed: {f}");
            }
            if wfs.len() == ids.len() && wfs.iter().all(|w| w["state"] == "completed") {
                return wfs;
            }
            if Instant::now() > deadline {
                let states: Vec<String> = wfs
                    .iter()
                    .map(|w| format!("{}:{}", w["item"], w["state"]))
                    .collect();
                panic!("timed out waiting for completion: {states:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// An inline pipeline; every agent type it uses gets a planning capacity
/// of 1 (the runtime capacity comes from the registered workers).
pub fn pipeline(name: &str, stages: Value) -> Value {
    let mut caps = serde_json::Map::new();
    for s in stages.as_array().into_iter().flatten() {
        if let Some(a) = s["agent"].as_str() {
            caps.insert(a.to_string(), json!(1));
        }
    }
    json!({"name": name, "stages": stages, "capacities": caps})
}

/// Every task event published so far, read back from the EVENTS stream.
pub async fn task_events(nats: &async_nats::Client) -> Vec<Value> {
    use async_nats::jetstream::consumer::{pull, AckPolicy};
    use futures::StreamExt;
    let js = async_nats::jetstream::new(nats.clone());
    // On a JetStream cluster a node that just came back can leave the
    // stream briefly without a leader to create the reader on: retry.
    let deadline = Instant::now() + Duration::from_secs(30);
    let (consumer, total) = loop {
        let made = async {
            let stream = js.get_stream("CAUCUS_EVENTS").await?;
            let mut c = stream
                .create_consumer(pull::Config {
                    filter_subject: "caucus.events.task.>".into(),
                    ack_policy: AckPolicy::None,
                    ..Default::default()
                })
                .await?;
            let total = c.info().await?.num_pending as usize;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((c, total))
        }
        .await;
        match made {
            Ok(r) => break r,
            Err(e) if Instant::now() < deadline => {
                eprintln!("reading the events stream: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("cannot read the events stream: {e}"),
        }
    };
    let mut out = Vec::with_capacity(total);
    let mut msgs = consumer.messages().await.expect("messages");
    while out.len() < total {
        let m = msgs.next().await.expect("message").expect("ok");
        out.push(serde_json::from_slice(&m.payload).expect("event json"));
    }
    out
}

// ---- shared by the pause/resume and failure-correlation tests ----

/// One message read back from a stream.
#[derive(Debug, Clone)]
pub struct Stored {
    pub subject: String,
    pub msg_id: Option<String>,
    pub dlq_code: Option<String>,
    /// The W3C trace context it was published in, if any.
    pub traceparent: Option<String>,
    pub body: Value,
}

/// Every message on `filter` in `stream` so far.
pub async fn stream_messages(nats: &async_nats::Client, stream: &str, filter: &str) -> Vec<Stored> {
    use async_nats::jetstream::consumer::{pull, AckPolicy};
    let js = jetstream::new(nats.clone());
    let Ok(stream) = js.get_stream(stream).await else {
        return Vec::new();
    };
    let mut consumer = stream
        .create_consumer(pull::Config {
            filter_subject: filter.into(),
            ack_policy: AckPolicy::None,
            ..Default::default()
        })
        .await
        .expect("consumer");
    let total = consumer.info().await.expect("info").num_pending as usize;
    let mut out = Vec::with_capacity(total);
    if total == 0 {
        return out;
    }
    let mut msgs = consumer.messages().await.expect("messages");
    while out.len() < total {
        let m = msgs.next().await.expect("message").expect("ok");
        let header = |k: &str| {
            m.headers
                .as_ref()
                .and_then(|h| h.get(k))
                .map(|v| v.as_str().to_string())
        };
        out.push(Stored {
            subject: m.subject.to_string(),
            msg_id: header("Nats-Msg-Id"),
            dlq_code: header("Caucus-Dlq-Code"),
            traceparent: header("traceparent"),
            body: serde_json::from_slice(&m.payload).unwrap_or(Value::Null),
        });
    }
    out
}

/// Polls `f` until it returns `Some`, or panics naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

/// Waits until workflow `id`'s record as stored in KV (not as `status`
/// answers from memory, up to `coordinator.persist_delay` ahead) satisfies
/// `stored`: what a test must see before SIGKILLing its coordinator when
/// the successor is to carry on from that state.
pub async fn eventually_stored(
    api: &Api,
    id: &str,
    what: &str,
    timeout: Duration,
    stored: impl Fn(&Value) -> bool,
) {
    let records = jetstream::new(api.nats.clone())
        .get_key_value("caucus_workflows")
        .await
        .expect("workflows bucket");
    eventually(what, timeout, || async {
        let raw = records.get(id).await.ok()??;
        let rec: Value = serde_json::from_slice(&raw).ok()?;
        stored(&rec).then_some(())
    })
    .await;
}

/// API call that retries while a restarted coordinator stands by.
pub async fn call(
    api: &Api,
    op: &str,
    body: Value,
) -> Result<Value, caucus_shared::nats::ApiError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match api.call("coordinator", op, body.clone()).await {
            Err(e) if e.code == "standby" && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            r => return r,
        }
    }
}

pub async fn wait_state(api: &Api, id: &str, state: &str) -> Value {
    let ids = vec![id.to_string()];
    eventually(
        &format!("{id} to be {state}"),
        Duration::from_secs(30),
        || async {
            let w = api.status(&ids).await.pop()?;
            (w["state"] == state).then_some(w)
        },
    )
    .await
}

/// Waits for `id` to be paused with its checkpoint taken. The coordinator
/// answers `status` between applying events and its next pump, and it is
/// the pump that stores the checkpoint, publishes `pause_complete`, the
/// alert card and the failure events, and only then sets `checkpoint_id`:
/// a bare `paused` can be seen before any of them exists.
pub async fn wait_paused(api: &Api, id: &str) -> Value {
    let ids = vec![id.to_string()];
    eventually(
        &format!("{id} to be paused with a checkpoint"),
        Duration::from_secs(30),
        || async {
            let w = api.status(&ids).await.pop()?;
            (w["state"] == "paused" && w["pause"]["checkpoint_id"].is_string()).then_some(w)
        },
    )
    .await
}

/// Runs per task id, from the `started`, `completed` and `failed` events:
/// one per (attempt, worker, `started_at`). Every event of a run carries
/// the same `started_at`, and a worker sends no `started` for a run that
/// ends within `worker.started_delay`.
pub async fn starts(api: &Api) -> HashMap<String, usize> {
    let mut runs: HashMap<String, std::collections::HashSet<String>> = HashMap::new();
    for e in task_events(&api.nats).await {
        if matches!(
            e["status"].as_str(),
            Some("started" | "completed" | "failed")
        ) && !e["started_at"].is_null()
        {
            let run = format!("{}|{}|{}", e["attempt"], e["worker_id"], e["started_at"]);
            runs.entry(e["task_id"].as_str().unwrap().to_string())
                .or_default()
                .insert(run);
        }
    }
    runs.into_iter().map(|(k, v)| (k, v.len())).collect()
}

pub async fn publish_envelope(api: &Api, subject: &str, body: Value) {
    let js = jetstream::new(api.nats.clone());
    js.publish(subject.to_string(), body.to_string().into())
        .await
        .unwrap()
        .await
        .unwrap();
}

pub fn alerts_of<'a>(alerts: &'a [Stored], event: &str, wf: &str) -> Vec<&'a Stored> {
    alerts
        .iter()
        .filter(|a| {
            a.body["content"]["event_type"] == event && a.body["content"]["workflow_id"] == wf
        })
        .collect()
}

/// Shell handler for valuation: fails with a Koyfin quota error for the
/// items listed in `named` while the file `broken` exists.
pub fn quota_handler(dir: &std::path::Path) -> String {
    format!(
        "t=$(cat); item=$(printf '%s' \"$t\" | sed -n 's/.*\"item\":\"\\([^\"]*\\)\".*/\\1/p'); \
         if [ -f {b} ] && grep -qx \"$item\" {n}; then \
           echo '{{\"error\":{{\"class\":\"transient\",\"error_type\":\"quota_exceeded\",\
\"message\":\"Koyfin API quota exceeded (1000/1000)\",\"data_source\":\"koyfin\"}}}}'; exit 1; fi; \
         echo '{{\"fair_value\": 1}}'",
        b = dir.join("broken").display(),
        n = dir.join("named").display()
    )
}

/// Runs the `caucus` CLI against `stack` with a clean environment (no
/// repository root, so no local stack.env is picked up); returns the exit
/// code, stdout and stderr.
pub fn caucus(stack: &Stack, args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(bin_path("caucus"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("CAUCUS_NATS_URL", stack.nats.url())
        .env("CAUCUS_REDIS_URL", stack.redis.url())
        .env("CAUCUS_HOME", "/nonexistent")
        .output()
        .expect("run caucus");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Writes `gated.toml` in `dir`: stage `work`, gate `signoff`, stage
/// `after`, all on agent type `gated` with planning capacity `capacity`.
/// Returns its path.
pub fn gated_spec(dir: &std::path::Path, capacity: u32) -> String {
    let spec = dir.join("gated.toml");
    std::fs::write(
        &spec,
        format!(
            "name = \"gated\"\n[capacities]\ngated = {capacity}\n\
             [[stages]]\nname = \"work\"\nagent = \"gated\"\n\
             [[stages]]\nname = \"signoff\"\nkind = \"gate\"\ndepends_on = [\"work\"]\n\
             [[stages]]\nname = \"after\"\nagent = \"gated\"\ndepends_on = [\"signoff\"]\n"
        ),
    )
    .expect("write gated.toml");
    spec.display().to_string()
}

/// Waits (30 s at most) until the correlator holds exactly one correlation
/// and it names `items` items; returns it.
pub async fn one_correlation(api: &Api, items: usize) -> Value {
    eventually(
        &format!("a correlation of {items} items"),
        Duration::from_secs(30),
        || async {
            let v = api
                .call("correlator", "correlations", json!({}))
                .await
                .ok()?;
            let list = v["correlations"].as_array()?.clone();
            (list.len() == 1 && list[0]["items"].as_array()?.len() == items)
                .then(|| list[0].clone())
        },
    )
    .await
}

/// The most runs of `agent_type` at once, from the `started_at` and `at`
/// of every `completed` event (ends sort before starts at one instant).
pub fn peak_concurrency(events: &[Value], agent_type: &str) -> usize {
    use chrono::{DateTime, Utc};
    let ts =
        |v: &Value| -> DateTime<Utc> { v.as_str().expect("timestamp").parse().expect("rfc3339") };
    let mut points: Vec<(DateTime<Utc>, i32)> = Vec::new();
    for e in events
        .iter()
        .filter(|e| e["status"] == "completed" && e["agent_type"] == agent_type)
    {
        points.push((ts(&e["started_at"]), 1));
        points.push((ts(&e["at"]), -1));
    }
    points.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut cur, mut max) = (0i32, 0i32);
    for (_, d) in points {
        cur += d;
        max = max.max(cur);
    }
    max as usize
}

/// The instance id a coordinator's readiness line names.
pub fn instance_id(c: &Service) -> String {
    c.wait_ready();
    let out = c.output();
    let line = out
        .lines()
        .find(|l| l.contains("service ready"))
        .expect("a readiness line");
    let at = line.find("instance_id=").expect("instance_id in the line") + "instance_id=".len();
    line[at..]
        .trim_start_matches('"')
        .split(|c: char| c == '"' || c.is_whitespace())
        .next()
        .expect("an id")
        .to_string()
}

/// When a coordinator logged that it leads, and under which fencing epoch.
#[derive(Debug, Clone, Copy)]
pub struct Leading {
    /// The log line's own time.
    pub at: chrono::DateTime<chrono::Utc>,
    /// The epoch of the leader lock it holds.
    pub epoch: u64,
}

/// The last time `c` logged that it leads, once it has.
pub fn leading(c: &Service) -> Option<Leading> {
    let out = c.output();
    let line = out
        .lines()
        .rev()
        .find(|l| l.contains(" leading ") && l.contains("epoch"))?;
    let at = line.split_whitespace().next()?.parse().ok()?;
    let rest = &line[line.find("epoch")? + "epoch".len()..];
    let digits: String = rest
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    Some(Leading {
        at,
        epoch: digits.parse().ok()?,
    })
}

/// Polls `c`'s log until it says it leads (panics with the log after
/// `timeout`).
pub fn wait_leading(c: &Service, timeout: Duration) -> Leading {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(l) = leading(c) {
            return l;
        }
        assert!(
            Instant::now() < deadline,
            "coordinator never led; output:\n{}",
            c.output()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Partitions the two-coordinator rig divides.
pub const RIG_PARTITIONS: u32 = 4;

/// Two coordinators holding 2 of [`RIG_PARTITIONS`] partitions each, the
/// API client, and each partition's owner.
pub struct TwoCoordinators {
    /// The servers.
    pub stack: Stack,
    /// The coordinators.
    pub c: [Service; 2],
    /// Their instance ids.
    pub ids: [String; 2],
    /// The API client.
    pub api: Api,
    /// The owner (instance id) of each partition.
    pub owner: Vec<String>,
}

impl TwoCoordinators {
    /// Starts both and waits for the 2/2 split.
    pub async fn start() -> TwoCoordinators {
        let stack = Stack::start();
        let partitions = RIG_PARTITIONS.to_string();
        let env = [("CAUCUS_COORDINATOR_PARTITIONS", partitions.as_str())];
        let c1 = coordinator(&stack, &env);
        let c2 = coordinator(&stack, &env);
        let ids = [instance_id(&c1), instance_id(&c2)];
        let api = Api::connect(&stack).await;
        let owner = eventually("a 2/2 split", Duration::from_secs(30), || async {
            let v = call(&api, "partitions", json!({})).await.ok()?;
            let owners: Vec<String> = (0..RIG_PARTITIONS)
                .map(|p| {
                    v["partitions"][p.to_string()]["owner"]
                        .as_str()
                        .map(String::from)
                })
                .collect::<Option<_>>()?;
            let split = ids
                .iter()
                .all(|id| owners.iter().filter(|o| *o == id).count() == 2);
            split.then_some(owners)
        })
        .await;
        TwoCoordinators {
            stack,
            c: [c1, c2],
            ids,
            api,
            owner,
        }
    }
}

/// The keys of the index of unfinished workflows (`workflows_active`)
/// other than its markers (`_index_built`, `_epoch*`): workflows' own keys
/// and index groups' (`_grp.<first id>`).
pub async fn index_keys(nats: &async_nats::Client) -> Vec<String> {
    use futures::TryStreamExt;
    let js = async_nats::jetstream::new(nats.clone());
    let active = js.get_key_value("caucus_workflows_active").await.unwrap();
    let keys: Vec<String> = active.keys().await.unwrap().try_collect().await.unwrap();
    keys.into_iter()
        .filter(|k| k != "_index_built" && !k.starts_with("_epoch"))
        .collect()
}
