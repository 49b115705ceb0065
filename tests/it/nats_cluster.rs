//! A 3-node NATS JetStream cluster with `nats.replicas = 3`: every stream,
//! KV bucket and durable consumer is replicated three times; a batch runs
//! through the SIGKILL of the node leading the tasks stream and then of a
//! node leading neither it nor the meta group; every workflow completes,
//! each recorded completion is applied once, the capacity cap holds, and
//! after the nodes come back another workflow runs. A submission made
//! while its bucket elects a leader waits for it instead of failing.

use std::time::{Duration, Instant};

use async_nats::jetstream;
use caucus_harness::{NatsCluster, Redis, Service};
use chrono::{DateTime, Utc};
use futures::TryStreamExt;

use crate::cluster_common::{
    assert_each_completion_applied_once, longest_stall, status, stream_cluster, wait_completed,
    ClusterEnv, TwoStages,
};
use crate::common::{peak_concurrency, task_events, Api};

const TASKS: &str = "CAUCUS_TASKS";
const CAP: &str = "2";

/// Every stream (buckets included) has 3 replicas, and every durable
/// consumer is replicated on the two other nodes.
async fn assert_replicated(api: &Api) {
    let js = jetstream::new(api.nats.clone());
    let streams: Vec<_> = js.streams().try_collect().await.expect("streams");
    assert!(streams.len() > 5, "{} streams", streams.len());
    let mut durables = 0;
    for s in &streams {
        let name = &s.config.name;
        assert_eq!(s.config.num_replicas, 3, "stream {name}");
        let stream = js.get_stream(name).await.expect("stream");
        let consumers: Vec<_> = stream.consumers().try_collect().await.expect("consumers");
        for c in consumers.iter().filter(|c| c.config.durable_name.is_some()) {
            let peers = c.cluster.as_ref().map_or(0, |cl| cl.replicas.len());
            assert_eq!(peers, 2, "consumer {} on {name}: {:?}", c.name, c.cluster);
            durables += 1;
        }
    }
    assert!(durables > 3, "{durables} durable consumers");
}

/// Waits until `stream` has a leader and both followers are current.
async fn wait_stream_whole(api: &Api, stream: &str, timeout: Duration) -> String {
    crate::common::eventually(
        &format!("{stream} led with two current followers"),
        timeout,
        || async {
            match stream_cluster(&api.nats, stream).await {
                (Some(leader), 2) => Some(leader),
                _ => None,
            }
        },
    )
    .await
}

/// Waits until every stream (buckets included) has a leader and both
/// followers current: a node that came back has caught up everywhere.
async fn wait_all_whole(api: &Api, timeout: Duration) {
    let js = jetstream::new(api.nats.clone());
    crate::common::eventually(
        "every stream led with two current followers",
        timeout,
        || async {
            let streams: Vec<_> = js.stream_names().try_collect().await.ok()?;
            for s in &streams {
                if !matches!(stream_cluster(&api.nats, s).await, (Some(_), 2)) {
                    return None;
                }
            }
            Some(())
        },
    )
    .await
}

/// Kills node `victim` once `some` of `ids` are completed; returns when.
async fn kill_mid_run(
    cluster: &mut NatsCluster,
    api: &Api,
    ids: &[String],
    some: usize,
    victim: usize,
) -> DateTime<Utc> {
    wait_completed(api, ids, some, Duration::from_secs(60)).await;
    cluster.kill(victim);
    Utc::now()
}

/// How long after `killed` the tasks stream has a leader other than
/// `victim` (its RAFT election).
async fn new_leader_after(api: &Api, victim: &str, killed: DateTime<Utc>) -> Duration {
    crate::common::eventually(
        "a new tasks stream leader",
        Duration::from_secs(30),
        || async {
            let (leader, _) = stream_cluster(&api.nats, TASKS).await;
            leader.filter(|l| l != victim).map(|_| ())
        },
    )
    .await;
    (Utc::now() - killed).to_std().unwrap_or_default()
}

