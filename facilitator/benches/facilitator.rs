//! Facilitator benchmarks (not tests; `cargo bench -p caucus-facilitator`,
//! after `cargo build --release -p caucus-facilitator`).
//!
//! 1. Level-2 resolutions per second in the pure state machine (open,
//!    ack, evidence, reject, credibility of two 20-record track records,
//!    mediate): the cost of the logic itself.
//! 2. Level-2 resolutions per second end to end: a `caucus-facilitator`
//!    process on real loopback servers, 8 agent pairs in parallel, every
//!    debate opened with the sync lock + flush + snapshot.
//! 3. Sync lock + flush + snapshot with 5 participants (target < 50 ms).

use std::sync::Arc;
use std::time::{Duration, Instant};

use caucus_facilitator::credibility::{
    assess_pair, score, Context, CredibilityParams, CredibilityQuery, TrackRecord,
};
use caucus_facilitator::debate::{
    ChallengeExtensions, Debate, DebateState, ExpertSlot, Snapshot, Timeouts,
};
use caucus_facilitator::service::sync::Snapshotter;
use caucus_harness::Stack;
use caucus_shared::config::{Config, RedisConfig};
use caucus_shared::messages::{Challenge, DebateEvidence, DebateVerdict};
use caucus_shared::nats::{api_request, ensure_streams};
use caucus_shared::subjects::Subjects;
use chrono::Utc;
use futures::StreamExt;
use hdrhistogram::Histogram;
use serde_json::{json, Value};

/// Streams reserve their size cap; a small one keeps the bench runnable on
/// machines with little free disk.
const STREAM_MAX_BYTES: i64 = 64 * 1024 * 1024;

fn records(agent: &str, right: usize, wrong: usize) -> Vec<TrackRecord> {
    let now = Utc::now();
    (0..right + wrong)
        .map(|i| TrackRecord {
            agent: agent.into(),
            outcome: if i < right { 1.0 } else { 0.0 },
            at: now - chrono::Duration::days(i as i64),
            context: Context {
                metric: Some("operating_margin".into()),
                ..Default::default()
            },
            regime: None,
            overridden: false,
        })
        .collect()
}

fn challenge(id: &str, challenger: &str, challenged: &str) -> Value {
    json!({
        "challenge_id": id, "challenger": challenger, "challenged": challenged,
        "disputed_finding": "Operating margin assumption", "challenge_basis": "guidance",
        "required_evidence": [], "escalation_timer": 3600, "priority": "valuation",
        "challenger_position": {"statement": "30%", "metric": "operating_margin", "value": 0.30},
        "challenged_position": {"statement": "25%", "metric": "operating_margin", "value": 0.25}
    })
}

fn pure_l2(n: usize) -> f64 {
    let t = Timeouts::default();
    let p = CredibilityParams::default();
    let a = records("s", 20, 0);
    let b = records("f", 2, 18);
    let q = CredibilityQuery::default();
    let started = Instant::now();
    for i in 0..n {
        let now = Utc::now();
        let c: Challenge = serde_json::from_value(challenge(&format!("B-{i}"), "s", "f")).unwrap();
        let snap = Snapshot {
            snapshot_id: "snap_1".into(),
            taken_at: now,
            flushed: vec![],
            unresponsive: vec![],
        };
        let mut d = Debate::open(c, ChallengeExtensions::default(), snap, now, &t).unwrap();
        d.ack("f", Some("snap_1"), now).unwrap();
        let ev = DebateEvidence {
            debate_id: d.debate_id.clone(),
            evidence: vec!["x".into()],
            position: None,
            revised: false,
            limitations: vec![],
            snapshot_id: Some("snap_1".into()),
        };
        d.add_evidence("f", &ev, now, &t).unwrap();
        let v = DebateVerdict {
            debate_id: d.debate_id.clone(),
            accepted: false,
            reason: None,
            snapshot_id: Some("snap_1".into()),
        };
        d.verdict("s", &v, now, &t).unwrap();
        let sa = score("s", &a, &q, now, &p).unwrap();
        let sb = score("f", &b, &q, now, &p).unwrap();
        d.mediate(now, &t, assess_pair(sa, sb, &p), &ExpertSlot::Full)
            .unwrap();
        assert_eq!((d.level, d.state), (2, DebateState::Resolved));
    }
    n as f64 / started.elapsed().as_secs_f64()
}

