//! Benchmark of the `caucus-correlator` process (not a test): real
//! nats-server and redis-server from the harness, the release binary, and
//! failures published as an outside service would.
//!
//! 1. Throughput: N failure envelopes are published as fast as the client
//!    can; the clock stops when the correlator's durable consumer has acked
//!    the last one (its effects are done by then). Two workloads:
//!    - `storm`: 20 open incidents (20 signatures × 50 items, opened in a
//!      warm-up), then failures cycling over those 1 000 (signature, item)
//!      pairs — every failure joins an open incident;
//!    - `noise`: 5 000 signatures × 2 items each, cycling — nothing
//!      correlates, every failure goes through decode, normalise, sign,
//!      window.
//! 2. Latency: under ~1 000 failures/s of background noise, repeated
//!    incidents of three failures; measured from publishing the third to
//!    receiving its `batch_trigger` on `caucus.control.batch_trigger`.
//!
//! Run: `cargo bench -p caucus-correlator --bench correlator_service`
//! (env `BENCH_EVENTS`, `BENCH_INCIDENTS` override the sizes).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer::PullConsumer, Context};
use bytes::Bytes;
use caucus_harness::{Service, Stack};
use caucus_shared::envelope::Envelope;
use caucus_shared::messages::AgentFailureEvent;
use caucus_shared::subjects::{StreamKind, Subjects};
use chrono::{DateTime, TimeDelta, Utc};
use futures::StreamExt;
use hdrhistogram::Histogram;

const STORM_SIGNATURES: usize = 20;
const STORM_ITEMS: usize = 50;
const NOISE_SIGNATURES: usize = 5_000;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn failure(
    ticker: &str,
    agent: &str,
    error_type: &str,
    source: &str,
    n: usize,
    at: DateTime<Utc>,
) -> Bytes {
    let content = AgentFailureEvent {
        stock_ticker: ticker.into(),
        agent_type: agent.into(),
        error_type: error_type.into(),
        error_message: format!(
            "{source} API error 429: quota exceeded (1000/1000 calls used) at {} request_id=7f3c9a2e-1b4d-4e8f-9a6c-{n:012x}",
            at.to_rfc3339()
        ),
        data_source: Some(source.into()),
        timestamp: Some(at),
        workflow_id: Some(format!("wf-{ticker}")),
        task_id: None,
    };
    Envelope::with_content(format!("{agent}_agent"), &content)
        .expect("valid failure")
        .to_bytes()
}

fn storm_event(i: usize, base: DateTime<Utc>) -> Bytes {
    let pair = i % (STORM_SIGNATURES * STORM_ITEMS);
    let (sig, item) = (pair % STORM_SIGNATURES, pair / STORM_SIGNATURES);
    failure(
        &format!("S{item:03}"),
        "valuation",
        "QuotaError",
        &format!("storm{sig}"),
        i,
        base + TimeDelta::milliseconds((i % 1000) as i64),
    )
}

fn noise_event(i: usize, base: DateTime<Utc>) -> Bytes {
    let sig = (i / 2) % NOISE_SIGNATURES;
    failure(
        &format!("N{}", i % 2),
        "screening",
        &format!("E{sig}"),
        "noisefeed",
        i,
        base + TimeDelta::milliseconds((i % 1000) as i64),
    )
}

async fn publish_all(js: &Context, subject: &str, bodies: Vec<Bytes>) {
    let mut acks = Vec::with_capacity(1024);
    for b in bodies {
        acks.push(js.publish(subject.to_string(), b).await.expect("publish"));
        if acks.len() == 1024 {
            for a in acks.drain(..) {
                a.await.expect("ack");
            }
        }
    }
    for a in acks {
        a.await.expect("ack");
    }
}

