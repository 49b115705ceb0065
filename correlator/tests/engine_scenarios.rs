//! The correlator engine: detection, joining, closing, replay and ordering.

use std::time::Duration;

use caucus_correlator::engine::{
    correlation_id, Correlation, CorrelationOutcome, Correlator, CorrelatorError,
    CorrelatorSettings,
};
use caucus_correlator::event::{FailureEvent, InvalidFailureEvent};
use caucus_correlator::root_cause::{RootCause, RootCauseKind};
use caucus_correlator::signature::signature_for_item;
use chrono::{DateTime, TimeDelta, TimeZone, Utc};

const SEED_TICKERS: [&str; 5] = ["AAPL", "MSFT", "GOOGL", "AMZN", "TSLA"];

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 3, 15, 14, 47, 0).unwrap()
}

fn at(secs: i64) -> DateTime<Utc> {
    t0() + TimeDelta::seconds(secs)
}

/// A Koyfin quota failure of a valuation task, with a per-event request id
/// and timestamp in the message as the vendor sends it.
fn koyfin_quota(n: usize, ticker: &str, secs: i64) -> FailureEvent {
    let ts = at(secs);
    FailureEvent {
        schema_version: 1,
        event_id: format!("ev-{n}"),
        workflow_id: Some(format!("wf-{ticker}")),
        stock_ticker: ticker.to_string(),
        agent_type: "valuation".to_string(),
        error_type: "QuotaError".to_string(),
        error_message: format!(
            "Koyfin API error 429: quota exceeded (1000/1000 calls used) at {} request_id=7f3c9a2e-1b4d-4e8f-9a6c-{:012x}",
            ts.to_rfc3339(),
            n * 7919
        ),
        data_source: "koyfin".to_string(),
        timestamp: ts,
    }
}

fn polygon_timeout(n: usize, ticker: &str, secs: i64) -> FailureEvent {
    FailureEvent {
        event_id: format!("pt-{n}"),
        agent_type: "strategy".to_string(),
        error_type: "ReadTimeout".to_string(),
        error_message: format!(
            "HTTPSConnectionPool(host='api.polygon.io', port=443): Read timed out. (read timeout={})",
            30 + n
        ),
        data_source: "polygon".to_string(),
        ..koyfin_quota(n, ticker, secs)
    }
}

fn correlator() -> Correlator {
    Correlator::new(CorrelatorSettings::default()).unwrap()
}

fn feed(c: &mut Correlator, events: &[FailureEvent]) -> Vec<Vec<CorrelationOutcome>> {
    events
        .iter()
        .map(|e| c.on_failure(e.clone()).unwrap())
        .collect()
}

fn seed_events() -> Vec<FailureEvent> {
    SEED_TICKERS
        .iter()
        .enumerate()
        .map(|(i, t)| koyfin_quota(i, t, 12 * i as i64))
        .collect()
}