/// Answers every flush request on `caucus.msg.>` at once.
async fn responder(nats: async_nats::Client) -> tokio::task::JoinHandle<()> {
    let mut sub = nats.subscribe("caucus.msg.>").await.unwrap();
    nats.flush().await.unwrap();
    tokio::spawn(async move {
        while let Some(m) = sub.next().await {
            let Ok(env) = serde_json::from_slice::<Value>(&m.payload) else {
                continue;
            };
            if env["content"]["query"] != "flush_working_memory" {
                continue;
            }
            let agent = m
                .subject
                .as_str()
                .rsplit('.')
                .next()
                .unwrap_or_default()
                .to_string();
            let reply_to = env["content"]["parameters"]["reply_to"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let answer = json!({"from_agent": agent, "message_type": "confirmation", "correlation_id": env["correlation_id"],
                "content": {"finding": "flush_working_memory", "agrees": true}});
            let _ = nats
                .publish(reply_to, serde_json::to_vec(&answer).unwrap().into())
                .await;
        }
    })
}

async fn call(nats: &async_nats::Client, op: &str, body: Value) -> Value {
    api_request(
        nats,
        &Subjects::default(),
        "facilitator",
        op,
        &body,
        Duration::from_secs(30),
    )
    .await
    .unwrap_or_else(|e| panic!("{op}: {e:?}"))
}

async fn e2e_l2(stack: &Stack, pairs: usize, per_pair: usize) -> f64 {
    // The facilitator binds: create what the coordinator would.
    let mut cfg = Config::default();
    cfg.nats.url = stack.nats.url();
    cfg.nats.stream_max_bytes = STREAM_MAX_BYTES;
    let admin = async_nats::jetstream::new(async_nats::connect(stack.nats.url()).await.unwrap());
    caucus_shared::nats::admin::fixed(&admin, &Subjects::default(), &cfg)
        .await
        .unwrap();
    let _fac = stack
        .service("caucus-facilitator")
        .env("CAUCUS_TELEMETRY_LOG_LEVEL", "info")
        .env("CAUCUS_NATS_STREAM_MAX_BYTES", STREAM_MAX_BYTES.to_string())
        .env("CAUCUS_FACILITATOR_FLUSH_TIMEOUT", "2s")
        .start();
    let nats = async_nats::connect(stack.nats.url()).await.unwrap();
    let _r = responder(nats.clone()).await;
    for p in 0..pairs {
        let recs: Vec<TrackRecord> = records(&format!("s{p}"), 20, 0)
            .into_iter()
            .chain(records(&format!("f{p}"), 2, 18))
            .collect();
        call(&nats, "track_record", json!({ "records": recs })).await;
    }
    let started = Instant::now();
    let mut flows = Vec::new();
    for p in 0..pairs {
        let nats = nats.clone();
        flows.push(tokio::spawn(async move {
            let (s, f) = (format!("s{p}"), format!("f{p}"));
            for i in 0..per_pair {
                let id = format!("E-{p}-{i}");
                let env = json!({"from_agent": s, "message_type": "challenge", "content": challenge(&id, &s, &f)});
                call(&nats, "message", env).await;
                let full = call(&nats, "debate", json!({"debate_id": id})).await;
                let snap = full["snapshot"]["snapshot_id"].clone();
                call(&nats, "message", json!({"from_agent": f, "message_type": "debate_ack", "content": {"debate_id": id, "snapshot_id": snap}})).await;
                call(&nats, "message", json!({"from_agent": f, "message_type": "debate_evidence", "content": {"debate_id": id, "snapshot_id": snap, "evidence": ["x"]}})).await;
                let r = call(&nats, "message", json!({"from_agent": s, "message_type": "debate_verdict", "content": {"debate_id": id, "snapshot_id": snap, "accepted": false}})).await;
                assert_eq!(r["debate"]["level"], 2, "{r}");
                assert_eq!(r["debate"]["state"], "resolved", "{r}");
            }
        }));
    }
    for f in flows {
        f.await.unwrap();
    }
    (pairs * per_pair) as f64 / started.elapsed().as_secs_f64()
}

/// Time of each of `rounds` snapshots (after 5 warm-up ones), in
/// microseconds.
async fn snapshots(stack: &Stack, participants: usize, rounds: usize) -> Histogram<u64> {
    let mut cfg = Config::default();
    cfg.nats.url = stack.nats.url();
    cfg.nats.stream_max_bytes = STREAM_MAX_BYTES;
    let nats = async_nats::connect(stack.nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(nats.clone());
    ensure_streams(&js, &Subjects::default(), &cfg)
        .await
        .unwrap();
    let redis = caucus_shared::redis::connect(&RedisConfig {
        url: stack.redis.url(),
        ..RedisConfig::default()
    })
    .await
    .unwrap();
    let _r = responder(nats.clone()).await;
    let snap = Arc::new(Snapshotter {
        nats: nats.clone(),
        js,
        subjects: Subjects::default(),
        redis,
        lock_ttl: Duration::from_secs(10),
        lock_wait: Duration::from_secs(10),
        flush_timeout: Duration::from_secs(2),
        from: "facilitator".into(),
    });
    let agents: Vec<String> = (0..participants).map(|i| format!("agent{i}")).collect();
    // 3 significant digits: a percentile within 0.1 %.
    let mut out = Histogram::<u64>::new(3).expect("3 significant digits is a valid precision");
    for i in 0..rounds + 5 {
        let t = Instant::now();
        let s = snap
            .snapshot(&format!("S-{i}"), &agents, Utc::now())
            .await
            .unwrap();
        assert_eq!(s.flushed.len(), participants, "{s:?}");
        if i >= 5 {
            out.saturating_record(t.elapsed().as_micros() as u64);
        }
    }
    out
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let pure = pure_l2(20_000);
    println!("pure state machine: {pure:.0} level-2 resolutions/s (20 000 debates, credibility of 2×20 records each)");
    rt.block_on(async {
        let stack = Stack::start();
        let times = snapshots(&stack, 5, 200).await;
        let pct = |q: f64| Duration::from_micros(times.value_at_quantile(q));
        println!(
            "sync lock + flush + snapshot, 5 participants: median {:?}, p95 {:?}, max {:?} (200 rounds; target < 50 ms)",
            pct(0.5),
            pct(0.95),
            Duration::from_micros(times.max())
        );
        let stack = Stack::start();
        let e2e = e2e_l2(&stack, 8, 25).await;
        println!("end to end: {e2e:.1} level-2 resolutions/s (200 debates, 8 agent pairs in parallel, each opened with sync lock + snapshot)");
    });
}
