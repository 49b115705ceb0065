//! The `caucus-correlator` process against real NATS and Redis: failures are
//! published on `caucus.failures.<agent_type>` as an outside service would,
//! and what the correlator publishes is read back from the streams.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use async_nats::jetstream::{self, consumer, Context};
use async_nats::HeaderMap;
use caucus_harness::{Service, Stack};
use caucus_shared::envelope::Envelope;
use caucus_shared::messages::AgentFailureEvent;
use caucus_shared::nats::{api_request, ApiError};
use caucus_shared::subjects::{StreamKind, Subjects};
use chrono::{DateTime, TimeDelta, Utc};
use futures::StreamExt;
use serde_json::{json, Value};

const SEED: [&str; 5] = ["AAPL", "MSFT", "GOOGL", "AMZN", "TSLA"];
const NETWORK: [&str; 5] = ["NVDA", "META", "NFLX", "AMD", "INTC"];
const TIMEOUT: Duration = Duration::from_secs(30);

fn correlator(stack: &Stack, extra: &[(&str, &str)]) -> Service {
    let mut b = stack
        .service("caucus-correlator")
        .env("CAUCUS_CORRELATOR_LEADER_LEASE", "1s")
        .env("CAUCUS_CORRELATOR_EXPIRE_INTERVAL", "200ms")
        .env("CAUCUS_SHUTDOWN_GRACE", "5s")
        .env("CAUCUS_TELEMETRY_LOG_LEVEL", "info")
        .env("CAUCUS_TELEMETRY_LOG_FORMAT", "json");
    for (k, v) in extra {
        b = b.env(*k, *v);
    }
    // Its bucket and consumer come from the coordinator or `caucus init`.
    crate::topology_admin::init(stack, &[], extra);
    b.start()
}

/// Waits until the correlator has replayed and consumes live failures.
fn wait_consuming(s: &Service) {
    s.wait_for_output("consuming failures", TIMEOUT);
}

struct Client {
    nats: async_nats::Client,
    js: Context,
    subjects: Subjects,
}

impl Client {
    async fn connect(stack: &Stack) -> Client {
        let nats = async_nats::connect(stack.nats.url())
            .await
            .expect("connect");
        Client {
            js: jetstream::new(nats.clone()),
            nats,
            subjects: Subjects::default(),
        }
    }

    /// Publishes a Koyfin quota failure of `ticker`'s valuation task.
    async fn koyfin_quota(&self, ticker: &str, at: DateTime<Utc>) -> String {
        let msg = format!(
            "Koyfin API error 429: quota exceeded (1000/1000 calls used) at {} request_id={}",
            at.to_rfc3339(),
            uuid_like(ticker)
        );
        self.failure(ticker, "valuation", "QuotaError", &msg, "koyfin", at)
            .await
    }

    /// Publishes a Polygon timeout of `ticker`'s financial task.
    async fn polygon_timeout(&self, ticker: &str, at: DateTime<Utc>) -> String {
        let msg = format!(
            "GET https://api.polygon.io/v2/{ticker}/financials: connection timed out after 30000ms"
        );
        self.failure(ticker, "financial", "TimeoutError", &msg, "polygon", at)
            .await
    }

    async fn failure(
        &self,
        ticker: &str,
        agent: &str,
        error_type: &str,
        message: &str,
        source: &str,
        at: DateTime<Utc>,
    ) -> String {
        let content = AgentFailureEvent {
            stock_ticker: ticker.into(),
            agent_type: agent.into(),
            error_type: error_type.into(),
            error_message: message.into(),
            data_source: Some(source.into()),
            timestamp: Some(at),
            workflow_id: Some(format!("wf-{ticker}")),
            task_id: Some(format!("wf-{ticker}/{agent}")),
        };
        let env = Envelope::with_content(format!("{agent}_agent"), &content).unwrap();
        self.raw(&self.subjects.failures(agent), env.to_bytes().to_vec())
            .await;
        env.id
    }

    async fn raw(&self, subject: &str, body: Vec<u8>) {
        self.js
            .publish(subject.to_string(), body.into())
            .await
            .expect("publish")
            .await
            .expect("stream ack");
    }