fn detected(outcomes: &[CorrelationOutcome]) -> Vec<&Correlation> {
    outcomes
        .iter()
        .filter_map(|o| match o {
            CorrelationOutcome::Detected(c) => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn seed_example_koyfin_quota_across_five_valuations() {
    let mut c = correlator();
    let out = feed(&mut c, &seed_events());

    assert!(out[0].is_empty() && out[1].is_empty(), "{out:?}");
    let [CorrelationOutcome::Detected(corr)] = out[2].as_slice() else {
        panic!("third failure must detect: {:?}", out[2]);
    };
    assert_eq!(corr.items, vec!["AAPL", "MSFT", "GOOGL"]);
    assert_eq!(
        corr.root_cause,
        RootCause {
            kind: RootCauseKind::Quota,
            text: "Koyfin API quota exceeded".to_string()
        }
    );
    assert_eq!(corr.first_seen, at(0));
    assert_eq!(corr.last_seen, at(24));
    assert_eq!(corr.event_ids, vec!["ev-0", "ev-1", "ev-2"]);
    assert_eq!(corr.signature.hashed_message(), "api_quota_exceeded");
    assert_eq!(
        corr.correlation_id,
        correlation_id(&corr.signature.hash, at(0))
    );

    for (i, ticker) in [(3, "AMZN"), (4, "TSLA")] {
        assert_eq!(
            out[i],
            vec![CorrelationOutcome::Joined {
                correlation_id: corr.correlation_id.clone(),
                item: ticker.to_string(),
                new_item: true,
                root_cause: None,
            }]
        );
    }
    let all: Vec<CorrelationOutcome> = out.iter().flatten().cloned().collect();
    assert_eq!(detected(&all).len(), 1);

    let open = c.open_correlations();
    assert_eq!(open.len(), 1);
    let final_state = c.correlation(&corr.correlation_id).unwrap();
    assert_eq!(final_state.items, SEED_TICKERS.to_vec());
    assert_eq!(final_state.root_cause.text, "Koyfin API quota exceeded");
    assert_eq!(final_state.last_seen, at(48));
    assert_eq!(final_state.failure_count, 5);
}

#[test]
fn failures_six_minutes_apart_do_not_correlate() {
    let mut c = correlator();
    let events: Vec<FailureEvent> = ["AAPL", "MSFT", "GOOGL", "AMZN"]
        .iter()
        .enumerate()
        .map(|(i, t)| koyfin_quota(i, t, 360 * i as i64))
        .collect();
    let out: Vec<CorrelationOutcome> = feed(&mut c, &events).into_iter().flatten().collect();
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn the_window_is_inclusive_and_slides() {
    // 0 s, 150 s, 300 s: the third is exactly one window after the first.
    let mut c = correlator();
    let events = [
        koyfin_quota(0, "AAPL", 0),
        koyfin_quota(1, "MSFT", 150),
        koyfin_quota(2, "GOOGL", 300),
    ];
    let out: Vec<CorrelationOutcome> = feed(&mut c, &events).into_iter().flatten().collect();
    assert_eq!(detected(&out).len(), 1);

    // 0 s, 180 s, 360 s: the first has left when the third arrives.
    let mut c = correlator();
    let events = [
        koyfin_quota(0, "AAPL", 0),
        koyfin_quota(1, "MSFT", 180),
        koyfin_quota(2, "GOOGL", 360),
    ];
    let out: Vec<CorrelationOutcome> = feed(&mut c, &events).into_iter().flatten().collect();
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn the_window_is_configuration() {
    let mut c = Correlator::new(CorrelatorSettings {
        window: Duration::from_secs(20),
        ..CorrelatorSettings::default()
    })
    .unwrap();
    // Five failures 12 s apart: within a minute, never three within 20 s.
    let out: Vec<CorrelationOutcome> = feed(&mut c, &seed_events()).into_iter().flatten().collect();
    assert!(detected(&out).is_empty(), "{out:?}");
}

#[test]
fn the_batch_threshold_is_configuration() {
    let mut c = Correlator::new(CorrelatorSettings {
        batch_threshold: 5,
        ..CorrelatorSettings::default()
    })
    .unwrap();
    let out = feed(&mut c, &seed_events());
    assert!(out[..4].iter().all(Vec::is_empty), "{out:?}");
    let corrs = detected(&out[4]);
    assert_eq!(corrs.len(), 1);
    assert_eq!(corrs[0].items, SEED_TICKERS.to_vec());
}

#[test]
fn replaying_the_same_events_is_a_no_op() {
    let mut c = correlator();
    let events = seed_events();
    let first = feed(&mut c, &events);
    let again = feed(&mut c, &events);
    assert!(again.iter().all(Vec::is_empty), "{again:?}");
    assert_eq!(c.open_correlations().len(), 1);
    assert_eq!(c.open_correlations()[0].failure_count, 5);

    // A second instance replaying the stream gets identical outcomes and id.
    let mut other = correlator();
    assert_eq!(feed(&mut other, &events), first);
    assert_eq!(
        other.open_correlations()[0].correlation_id,
        c.open_correlations()[0].correlation_id
    );
}

#[test]
fn a_replayed_id_with_different_content_is_still_ignored() {
    let mut c = correlator();
    feed(&mut c, &seed_events()[..2]);
    let mut replay = koyfin_quota(1, "GOOGL", 30);
    replay.event_id = "ev-0".into();
    assert!(c.on_failure(replay).unwrap().is_empty());
    assert!(c.open_correlations().is_empty());
}

#[test]
fn the_same_item_failing_again_joins_but_is_not_new() {
    let mut c = correlator();
    let events = [
        koyfin_quota(0, "AAPL", 0),
        koyfin_quota(1, "AAPL", 5),
        koyfin_quota(2, "AAPL", 10),
        koyfin_quota(3, "MSFT", 15),
    ];
    let out: Vec<CorrelationOutcome> = feed(&mut c, &events).into_iter().flatten().collect();
    assert!(
        out.is_empty(),
        "one item thrice plus one is two items: {out:?}"
    );

    let out = c.on_failure(koyfin_quota(4, "GOOGL", 20)).unwrap();
    let corr = detected(&out)[0].clone();
    assert_eq!(corr.items, vec!["AAPL", "MSFT", "GOOGL"]);
    assert_eq!(corr.event_ids, vec!["ev-0", "ev-1", "ev-2", "ev-3", "ev-4"]);

    let out = c.on_failure(koyfin_quota(5, "msft", 25)).unwrap();
    assert_eq!(
        out,
        vec![CorrelationOutcome::Joined {
            correlation_id: corr.correlation_id.clone(),
            item: "MSFT".into(),
            new_item: false,
            root_cause: None,
        }]
    );
}

#[test]
fn root_cause_is_refined_as_items_join() {
    let mut c = correlator();
    let events: Vec<FailureEvent> = SEED_TICKERS
        .iter()
        .enumerate()
        .map(|(i, t)| polygon_timeout(i, t, 10 * i as i64))
        .collect();
    let out = feed(&mut c, &events);
    let corr = detected(&out[2])[0];
    assert_eq!(corr.root_cause.kind, RootCauseKind::AgentBug);
    assert_eq!(corr.root_cause.text, "strategy failure - ReadTimeout");
    assert!(matches!(
        &out[3][..],
        [CorrelationOutcome::Joined {
            root_cause: None,
            ..
        }]
    ));
    let [CorrelationOutcome::Joined {
        root_cause: Some(cause),
        ..
    }] = &out[4][..]
    else {
        panic!("fifth timeout must change the cause: {:?}", out[4]);
    };
    assert_eq!(cause.kind, RootCauseKind::Network);
    assert_eq!(cause.text, "Polygon network connectivity");
}

#[test]
fn different_signatures_do_not_mix() {
    let mut c = correlator();
    let events = [
        koyfin_quota(0, "AAPL", 0),
        polygon_timeout(1, "MSFT", 1),
        koyfin_quota(2, "GOOGL", 2),
        polygon_timeout(3, "AMZN", 3),
    ];
    let out: Vec<CorrelationOutcome> = feed(&mut c, &events).into_iter().flatten().collect();
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(c.tracked_signatures(), 2);
}

#[test]
fn an_incident_closes_after_a_quiet_window_and_a_new_one_opens() {
    let mut c = correlator();
    let first = feed(&mut c, &seed_events()[..3]);
    let old_id = detected(&first[2])[0].correlation_id.clone();

    // Exactly one window after the last failure: still the same incident.
    let out = c.on_failure(koyfin_quota(10, "NVDA", 24 + 300)).unwrap();
    assert!(
        matches!(&out[..], [CorrelationOutcome::Joined { correlation_id, .. }] if *correlation_id == old_id)
    );

    // More than a window of quiet: the old incident closes; the new failure
    // alone (plus two more) starts a new incident with a new id.
    let quiet = 324 + 301;
    let out = c.on_failure(koyfin_quota(11, "META", quiet)).unwrap();
    let [CorrelationOutcome::Closed(closed)] = &out[..] else {
        panic!("expected the old incident to close: {out:?}");
    };
    assert_eq!(closed.correlation_id, old_id);
    assert_eq!(closed.items, vec!["AAPL", "MSFT", "GOOGL", "NVDA"]);
    assert!(c.correlation(&old_id).is_none());

    let out = feed(
        &mut c,
        &[
            koyfin_quota(12, "NFLX", quiet + 1),
            koyfin_quota(13, "AAPL", quiet + 2),
        ],
    );
    let new = detected(&out[1])[0];
    assert_ne!(new.correlation_id, old_id);
    assert_eq!(new.items, vec!["META", "NFLX", "AAPL"]);
    assert_eq!(new.first_seen, at(quiet));
}

#[test]
fn expire_closes_quiet_incidents_and_frees_memory() {
    let mut c = correlator();
    let out = feed(&mut c, &seed_events());
    let id = detected(&out[2])[0].correlation_id.clone();
    let last = at(48);

    assert!(c.expire(last + TimeDelta::seconds(300)).is_empty());
    assert_eq!(c.open_correlations().len(), 1);

    let closed = c.expire(last + TimeDelta::seconds(301));
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0].correlation_id, id);
    assert_eq!(closed[0].items, SEED_TICKERS.to_vec());
    assert!(c.open_correlations().is_empty());
    assert_eq!(c.tracked_signatures(), 0);
}

#[test]
fn a_late_failure_inside_an_open_incident_joins_it() {
    let mut c = correlator();
    // A long incident: a failure every 4 minutes keeps it open.
    let mut events = seed_events()[..3].to_vec();
    for (i, t) in ["NVDA", "META", "NFLX"].iter().enumerate() {
        events.push(koyfin_quota(10 + i, t, 24 + 240 * (i as i64 + 1)));
    }
    let out: Vec<CorrelationOutcome> = feed(&mut c, &events).into_iter().flatten().collect();
    let id = detected(&out)[0].correlation_id.clone();
    // Delayed report of a failure 10 minutes back: outside the current
    // window but within the incident's span.
    let out = c.on_failure(koyfin_quota(20, "AMD", 400)).unwrap();
    assert!(
        matches!(&out[..], [CorrelationOutcome::Joined { correlation_id, new_item: true, .. }] if *correlation_id == id),
        "{out:?}"
    );
}

#[test]
fn every_arrival_order_within_the_window_gives_one_incident() {
    let events = seed_events();
    let mut orders = Vec::new();
    permutations(&mut (0..events.len()).collect::<Vec<_>>(), 0, &mut orders);
    assert_eq!(orders.len(), 120);
    for order in orders {
        let shuffled: Vec<FailureEvent> = order.iter().map(|&i| events[i].clone()).collect();
        let mut c = correlator();
        let out = feed(&mut c, &shuffled);
        assert!(out[0].is_empty() && out[1].is_empty(), "{order:?}");
        let corr = detected(&out[2]);
        assert_eq!(corr.len(), 1, "{order:?}");
        let corr = corr[0];
        let first_three = &shuffled[..3];
        let earliest = first_three.iter().map(|e| e.timestamp).min().unwrap();
        assert_eq!(corr.first_seen, earliest);
        assert_eq!(
            corr.correlation_id,
            correlation_id(&corr.signature.hash, earliest),
            "{order:?}"
        );
        // Items at detection are ordered by their failure time.
        let mut by_time = first_three.to_vec();
        by_time.sort_by_key(|e| e.timestamp);
        let expected: Vec<String> = by_time.iter().map(|e| e.stock_ticker.clone()).collect();
        assert_eq!(corr.items, expected, "{order:?}");
        for o in &out[3..] {
            assert!(
                matches!(&o[..], [CorrelationOutcome::Joined { correlation_id, new_item: true, .. }] if *correlation_id == corr.correlation_id),
                "{order:?}: {o:?}"
            );
        }
        let fin = c.correlation(&corr.correlation_id).unwrap();
        let mut items = fin.items.clone();
        items.sort();
        let mut want: Vec<String> = SEED_TICKERS.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(items, want);
        assert_eq!(fin.root_cause.text, "Koyfin API quota exceeded");
        assert_eq!(fin.first_seen, at(0));
        assert_eq!(fin.last_seen, at(48));

        // Replaying this order on a fresh instance gives the same id.
        let mut again = correlator();
        assert_eq!(feed(&mut again, &shuffled), out);
    }
}

fn permutations(v: &mut Vec<usize>, k: usize, out: &mut Vec<Vec<usize>>) {
    if k == v.len() {
        out.push(v.clone());
        return;
    }
    for i in k..v.len() {
        v.swap(k, i);
        permutations(v, k + 1, out);
        v.swap(k, i);
    }
}

#[test]
fn the_signature_masks_each_items_ticker() {
    // The message names the failing ticker; the signature must still collide.
    let mut c = correlator();
    let events: Vec<FailureEvent> = SEED_TICKERS[..3]
        .iter()
        .enumerate()
        .map(|(i, t)| FailureEvent {
            error_message: format!("No fundamentals returned for {t} (run {})", 1000 + i),
            error_type: "EmptyResult".into(),
            data_source: String::new(),
            ..koyfin_quota(i, t, i as i64)
        })
        .collect();
    let out: Vec<CorrelationOutcome> = feed(&mut c, &events).into_iter().flatten().collect();
    let corr = detected(&out)[0];
    assert_eq!(corr.root_cause.text, "valuation failure - EmptyResult");
    let sig = signature_for_item(
        "valuation",
        "EmptyResult",
        "",
        "No fundamentals returned for AAPL (run 1000)",
        Some("AAPL"),
    );
    assert_eq!(corr.signature, sig);
    assert_eq!(
        sig.normalized_message,
        "no fundamentals returned for ITEM (run N)"
    );
}

#[test]
fn bad_events_are_rejected_with_the_field_named() {
    let mut c = correlator();
    let mut ev = koyfin_quota(0, "AAPL", 0);
    ev.stock_ticker = "  ".into();
    assert_eq!(
        c.on_failure(ev.clone()),
        Err(CorrelatorError::InvalidEvent(
            InvalidFailureEvent::EmptyField {
                event_id: "ev-0".into(),
                field: "stock_ticker",
            }
        ))
    );
    // Rejected events are not remembered: the corrected event is processed.
    ev.stock_ticker = "AAPL".into();
    assert!(c.on_failure(ev).is_ok());
    assert_eq!(c.tracked_event_ids(), 1);

    let mut future = koyfin_quota(1, "MSFT", 0);
    future.schema_version = 9;
    let err = c.on_failure(future).unwrap_err();
    assert!(
        err.to_string().contains("unsupported schema_version 9"),
        "{err}"
    );
}

#[test]
fn bad_settings_are_rejected_with_the_setting_named() {
    let cases = [
        (
            CorrelatorSettings {
                window: Duration::ZERO,
                ..Default::default()
            },
            "window",
        ),
        (
            CorrelatorSettings {
                batch_threshold: 0,
                ..Default::default()
            },
            "batch_threshold",
        ),
        (
            CorrelatorSettings {
                batch_threshold: 5,
                max_records_per_signature: 4,
                ..Default::default()
            },
            "max_records_per_signature",
        ),
    ];
    for (settings, field) in cases {
        match Correlator::new(settings) {
            Err(CorrelatorError::InvalidSetting { name, .. }) => assert_eq!(name, field),
            other => panic!("{field}: {other:?}"),
        }
    }
}

#[test]
fn the_signature_cap_drops_the_quietest_and_reports_a_closed_incident() {
    let mut c = Correlator::new(CorrelatorSettings {
        max_signatures: 1,
        ..Default::default()
    })
    .unwrap();
    let out = feed(&mut c, &seed_events()[..3]);
    let id = detected(&out[2])[0].correlation_id.clone();
    let out = c.on_failure(polygon_timeout(9, "AAPL", 30)).unwrap();
    assert!(
        matches!(&out[..], [CorrelationOutcome::Closed(corr)] if corr.correlation_id == id),
        "{out:?}"
    );
    assert_eq!(c.tracked_signatures(), 1);

    let mut c = Correlator::new(CorrelatorSettings {
        max_signatures: 2,
        ..Default::default()
    })
    .unwrap();
    feed(&mut c, &seed_events()[..3]);
    c.on_failure(polygon_timeout(9, "AAPL", 30)).unwrap();
    let mut other = polygon_timeout(10, "MSFT", 31);
    other.data_source = "fmp".into();
    // The open incident is kept; the quiet polygon signature makes room.
    assert!(c.on_failure(other).unwrap().is_empty());
    assert_eq!(c.tracked_signatures(), 2);
    assert_eq!(c.open_correlations().len(), 1);
}

#[test]
fn remembered_event_ids_are_bounded() {
    let mut c = Correlator::new(CorrelatorSettings {
        max_tracked_event_ids: 10,
        ..Default::default()
    })
    .unwrap();
    for i in 0..50 {
        c.on_failure(koyfin_quota(i, "AAPL", i as i64)).unwrap();
    }
    assert_eq!(c.tracked_event_ids(), 10);
}

#[test]
fn the_seed_message_shape_parses() {
    let json = r#"{
        "event_id": "f-1",
        "stock_ticker": "AAPL",
        "agent_type": "valuation",
        "error_type": "QuotaError",
        "error_message": "quota exceeded",
        "data_source": "koyfin",
        "timestamp": "2024-03-15T14:47:03Z"
    }"#;
    let ev: FailureEvent = serde_json::from_str(json).unwrap();
    assert_eq!(ev.schema_version, 1);
    assert_eq!(ev.workflow_id, None);
    assert_eq!(ev.timestamp, at(3));
    let back = serde_json::to_value(&ev).unwrap();
    assert!(back.get("workflow_id").is_none());
    assert_eq!(back["schema_version"], 1);

    let outcome = CorrelationOutcome::Joined {
        correlation_id: "c".into(),
        item: "AAPL".into(),
        new_item: true,
        root_cause: None,
    };
    let v = serde_json::to_value(&outcome).unwrap();
    assert_eq!(v["outcome"], "joined");
    assert!(v.get("root_cause").is_none());
}
