//! The safety net under active/standby: two correlators that both act on
//! the same failures at the same moment (no leadership at all) still create
//! one record per incident and publish each detection, trigger and card
//! once, because records are create-only and revision-checked and every
//! message carries a `Nats-Msg-Id`. Real NATS server.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_nats::jetstream::{self, consumer};
use caucus_correlator::effects::Effects;
use caucus_correlator::engine::{Correlator, CorrelatorSettings};
use caucus_correlator::event::FailureEvent;
use caucus_correlator::processor::Processor;
use caucus_correlator::service::open_store;
use caucus_harness::Stack;
use caucus_shared::clock::SystemClock;
use caucus_shared::config::Config;
use caucus_shared::subjects::{StreamKind, Subjects};
use chrono::{TimeDelta, Utc};
use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

const TICKERS: [&str; 5] = ["AAPL", "MSFT", "GOOGL", "AMZN", "TSLA"];
const INCIDENTS: usize = 12;

fn events() -> Vec<FailureEvent> {
    let base = Utc::now();
    let mut out = Vec::new();
    for (i, t) in TICKERS.iter().enumerate() {
        for s in 0..INCIDENTS {
            out.push(FailureEvent {
                schema_version: 1,
                event_id: format!("ev-{s}-{t}"),
                workflow_id: Some(format!("wf-{t}")),
                stock_ticker: t.to_string(),
                agent_type: "valuation".into(),
                error_type: "QuotaError".into(),
                error_message: "quota exceeded (1000/1000)".into(),
                data_source: format!("source{s}"),
                timestamp: base + TimeDelta::seconds(i as i64),
            });
        }
    }
    out
}

async fn read(js: &jetstream::Context, kind: StreamKind, filter: &str) -> Vec<Value> {
    let stream = js
        .get_stream(Subjects::default().stream(kind))
        .await
        .unwrap();
    let c = stream
        .create_consumer(consumer::pull::Config {
            filter_subject: filter.to_string(),
            ack_policy: consumer::AckPolicy::None,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut batch = c.fetch().max_messages(10_000).messages().await.unwrap();
    let mut out = Vec::new();
    while let Some(m) = batch.next().await {
        out.push(serde_json::from_slice(&m.unwrap().payload).unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_active_processors_publish_every_effect_once() {
    let stack = Stack::start();
    let client = async_nats::connect(stack.nats.url()).await.unwrap();
    let js = jetstream::new(client);
    let subjects = Subjects::default();
    let config = Config::default();
    // Streams and the correlations bucket, as the coordinator makes them
    // (open_store only binds).
    caucus_shared::nats::admin::fixed(&js, &subjects, &config)
        .await
        .unwrap();
    let store = open_store(&js, &subjects, &config).await.unwrap();

    let failures = events();
    let mut runs = Vec::new();
    for n in 0..2 {
        let effects = Effects::new(
            js.clone(),
            subjects.clone(),
            store.clone(),
            "high",
            &format!("writer-{n}"),
            Arc::new(SystemClock),
        );
        let engine = Correlator::new(CorrelatorSettings::default()).unwrap();
        let mut p = Processor::new(engine, effects, 10_000, CancellationToken::new());
        let failures = failures.clone();
        runs.push(tokio::spawn(async move {
            for ev in failures {
                p.handle(ev).await.unwrap();
            }
            p.flush().await.unwrap();
            p.stats()
        }));
    }
    for r in runs {
        let stats = r.await.unwrap();
        assert_eq!(stats.detected, INCIDENTS as u64, "each engine detects all");
    }

    let detections = read(&js, StreamKind::Control, &subjects.correlations()).await;
    assert_eq!(detections.len(), INCIDENTS);
    let triggers = read(&js, StreamKind::Control, &subjects.control("batch_trigger")).await;
    let mut per_corr: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in &triggers {
        let c = &t["content"];
        let items = per_corr
            .entry(c["correlation_id"].as_str().unwrap().into())
            .or_default();
        for i in c["stock_ids"].as_array().unwrap() {
            let i = i.as_str().unwrap().to_string();
            assert!(!items.contains(&i), "{i} triggered twice");
            items.push(i);
        }
    }
    assert_eq!(per_corr.len(), INCIDENTS);
    assert!(per_corr.values().all(|items| items.len() == TICKERS.len()));
    assert_eq!(
        triggers.len(),
        INCIDENTS * 3,
        "first trigger + two joins each"
    );
    let cards = read(&js, StreamKind::Events, &subjects.alerts("high")).await;
    assert_eq!(cards.len(), INCIDENTS * TICKERS.len());

    let recs = store.list().await.unwrap();
    assert_eq!(recs.len(), INCIDENTS);
    for r in recs {
        assert!(r.detection_published);
        assert_eq!(r.triggered_items.len(), TICKERS.len(), "{r:?}");
        assert_eq!(r.items.len(), TICKERS.len());
    }
}