    /// Waits until the correlator's durable consumer has acked every
    /// failure in the stream: their effects are done by then.
    async fn caught_up(&self) {
        let stream_name = self.subjects.stream(StreamKind::Failures);
        eventually("the correlator to ack every failure", || async {
            let mut stream = self.js.get_stream(&stream_name).await.ok()?;
            let last = stream.info().await.ok()?.state.last_sequence;
            let mut c: consumer::PullConsumer = stream.get_consumer("correlator").await.ok()?;
            let info = c.info().await.ok()?;
            (info.num_pending == 0
                && info.num_ack_pending == 0
                && info.ack_floor.stream_sequence >= last)
                .then_some(())
        })
        .await;
    }

    /// Every message on `filter` in `kind`'s stream, with its headers.
    async fn read(&self, kind: StreamKind, filter: &str) -> Vec<(HeaderMap, Value)> {
        let stream = self
            .js
            .get_stream(self.subjects.stream(kind))
            .await
            .expect("stream");
        let c = stream
            .create_consumer(consumer::pull::Config {
                filter_subject: filter.to_string(),
                ack_policy: consumer::AckPolicy::None,
                deliver_policy: consumer::DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .expect("consumer");
        let mut out = Vec::new();
        let mut batch = c
            .fetch()
            .max_messages(10_000)
            .messages()
            .await
            .expect("fetch");
        while let Some(m) = batch.next().await {
            let m = m.expect("message");
            let body = serde_json::from_slice(&m.payload).unwrap_or(Value::Null);
            out.push((m.headers.clone().unwrap_or_default(), body));
        }
        out
    }

    async fn triggers(&self) -> Vec<(HeaderMap, Value)> {
        self.read(StreamKind::Control, &self.subjects.control("batch_trigger"))
            .await
    }

    async fn detections(&self) -> Vec<(HeaderMap, Value)> {
        self.read(StreamKind::Control, &self.subjects.correlations())
            .await
    }

    async fn cards(&self) -> Vec<(HeaderMap, Value)> {
        self.read(StreamKind::Events, &self.subjects.alerts("high"))
            .await
    }

    async fn call(&self, op: &str, body: Value) -> Result<Value, ApiError> {
        api_request(
            &self.nats,
            &self.subjects,
            "correlator",
            op,
            &body,
            Duration::from_secs(10),
        )
        .await
    }
}

async fn eventually<T, F, Fut>(what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn uuid_like(seed: &str) -> String {
    let h: u64 = seed
        .bytes()
        .fold(7, |a, b| a.wrapping_mul(31) ^ u64::from(b));
    format!("7f3c9a2e-1b4d-4e8f-9a6c-{:012x}", h & 0xffff_ffff_ffff)
}

fn header(h: &HeaderMap, k: &str) -> String {
    h.get(k).map(|v| v.as_str().to_string()).unwrap_or_default()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Items per correlation id over all batch triggers; panics if an item is
/// triggered twice for one correlation.
fn triggered_items(triggers: &[(HeaderMap, Value)]) -> BTreeMap<String, Vec<String>> {
    let mut by_corr: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (_, env) in triggers {
        assert_eq!(env["message_type"], "batch_trigger");
        let c = &env["content"];
        let id = c["correlation_id"].as_str().unwrap().to_string();
        let items = by_corr.entry(id).or_default();
        for item in strings(&c["stock_ids"]) {
            assert!(
                !items.contains(&item),
                "{item} triggered twice for one correlation: {triggers:#?}"
            );
            items.push(item);
        }
    }
    by_corr
}

/// The seed's example: five valuation failures with a Koyfin quota error
/// within a minute → one correlation, triggered as it grows, five cards.
fn assert_seed_outcome(
    triggers: &[(HeaderMap, Value)],
    detections: &[(HeaderMap, Value)],
    cards: &[(HeaderMap, Value)],
) -> String {
    assert_eq!(
        detections.len(),
        1,
        "one correlation_detected: {detections:#?}"
    );
    let d = &detections[0].1;
    let cid = d["content"]["correlation_id"].as_str().unwrap().to_string();
    assert_eq!(d["content"]["root_cause"], "Koyfin API quota exceeded");
    assert_eq!(strings(&d["content"]["stock_tickers"]), SEED[..3].to_vec());
    assert_eq!(d["content"]["batch_triggered"], true);
    assert_eq!(
        header(&detections[0].0, "Nats-Msg-Id"),
        format!("correlation_detected:{cid}")
    );

    assert_eq!(triggers.len(), 3, "first trigger then one per joining item");
    let first = &triggers[0];
    assert_eq!(
        header(&first.0, "Nats-Msg-Id"),
        format!("batch_trigger:{cid}")
    );
    assert_eq!(
        strings(&first.1["content"]["stock_ids"]),
        SEED[..3].to_vec()
    );
    assert_eq!(
        first.1["content"]["root_cause"],
        "Koyfin API quota exceeded"
    );
    assert_eq!(
        first.1["content"]["workflow_ids"]["AAPL"],
        json!(["wf-AAPL"])
    );
    for (i, item) in SEED[3..].iter().enumerate() {
        let t = &triggers[i + 1];
        assert_eq!(
            header(&t.0, "Nats-Msg-Id"),
            format!("batch_trigger:{cid}:{item}")
        );
        assert_eq!(
            strings(&t.1["content"]["stock_ids"]),
            vec![item.to_string()]
        );
    }
    let by_corr = triggered_items(triggers);
    assert_eq!(by_corr.len(), 1);
    assert_eq!(
        by_corr[&cid].iter().cloned().collect::<BTreeSet<_>>(),
        set(&SEED)
    );

    assert_eq!(cards.len(), 5, "one card per item: {cards:#?}");
    let mut carded = BTreeSet::new();
    for (h, env) in cards {
        let c = &env["content"];
        let item = c["item"].as_str().unwrap().to_string();
        assert_eq!(header(h, "Nats-Msg-Id"), format!("alert:{cid}:{item}"));
        assert_eq!(env["message_type"], "alert");
        assert_eq!(c["event_type"], "correlated_failure");
        assert_eq!(c["correlation_id"], cid.as_str());
        assert_eq!(c["root_cause"], "Koyfin API quota exceeded");
        assert_eq!(c["action"]["label"], "Resume all");
        assert_eq!(c["action"]["operation"], "coordinator.batch_resume");
        assert_eq!(c["action"]["body"]["batch_id"], cid.as_str());
        carded.insert(item);
    }
    assert_eq!(carded, set(&SEED));
    cid
}

async fn assert_seed_record(client: &Client, cid: &str) {
    let r = client
        .call("correlations", json!({}))
        .await
        .expect("correlations");
    let recs = r["correlations"].as_array().unwrap();
    assert_eq!(recs.len(), 1, "one record: {r:#}");
    let rec = &recs[0];
    assert_eq!(rec["correlation_id"], cid);
    assert_eq!(rec["root_cause"]["text"], "Koyfin API quota exceeded");
    assert_eq!(rec["root_cause"]["kind"], "quota");
    assert_eq!(strings(&rec["items"]), SEED.to_vec());
    assert_eq!(rec["status"], "open");
    assert_eq!(rec["detection_published"], true);
    assert_eq!(
        strings(&rec["triggered_items"])
            .into_iter()
            .collect::<BTreeSet<_>>(),
        set(&SEED)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_example_koyfin_quota_correlates_once_with_five_cards() {
    let stack = Stack::start();
    let svc = correlator(&stack, &[]);
    wait_consuming(&svc);
    let client = Client::connect(&stack).await;
    let base = Utc::now();
    for (i, t) in SEED.iter().enumerate() {
        client
            .koyfin_quota(t, base + TimeDelta::seconds(12 * i as i64))
            .await;
    }
    client.caught_up().await;
    let cid = assert_seed_outcome(
        &client.triggers().await,
        &client.detections().await,
        &client.cards().await,
    );
    assert_seed_record(&client, &cid).await;

    let alerts = client
        .call("alerts", json!({"correlation_id": cid}))
        .await
        .unwrap();
    let alerts = alerts["alerts"].as_array().unwrap();
    assert_eq!(alerts.len(), 5);
    assert!(alerts.iter().all(|a| a["published"] == true));
    assert!(alerts.iter().all(|a| a["subject"] == "caucus.alerts.high"));
    let msft = client
        .call("alerts", json!({"item": "msft"}))
        .await
        .unwrap();
    assert_eq!(msft["alerts"].as_array().unwrap().len(), 1);
    assert_eq!(msft["alerts"][0]["card"]["item"], "MSFT");
    assert_eq!(
        strings(&msft["alerts"][0]["card"]["stock_tickers"]),
        SEED.to_vec()
    );
    // The action's body is exactly a `coordinator.batch_resume` request.
    assert_eq!(
        msft["alerts"][0]["card"]["action"]["body"],
        json!({"batch_id": msft["alerts"][0]["card"]["batch_id"]})
    );
    let bad = client
        .call("correlations", json!({"status": "sideways"}))
        .await
        .unwrap_err();
    assert_eq!(bad.code, "bad_request");

    // Two failures of one item are one item: no new trigger or card.
    client
        .koyfin_quota("AAPL", base + TimeDelta::seconds(70))
        .await;
    client.caught_up().await;
    assert_eq!(client.triggers().await.len(), 3);
    assert_eq!(client.cards().await.len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_goes_to_the_dlq_and_the_next_failures_still_correlate() {
    let stack = Stack::start();
    let svc = correlator(&stack, &[("CAUCUS_MAX_BODY_BYTES", "4096")]);
    wait_consuming(&svc);
    let client = Client::connect(&stack).await;
    let subject = client.subjects.failures("valuation");
    client.raw(&subject, b"{not json".to_vec()).await;
    client
        .raw(
            &subject,
            br#"{"message_type": "gossip", "from_agent": "x"}"#.to_vec(),
        )
        .await;
    let wrong_type = json!({"message_type": "batch_trigger", "from_agent": "x",
        "content": {"stock_ids": ["AAPL"], "root_cause": "r", "correlation_id": "c"}});
    client
        .raw(&subject, serde_json::to_vec(&wrong_type).unwrap())
        .await;
    let missing = json!({"message_type": "agent_failure_event", "from_agent": "x",
        "content": {"stock_ticker": "AAPL", "agent_type": "valuation"}});
    client
        .raw(&subject, serde_json::to_vec(&missing).unwrap())
        .await;
    let mut big = br#"{"message_type": "agent_failure_event", "pad": ""#.to_vec();
    big.extend(std::iter::repeat_n(b'x', 5000));
    big.extend(br#""}"#);
    client.raw(&subject, big).await;
    let base = Utc::now();
    for (i, t) in SEED.iter().enumerate() {
        client
            .koyfin_quota(t, base + TimeDelta::seconds(i as i64))
            .await;
    }
    client.caught_up().await;

    let dead = client
        .read(StreamKind::Dlq, &client.subjects.dlq_all())
        .await;
    let codes: Vec<String> = dead
        .iter()
        .map(|(h, _)| header(h, "Caucus-Dlq-Code"))
        .collect();
    assert_eq!(
        codes,
        vec![
            "malformed_json",
            "unknown_message_type",
            "unexpected_message_type",
            "invalid_content",
            "too_large"
        ]
    );
    assert!(dead
        .iter()
        .all(|(h, _)| header(h, "Caucus-Dlq-Subject") == subject));
    assert!(header(&dead[3].0, "Caucus-Dlq-Error").contains("error_type"));
    let cid = assert_seed_outcome(
        &client.triggers().await,
        &client.detections().await,
        &client.cards().await,
    );
    assert_seed_record(&client, &cid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_the_second_failure_the_restarted_correlator_still_detects_once() {
    let stack = Stack::start();
    let mut first = correlator(&stack, &[]);
    wait_consuming(&first);
    let client = Client::connect(&stack).await;
    let base = Utc::now();
    for (i, t) in SEED[..2].iter().enumerate() {
        client
            .koyfin_quota(t, base + TimeDelta::seconds(10 * i as i64))
            .await;
    }
    client.caught_up().await;
    first.kill();

    let second = correlator(&stack, &[]);
    wait_consuming(&second);
    for (i, t) in SEED[2..].iter().enumerate() {
        client
            .koyfin_quota(t, base + TimeDelta::seconds(20 + 10 * i as i64))
            .await;
    }
    client.caught_up().await;
    // The replay restored AAPL and MSFT, so GOOGL (the third) detects with
    // all three; without it TSLA would detect GOOGL, AMZN, TSLA.
    let cid = assert_seed_outcome(
        &client.triggers().await,
        &client.detections().await,
        &client.cards().await,
    );
    assert_seed_record(&client, &cid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_after_detection_the_restarted_correlator_publishes_nothing_again() {
    let stack = Stack::start();
    let mut first = correlator(&stack, &[]);
    wait_consuming(&first);
    let client = Client::connect(&stack).await;
    let base = Utc::now();
    for (i, t) in SEED.iter().enumerate() {
        client
            .koyfin_quota(t, base + TimeDelta::seconds(5 * i as i64))
            .await;
    }
    client.caught_up().await;
    assert!(first.output().contains("published correlation effects"));
    first.kill();

    let second = correlator(&stack, &[]);
    wait_consuming(&second);
    client.caught_up().await;
    let out = second.output();
    assert!(
        out.contains("replayed recent failures") && out.contains("correlated failures detected"),
        "the restart replays and re-detects the incident in memory:\n{out}"
    );
    assert!(
        !out.contains("published correlation effects"),
        "the records say everything is out, so nothing is re-published \
         (not even as a duplicate JetStream would drop):\n{out}"
    );
    let cid = assert_seed_outcome(
        &client.triggers().await,
        &client.detections().await,
        &client.cards().await,
    );
    assert_seed_record(&client, &cid).await;

    // The restarted engine carries the incident on: a sixth item joins it.
    client
        .koyfin_quota("NVDA", base + TimeDelta::seconds(40))
        .await;
    client.caught_up().await;
    let by_corr = triggered_items(&client.triggers().await);
    assert_eq!(by_corr.len(), 1);
    assert_eq!(by_corr[&cid].len(), 6);
    assert_eq!(client.detections().await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_correlator_instances_never_both_trigger_the_same_batch() {
    let stack = Stack::start();
    let mut a = correlator(&stack, &[]);
    let mut b = correlator(&stack, &[]);
    let client = Client::connect(&stack).await;
    let leader_of = |a: &Service, b: &Service| {
        caucus_harness::wait_until("one correlator to lead", TIMEOUT, || {
            match (
                a.output().contains("consuming failures"),
                b.output().contains("consuming failures"),
            ) {
                (true, false) => Some(0),
                (false, true) => Some(1),
                (true, true) => panic!("both correlators consume at once"),
                _ => None,
            }
        })
    };
    let leader = leader_of(&a, &b);
    let base = Utc::now();
    for (i, t) in SEED.iter().enumerate() {
        client
            .koyfin_quota(t, base + TimeDelta::seconds(3 * i as i64))
            .await;
    }
    client.caught_up().await;
    let cid = assert_seed_outcome(
        &client.triggers().await,
        &client.detections().await,
        &client.cards().await,
    );

    // The leader dies; the standby takes over, replays, and carries on.
    let standby = if leader == 0 {
        a.kill();
        &b
    } else {
        b.kill();
        &a
    };
    wait_consuming(standby);
    for (i, t) in NETWORK.iter().enumerate() {
        client
            .polygon_timeout(t, base + TimeDelta::seconds(30 + 3 * i as i64))
            .await;
    }
    client.caught_up().await;

    let triggers = client.triggers().await;
    let by_corr = triggered_items(&triggers);
    assert_eq!(by_corr.len(), 2, "{by_corr:?}");
    assert_eq!(
        by_corr[&cid].iter().cloned().collect::<BTreeSet<_>>(),
        set(&SEED)
    );
    let (other, items) = by_corr.iter().find(|(k, _)| **k != cid).unwrap();
    assert_eq!(
        items.iter().cloned().collect::<BTreeSet<_>>(),
        set(&NETWORK)
    );
    assert_eq!(client.detections().await.len(), 2);
    assert_eq!(client.cards().await.len(), 10);
    let out = standby.output();
    assert!(
        !out.lines()
            .any(|l| l.contains("published correlation effects") && l.contains(&cid)),
        "the standby re-published the first incident:\n{out}"
    );
    let r = client
        .call("correlations", json!({"correlation_id": other}))
        .await
        .unwrap();
    let rec = &r["correlations"][0];
    assert_eq!(rec["root_cause"]["text"], "Polygon network connectivity");
    assert_eq!(strings(&rec["items"]), NETWORK.to_vec());
}
