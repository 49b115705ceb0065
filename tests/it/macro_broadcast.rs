//! Macro broadcasts on real servers: a broadcast reaches every worker ahead
//! of queued work, each built-in analyst applies the seed's response
//! protocol, the coordinator flags unfinished workflows for re-evaluation
//! without stopping them, and the facilitator's current regime follows the
//! broadcasts and survives a restart.

use std::time::Duration;

use crate::common::*;
use caucus_harness::Stack;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

/// `caucus broadcast` of BULL_LOW_RATES → BEAR_HIGH_RATES with Technology
/// −15 score points and +2.5 pts discount rate, +1 pt for every sector.
fn broadcast_bear(stack: &Stack) -> String {
    let (code, out, err) = caucus(
        stack,
        &[
            "broadcast",
            "--event",
            "regime_change",
            "--old-regime",
            "BULL_LOW_RATES",
            "--new-regime",
            "BEAR_HIGH_RATES",
            "--confidence",
            "0.9",
            "--discount-rate-change",
            "0.01",
            "--sector-discount",
            "Technology=0.025",
            "--sector-score",
            "Technology=-15",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    out
}

fn approx(v: &Value, x: f64) -> bool {
    v.as_f64().is_some_and(|y| (y - x).abs() < 1e-9)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broadcast_is_applied_before_tasks_already_queued() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let api = Api::connect(&stack).await;
    // Screening and valuation, independent, for three Technology tickers;
    // no worker yet, so all six tasks wait in the queue.
    let p = pipeline(
        "regime",
        json!([
            {"name": "screening", "agent": "screening", "expected_duration": 1.0},
            {"name": "valuation", "agent": "valuation", "expected_duration": 1.0}
        ]),
    );
    let items = ["AAPL", "MSFT", "NVDA"];
    let ids = api.submit(&items, p.clone(), 10).await;
    // Without capacity for their agent types they wait in the
    // coordinator's ready queue.
    eventually("six queued tasks", WAIT, || async {
        let wfs = api.status(&ids).await;
        let queued = wfs
            .iter()
            .flat_map(|w| w["tasks"].as_object().cloned().unwrap_or_default())
            .filter(|(_, t)| t["state"] == "ready" || t["state"] == "dispatched")
            .count();
        (queued == 6).then_some(())
    })
    .await;
    // A malformed broadcast is dead-lettered and changes nothing.
    let js = async_nats::jetstream::new(api.nats.clone());
    js.publish(api.subjects.msg_all(), "{broken".into())
        .await
        .unwrap()
        .await
        .unwrap();
    let out = broadcast_bear(&stack);
    assert!(out.contains("regime_change BEAR_HIGH_RATES"), "{out}");
    // Refused: a regime change the seed does not call system-critical.
    let (code, _, err) = caucus(
        &stack,
        &[
            "broadcast",
            "--event",
            "regime_change",
            "--new-regime",
            "X",
            "--confidence",
            "0.7",
        ],
    );
    assert_eq!(code, 1);
    assert!(err.contains("not above 0.8"), "{err}");

    let _w = worker(&stack, "screening,valuation", 2, "builtin", &[]);
    let wfs = api.wait_completed(&ids, WAIT).await;
    for w in &wfs {
        let item = w["item"].as_str().unwrap();
        let s = &w["tasks"]["screening"]["output"];
        assert!(
            approx(&s["score_components"]["regime_favorability"], -15.0),
            "{item}: {s}"
        );
        assert_eq!(s["regime"], "BEAR_HIGH_RATES", "{item}");
        assert_eq!(s["market_regime"]["source"], "broadcast", "{item}");
        let v = &w["tasks"]["valuation"]["output"];
        assert!(
            approx(&v["assumptions"]["regime_adjustment"], 0.035),
            "{item}: {}",
            v["assumptions"]
        );
        assert_eq!(v["assumptions"]["regime"], "BEAR_HIGH_RATES", "{item}");
        assert!(approx(
            &v["discount_rate"],
            v["assumptions"]["discount_rate_base"].as_f64().unwrap() + 0.035
        ));
    }
    let dead = eventually("the broken broadcast in the DLQ", WAIT, || async {
        let d = stream_messages(&api.nats, "CAUCUS_DLQ", "caucus.dlq.caucus.msg.all").await;
        (!d.is_empty()).then_some(d)
    })
    .await;
    assert_eq!(dead.len(), 1, "one dead letter, not one per consumer");
    assert_eq!(dead[0].dlq_code.as_deref(), Some("malformed_json"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broadcast_arriving_while_tasks_queue_is_applied_to_every_later_start() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let api = Api::connect(&stack).await;
    // One paced valuation slot: each task takes 300 ms, so the queue drains
    // slowly and the broadcast lands while tasks wait.
    let _w = worker(
        &stack,
        "valuation",
        1,
        "builtin",
        &[("CAUCUS_WORKER_PACE", "true")],
    );
    let p = pipeline(
        "paced",
        json!([{"name": "valuation", "agent": "valuation", "expected_duration": 1.0}]),
    );
    let items = ["AAPL", "MSFT", "NVDA", "ORCL", "ADBE", "CRM", "CSCO", "IBM"];
    let ids = api.submit(&items, p, 500).await;
    eventually("the first valuation to start", WAIT, || async {
        let wfs = api.status(&ids).await;
        wfs.iter()
            .any(|w| {
                matches!(
                    w["tasks"]["valuation"]["state"].as_str(),
                    Some("running" | "completed")
                )
            })
            .then_some(())
    })
    .await;
    let asked = chrono::Utc::now();
    broadcast_bear(&stack);
    let stored = broadcast_stored_at(&api).await;
    let wfs = api.wait_completed(&ids, WAIT).await;
    let mut before = 0;
    let mut after = 0;
    for w in &wfs {
        let t = &w["tasks"]["valuation"];
        let started: chrono::DateTime<chrono::Utc> =
            serde_json::from_value(t["started_at"].clone()).unwrap();
        let adj = &t["output"]["assumptions"]["regime_adjustment"];
        if started > stored {
            after += 1;
            assert!(
                approx(adj, 0.035),
                "{} started after the broadcast: {adj}",
                w["item"]
            );
        } else if started < asked {
            before += 1;
            assert!(
                approx(adj, 0.0),
                "{} started before the broadcast: {adj}",
                w["item"]
            );
        }
    }
    assert!(before >= 1 && after >= 2, "before {before}, after {after}");
}

/// When the stream stored the (only) broadcast.
async fn broadcast_stored_at(api: &Api) -> chrono::DateTime<chrono::Utc> {
    use async_nats::jetstream::consumer::{pull, AckPolicy};
    use futures::StreamExt;
    let js = async_nats::jetstream::new(api.nats.clone());
    let stream = js.get_stream("CAUCUS_MESSAGES").await.unwrap();
    let c = stream
        .create_consumer(pull::Config {
            filter_subject: api.subjects.msg_all(),
            ack_policy: AckPolicy::None,
            ..Default::default()
        })
        .await
        .unwrap();
    let m = c.messages().await.unwrap().next().await.unwrap().unwrap();
    let t = m.info().unwrap().published;
    chrono::DateTime::from_timestamp_nanos(t.unix_timestamp_nanos() as i64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_macro_agent_broadcasts_and_the_coordinator_and_facilitator_react() {
    let stack = Stack::start();
    crate::topology_admin::init(&stack, &[], &[]);
    let mut fac = stack
        .service("caucus-facilitator")
        .env("CAUCUS_FACILITATOR_CURRENT_REGIME", "BULL_LOW_RATES")
        .env("CAUCUS_SHUTDOWN_GRACE", "2s")
        .start();
    let _c = coordinator(&stack, &[]);
    let _m = worker(&stack, "macro", 1, "builtin", &[]);
    let api = Api::connect(&stack).await;
    let r = api.call("facilitator", "regime", json!({})).await.unwrap();
    assert_eq!(r["regime"], "BULL_LOW_RATES");
    assert_eq!(r["source"], "config");

    // A long analysis in progress: its second stage's agent has no worker.
    let _q = worker(&stack, "quick", 1, "noop", &[]);
    let long = pipeline(
        "long",
        json!([
            {"name": "quick", "agent": "quick", "expected_duration": 1.0},
            {"name": "archive", "agent": "archive", "expected_duration": 1.0, "depends_on": ["quick"]}
        ]),
    );
    let running = api.submit(&["AAPL"], long, 10).await;
    wait_state(&api, &running[0], "running").await;

    // An unsure regime change is only reported …
    let macro_stage = |confidence: f64| {
        pipeline(
            "macro",
            json!([{"name": "macro", "agent": "macro", "expected_duration": 1.0, "params": {
                "event_type": "regime_change", "old_regime": "BULL_LOW_RATES",
                "new_regime": "BEAR_HIGH_RATES", "confidence": confidence,
                "implications": {"sector_favorability_changes": {"Technology": -15, "Healthcare": 10},
                                 "discount_rate_changes": {"Technology": 0.025, "Utilities": 0.015}}}}]),
        )
    };
    let unsure = api.submit(&["MARKET"], macro_stage(0.6), 10).await;
    let w = api.wait_completed(&unsure, WAIT).await;
    let out = &w[0]["tasks"]["macro"]["output"];
    assert_eq!(out["broadcast"], false, "{out}");
    // … a confident one is broadcast, system-critical, to all.
    let sure = api.submit(&["MARKET"], macro_stage(0.85), 10).await;
    let w = api.wait_completed(&sure, WAIT).await;
    let out = &w[0]["tasks"]["macro"]["output"];
    assert_eq!(out["broadcast"], true, "{out}");
    let sent = stream_messages(&api.nats, "CAUCUS_MESSAGES", "caucus.msg.all").await;
    assert_eq!(sent.len(), 1, "only the confident event is broadcast");
    let b = &sent[0].body;
    assert_eq!(b["priority"], "system_critical");
    assert_eq!(b["to_agent"], "all");
    assert_eq!(b["message_type"], "alert");
    assert_eq!(
        b["content"]["implications"]["discount_rate_changes"]["Technology"],
        0.025
    );

    // The coordinator flags the analysis in progress and lets it run.
    let flagged = eventually("the running workflow to be flagged", WAIT, || async {
        let w = api.status(&running).await.pop()?;
        w["flags"].as_array().filter(|f| !f.is_empty())?;
        Some(w)
    })
    .await;
    assert_eq!(flagged["state"], "running");
    assert_eq!(flagged["reevaluate"], true);
    assert_eq!(flagged["flags"][0]["kind"], "regime_change");
    assert_eq!(
        flagged["flags"][0]["detail"]["new_regime"],
        "BEAR_HIGH_RATES"
    );
    assert_eq!(flagged["flags"].as_array().unwrap().len(), 1);
    // People get one card naming the flagged analyses.
    let cards = eventually("the flag alert card", WAIT, || async {
        let all = stream_messages(&api.nats, "CAUCUS_EVENTS", "caucus.alerts.warning").await;
        let cards: Vec<Stored> = all
            .into_iter()
            .filter(|a| a.body["content"]["event_type"] == "workflows_flagged")
            .collect();
        (!cards.is_empty()).then_some(cards)
    })
    .await;
    assert_eq!(cards.len(), 1, "one card per broadcast");
    let c = &cards[0].body["content"];
    assert_eq!(c["kind"], "regime_change");
    assert!(
        c["workflows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["workflow_id"] == running[0].as_str()),
        "{c}"
    );
    // Finished workflows are not flagged.
    let done = api.status(&unsure).await.pop().unwrap();
    assert!(done.get("flags").is_none(), "{done}");
    let (code, out, _) = caucus(&stack, &["status", &running[0]]);
    assert_eq!(code, 0);
    assert!(
        out.contains("re-evaluate: regime_change → BEAR_HIGH_RATES"),
        "{out}"
    );

    // The facilitator's credibility uses the new regime …
    let r = eventually("the facilitator's regime", WAIT, || async {
        let r = api.call("facilitator", "regime", json!({})).await.ok()?;
        (r["regime"] == "BEAR_HIGH_RATES").then_some(r)
    })
    .await;
    assert_eq!(r["source"], "broadcast");
    assert_eq!(r["broadcast_id"], b["id"]);
    let score = api
        .call("facilitator", "credibility", json!({"agent": "financial"}))
        .await
        .unwrap();
    assert!(score.to_string().contains("BEAR_HIGH_RATES"), "{score}");
    // … and keeps it across a restart.
    fac.kill();
    let _fac = stack
        .service("caucus-facilitator")
        .env("CAUCUS_FACILITATOR_CURRENT_REGIME", "BULL_LOW_RATES")
        .start();
    let r = api.call("facilitator", "regime", json!({})).await.unwrap();
    assert_eq!(r["regime"], "BEAR_HIGH_RATES", "{r}");
}