/// A 3-node cluster and Redis, a coordinator and the [`TwoStages`]
/// workers, after one workflow (`C0`) ran end to end: the coordinator has
/// made everything it makes lazily (per agent type, per bucket).
struct Rig {
    cluster: NatsCluster,
    redis: Redis,
    coordinator: Service,
    run: TwoStages,
    first: Vec<String>,
}

impl Rig {
    /// `vars` go to every process, after the rig's own.
    async fn start(vars: &[(&str, &str)]) -> Rig {
        let cluster = NatsCluster::start();
        let redis = Redis::start();
        // A task is silent after ack_wait + lease_ttl; while a stream
        // elects a new leader (the RAFT election timeout is 4 to 9 s) no
        // event gets through, so silence must take longer than that, as it
        // does with the defaults (30 s + 10 s).
        let env = vars.iter().fold(
            ClusterEnv::new(cluster.url(), redis.url())
                .with("CAUCUS_WORKER_ACK_WAIT", "10s")
                .logs_in(cluster.dir()),
            |env, (k, v)| env.with(k, v),
        );
        let cap = [("CAUCUS_WORKER_CAPACITY_CAP__ALPHA", CAP)];
        let coordinator = env.coordinator(&[]);
        let run = TwoStages::start(&env, &cap).await;
        let first = run.submit("C", [0]).await;
        wait_completed(&run.api, &first, 1, Duration::from_secs(60)).await;
        Rig {
            cluster,
            redis,
            coordinator,
            run,
            first,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_survives_a_stream_leader_and_a_follower_dying() {
    // Every part bound, so that all of them run until the test ends.
    let Rig {
        mut cluster,
        redis: _redis,
        coordinator: _coordinator,
        run,
        first,
    } = Rig::start(&[]).await;
    let api = &run.api;
    assert_replicated(api).await;

    // The tasks stream's leader dies mid-batch.
    let batch = run.submit("C", 1..=30).await;
    let leader = wait_stream_whole(api, TASKS, Duration::from_secs(10)).await;
    let leader = cluster.index_of(&leader).expect("a node of ours");
    let meta = cluster.meta_leader();
    let killed = kill_mid_run(&mut cluster, api, &batch, 3, leader).await;
    let elected = new_leader_after(api, &cluster.server_name(leader), killed).await;
    wait_completed(api, &batch, batch.len(), Duration::from_secs(90)).await;
    let events = task_events(&api.nats).await;
    eprintln!(
        "tasks stream leader n{leader} (meta leader {meta:?}) killed: new leader within {elected:?}, \
         longest pause between completions {:?}, batch done {:?} after the kill",
        longest_stall(&events, killed),
        (Utc::now() - killed).to_std().unwrap_or_default()
    );

    // It comes back and catches up; then a follower of both the tasks
    // stream and the meta group dies mid-batch.
    let back = Instant::now();
    cluster.restart(leader);
    wait_all_whole(api, Duration::from_secs(60)).await;
    let new_leader = wait_stream_whole(api, TASKS, Duration::from_secs(30)).await;
    eprintln!(
        "n{leader} back and every stream whole in {:?}",
        back.elapsed()
    );
    let new_leader = cluster.index_of(&new_leader).expect("a node of ours");
    let meta = cluster.meta_leader().expect("a meta leader");
    let follower = (0..3)
        .find(|&i| i != new_leader && i != meta)
        .expect("three nodes, two leaders at most");
    let second = run.submit("C", 31..=45).await;
    let killed = kill_mid_run(&mut cluster, api, &second, 2, follower).await;
    wait_completed(api, &second, second.len(), Duration::from_secs(90)).await;
    let events = task_events(&api.nats).await;
    eprintln!(
        "follower n{follower} killed: longest pause between completions {:?}, batch done {:?} after the kill",
        longest_stall(&events, killed),
        (Utc::now() - killed).to_std().unwrap_or_default()
    );
    cluster.restart(follower);
    wait_all_whole(api, Duration::from_secs(60)).await;

    // Whole again: one more workflow.
    let last = run.submit("C", [46]).await;
    wait_completed(api, &last, 1, Duration::from_secs(30)).await;

    let all: Vec<String> = [first, batch, second, last].concat();
    let wfs = status(api, &all, Instant::now() + Duration::from_secs(30)).await;
    assert_eq!(wfs.len(), 47);
    let events = task_events(&api.nats).await;
    let reruns = assert_each_completion_applied_once(&wfs, &TwoStages::STAGES, &events);
    let peak = peak_concurrency(&events, "alpha");
    assert!(
        peak <= CAP.parse().unwrap(),
        "{peak} alpha runs at once with a cap of {CAP}"
    );
    eprintln!("{reruns} tasks ran again; alpha peak {peak}");
}

/// The node leading the bucket that indexes unfinished workflows dies,
/// and a submission comes at once: while the bucket elects a leader every
/// write to it goes unanswered, and the submission waits (up to
/// `nats.election_wait`) instead of failing with nothing stored.
#[tokio::test(flavor = "multi_thread")]
async fn a_submission_waits_while_its_bucket_elects_a_leader() {
    let Rig {
        mut cluster,
        redis: _redis,
        coordinator: _coordinator,
        run,
        ..
    } = Rig::start(&[("CAUCUS_NATS_ELECTION_WAIT", "30s")]).await;
    let api = &run.api;

    let active = format!("KV_{}", api.subjects.bucket("workflows_active"));
    let leader = wait_stream_whole(api, &active, Duration::from_secs(10)).await;
    let victim = cluster.index_of(&leader).expect("a node of ours");
    cluster.kill(victim);
    let asked = Instant::now();
    let body = serde_json::json!({"items": ["E1", "E2"], "pipeline": run.pipeline,
                                  "time_unit_ms": 10});
    let reply = loop {
        // Longer than an election (the RAFT election timeout, 4 to 9 s).
        let r = caucus_shared::nats::api_request(
            &api.nats,
            &api.subjects,
            "coordinator",
            "submit",
            &body,
            Duration::from_secs(40),
        )
        .await;
        match r {
            // Our connection, or the coordinator's, was to the dead node
            // and the request reached no coordinator: as the CLI does.
            Err(e) if e.code == "no_responders" && asked.elapsed() < Duration::from_secs(10) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            r => break r,
        }
    }
    .expect("the submission waits for the bucket's new leader");
    let took = asked.elapsed();
    let (new_leader, _) = stream_cluster(&api.nats, &active).await;
    eprintln!("{active} leader n{victim} killed: submit answered after {took:?}, new leader {new_leader:?}");
    let ids: Vec<String> = serde_json::from_value(reply["workflow_ids"].clone()).expect("ids");
    assert_eq!(ids.len(), 2);
    wait_completed(api, &ids, 2, Duration::from_secs(90)).await;
}

/// Two administrators creating a fresh cluster's topology at once (the
/// coordinator and `caucus init`, or two coordinators) both finish at
/// once: identical creations are answered, and no update collides with a
/// creation still electing its leader (each such collision went unanswered
/// for a whole request timeout: 110 s for two `caucus init`s). Then one
/// left at the default `nats.replicas = 1` scales nothing down.
#[tokio::test(flavor = "multi_thread")]
async fn concurrent_administration_is_quick_and_never_scales_down() {
    let cluster = NatsCluster::start();
    let redis = Redis::start();
    let env = ClusterEnv::new(cluster.url(), redis.url());
    let started = Instant::now();
    std::thread::scope(|s| {
        let a = s.spawn(|| env.init(&["alpha"]));
        env.init(&["alpha"]);
        a.join().expect("the other caucus init");
    });
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "two caucus init took {took:?}"
    );
    let api = env.api().await;
    assert_replicated(&api).await;

    let single = ClusterEnv::new(cluster.url(), redis.url()).with("CAUCUS_NATS_REPLICAS", "1");
    single.init(&["alpha"]);
    assert_replicated(&api).await;
}