async fn caught_up(js: &Context, subjects: &Subjects) {
    let name = subjects.stream(StreamKind::Failures);
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let mut stream = js.get_stream(&name).await.expect("stream");
        let last = stream.info().await.expect("info").state.last_sequence;
        let mut c: PullConsumer = stream.get_consumer("correlator").await.expect("consumer");
        let info = c.info().await.expect("consumer info");
        if info.num_pending == 0
            && info.num_ack_pending == 0
            && info.ack_floor.stream_sequence >= last
        {
            return;
        }
        assert!(Instant::now() < deadline, "correlator never caught up");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Failures in the stream the correlator has not acked yet.
async fn backlog(js: &Context, subjects: &Subjects) -> u64 {
    let mut stream = js
        .get_stream(subjects.stream(StreamKind::Failures))
        .await
        .expect("stream");
    let last = stream.info().await.expect("info").state.last_sequence;
    let mut c: PullConsumer = stream.get_consumer("correlator").await.expect("consumer");
    last.saturating_sub(c.info().await.expect("info").ack_floor.stream_sequence)
}

fn start_correlator(stack: &Stack) -> Service {
    let s = stack
        .service("caucus-correlator")
        .env(
            "CAUCUS_TELEMETRY_LOG_LEVEL",
            "warn,caucus_shared::service=info,caucus_correlator::service=info",
        )
        .start();
    s.wait_for_output("consuming failures", Duration::from_secs(60));
    s
}

async fn throughput(
    js: &Context,
    subjects: &Subjects,
    name: &str,
    n: usize,
    make: fn(usize, DateTime<Utc>) -> Bytes,
) -> f64 {
    let base = Utc::now();
    let bodies: Vec<Bytes> = (0..n).map(|i| make(i, base)).collect();
    let subject = subjects.failures("bench");
    let t0 = Instant::now();
    publish_all(js, &subject, bodies).await;
    let published = t0.elapsed();
    let behind = backlog(js, subjects).await;
    caught_up(js, subjects).await;
    let done = t0.elapsed();
    let rate = n as f64 / done.as_secs_f64();
    let tail = (done - published).as_secs_f64();
    println!(
        "throughput/{name}: {n} failures in {:.3} s → {rate:.0} events/s end to end \
         (publishing took {:.3} s; {behind} still unacked then, drained in {tail:.3} s → {:.0} events/s with the publisher idle)",
        done.as_secs_f64(),
        published.as_secs_f64(),
        behind as f64 / tail.max(1e-9),
    );
    rate
}

async fn latency(js: &Context, nats: &async_nats::Client, subjects: &Subjects, incidents: usize) {
    let stop = Arc::new(AtomicBool::new(false));
    let background = {
        let (js, subject, stop) = (js.clone(), subjects.failures("bench"), stop.clone());
        tokio::spawn(async move {
            let base = Utc::now();
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            let mut i = 0usize;
            let start = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                for _ in 0..10 {
                    let _ = js.publish(subject.clone(), noise_event(i, base)).await;
                    i += 1;
                }
            }
            i as f64 / start.elapsed().as_secs_f64()
        })
    };
    let mut triggers = nats
        .subscribe(subjects.control("batch_trigger"))
        .await
        .expect("subscribe");
    let subject = subjects.failures("valuation");
    // Microseconds, 3 significant digits: a percentile within 0.1 %.
    let mut samples = Histogram::<u64>::new(3).expect("3 significant digits is a valid precision");
    for r in 0..incidents {
        let base = Utc::now();
        let source = format!("latency{r}");
        for (k, t) in ["AAPL", "MSFT"].iter().enumerate() {
            let b = failure(t, "valuation", "QuotaError", &source, k, base);
            js.publish(subject.clone(), b).await.unwrap().await.unwrap();
        }
        let third = failure("GOOGL", "valuation", "QuotaError", &source, 2, base);
        let want = format!("Latency{r} API quota exceeded");
        let t0 = Instant::now();
        js.publish(subject.clone(), third).await.unwrap();
        loop {
            let m = tokio::time::timeout(Duration::from_secs(30), triggers.next())
                .await
                .expect("batch_trigger within 30 s")
                .expect("subscription open");
            let v: serde_json::Value = serde_json::from_slice(&m.payload).unwrap();
            if v["content"]["root_cause"] == want.as_str() {
                samples.saturating_record(t0.elapsed().as_micros() as u64);
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let bg_rate = background.await.unwrap_or(0.0);
    let ms = |us: u64| us as f64 / 1e3;
    println!(
        "latency: third failure published → batch_trigger received, {} incidents under {bg_rate:.0} background failures/s: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        samples.len(),
        ms(samples.value_at_quantile(0.50)),
        ms(samples.value_at_quantile(0.99)),
        ms(samples.max()),
    );
}

/// The same noise failures without NATS: decode, then the engine, on one
/// core — what the process spends per failure before any I/O.
fn in_process(n: usize) {
    use caucus_correlator::engine::{Correlator, CorrelatorSettings};
    use caucus_correlator::wire::decode_failure;
    let base = Utc::now();
    let bodies: Vec<Bytes> = (0..n).map(|i| noise_event(i, base)).collect();
    let t0 = Instant::now();
    let events: Vec<_> = bodies
        .iter()
        .map(|b| decode_failure(b, 1 << 20).expect("valid").event)
        .collect();
    let decoded = t0.elapsed();
    let mut engine = Correlator::new(CorrelatorSettings::default()).expect("settings");
    let t1 = Instant::now();
    for ev in events {
        engine.on_failure(ev).expect("valid");
    }
    let correlated = t1.elapsed();
    println!(
        "in-process/noise: decode {:.0} events/s, engine {:.0} events/s, both {:.0} events/s",
        n as f64 / decoded.as_secs_f64(),
        n as f64 / correlated.as_secs_f64(),
        n as f64 / (decoded + correlated).as_secs_f64()
    );
}

#[tokio::main]
async fn main() {
    let n = env_usize("BENCH_EVENTS", 200_000);
    let incidents = env_usize("BENCH_INCIDENTS", 200);
    in_process(n);
    if std::env::var("BENCH_IN_PROCESS_ONLY").is_ok() {
        return;
    }
    let stack = Stack::start();
    let _correlator = start_correlator(&stack);
    let nats = async_nats::connect(stack.nats.url())
        .await
        .expect("connect");
    let js = jetstream::new(nats.clone());
    let subjects = Subjects::default();

    // Warm-up: open the storm's incidents (1 000 triggers and cards).
    throughput(
        &js,
        &subjects,
        "warm-up",
        STORM_SIGNATURES * STORM_ITEMS,
        storm_event,
    )
    .await;
    throughput(&js, &subjects, "storm", n, storm_event).await;
    throughput(&js, &subjects, "noise", n, noise_event).await;
    latency(&js, &nats, &subjects, incidents).await;
}
