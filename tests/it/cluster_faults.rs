//! Everything clustered at once: a 3-node NATS JetStream cluster (R3), a
//! 6-node Redis Cluster, two coordinators (active and standby) and two
//! workers. Mid-batch the node leading the tasks stream, the Redis master
//! holding the capacity semaphore and the active coordinator are SIGKILLed
//! together: the standby leads within `leader_lease` of the kill (plus its
//! retry period, `leader_lease / 4`, and the Redis failover), every
//! workflow completes, each recorded completion is applied once, and the
//! capacity cap holds; once the nodes are back one more workflow runs.

use std::time::Duration;

use caucus_harness::{NatsCluster, RedisCluster};
use chrono::Utc;

use crate::cluster_common::{
    bring_back, longest_stall, stream_cluster, wait_completed, Checked, ClusterEnv, TwoStages,
};
use crate::common::{leading, task_events, wait_leading};

const CAP: usize = 2;
/// `coordinator.leader_lease` of both coordinators.
const LEADER_LEASE: Duration = Duration::from_secs(2);
/// A Redis Cluster master's replacement as the harness runs it: the
/// `cluster-node-timeout` (1 s) to declare it failed, then the replica's
/// election and the client's slot map refresh.
const REDIS_FAILOVER: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread")]
async fn a_batch_survives_a_nats_node_a_redis_master_and_the_leader_dying_at_once() {
    let mut nats = NatsCluster::start();
    let mut redis = RedisCluster::start();
    let env = ClusterEnv::for_faults(&nats, &redis, LEADER_LEASE, CAP);
    let mut active = env.coordinator(&[]);
    wait_leading(&active, Duration::from_secs(30));
    let mut standby = env.coordinator(&[]);
    let run = TwoStages::start(&env, &[]).await;
    let api = &run.api;
    let batch = run.submit("F", 0..40).await;
    wait_completed(api, &batch, 4, Duration::from_secs(60)).await;
    assert!(leading(&standby).is_none(), "two leaders at once");

    let (tasks_leader, _) = stream_cluster(&api.nats, "CAUCUS_TASKS").await;
    let node = nats
        .index_of(&tasks_leader.expect("a tasks stream leader"))
        .expect("a node of ours");
    let master = redis.master_for("caucus:{sem:alpha}:holders");
    let killed = Utc::now();
    active.kill();
    nats.kill(node);
    redis.kill(master);

    let took = (wait_leading(&standby, Duration::from_secs(30)).at - killed)
        .to_std()
        .unwrap_or_default();
    eprintln!("the standby leads {took:?} after the kill (leader_lease {LEADER_LEASE:?})");
    // The dead leader's lock lapses at most leader_lease after the kill
    // (it was renewed at most then); the standby tries every lease / 4; and
    // while the Redis Cluster replaces the killed master its client stalls
    // (tries get no answer within lease / 4) until the replica is promoted.
    let bound = LEADER_LEASE + LEADER_LEASE / 4 + REDIS_FAILOVER;
    assert!(
        took <= bound,
        "the standby led {took:?} after the kill, over {bound:?} (leader_lease {LEADER_LEASE:?})"
    );
    wait_completed(api, &batch, batch.len(), Duration::from_secs(120)).await;
    let events = task_events(&api.nats).await;
    eprintln!(
        "batch done {:?} after the kill; longest pause between completions {:?}",
        (Utc::now() - killed).to_std().unwrap_or_default(),
        longest_stall(&events, killed)
    );

    // Everything back: one more workflow.
    bring_back(&mut nats, node, &mut redis, master);
    let Checked { reruns, peak, .. } = run.one_more_and_check("F", batch, CAP).await;
    assert!(
        standby.running(),
        "the survivor exited: {}",
        standby.output()
    );
    eprintln!("{reruns} tasks ran again; alpha peak {peak}");
}
