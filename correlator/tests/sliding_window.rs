//! The per-signature sliding window on event time.

use std::time::Duration;

use caucus_correlator::window::{FailureRecord, FailureWindow};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 3, 15, 14, 47, 0).unwrap()
}

fn at(secs: i64) -> DateTime<Utc> {
    t0() + TimeDelta::seconds(secs)
}

fn rec(id: &str, item: &str, ts: DateTime<Utc>) -> FailureRecord {
    FailureRecord {
        event_id: id.to_string(),
        item: item.to_string(),
        agent_type: "valuation".into(),
        error_type: "QuotaError".into(),
        data_source: "koyfin".into(),
        message: "quota exceeded".into(),
        timestamp: ts,
        pattern: None,
    }
}

const FIVE_MIN: Duration = Duration::from_secs(300);

#[test]
fn the_same_item_twice_counts_once() {
    let mut w = FailureWindow::new(FIVE_MIN, 100);
    assert!(w.insert(rec("1", "AAPL", at(0))));
    assert!(w.insert(rec("2", "AAPL", at(10))));
    assert!(w.insert(rec("3", "MSFT", at(20))));
    assert_eq!(w.len(), 3);
    assert_eq!(w.distinct_items(), 2);
    assert!(w.contains_item("AAPL"));
    assert_eq!(w.items(), vec!["AAPL", "MSFT"]);
}

#[test]
fn records_older_than_the_span_before_the_newest_leave() {
    let mut w = FailureWindow::new(FIVE_MIN, 100);
    w.insert(rec("1", "AAPL", at(0)));
    w.insert(rec("2", "MSFT", at(300)));
    // Exactly one span apart: still inside (the window is inclusive).
    assert_eq!(w.distinct_items(), 2);
    w.insert(rec("3", "GOOGL", at(301)));
    assert_eq!(w.items(), vec!["MSFT", "GOOGL"]);
    assert_eq!(w.first_seen(), Some(at(300)));
    assert_eq!(w.last_seen(), Some(at(301)));
}

#[test]
fn six_minutes_apart_never_share_a_window() {
    let mut w = FailureWindow::new(FIVE_MIN, 100);
    w.insert(rec("1", "AAPL", at(0)));
    w.insert(rec("2", "MSFT", at(360)));
    w.insert(rec("3", "GOOGL", at(720)));
    assert_eq!(w.distinct_items(), 1);
}

#[test]
fn a_late_record_outside_the_window_is_refused() {
    let mut w = FailureWindow::new(FIVE_MIN, 100);
    w.insert(rec("1", "AAPL", at(600)));
    assert!(!w.insert(rec("2", "MSFT", at(200))));
    assert_eq!(w.len(), 1);
    // Late but inside: kept, in timestamp order.
    assert!(w.insert(rec("3", "GOOGL", at(400))));
    assert_eq!(w.items(), vec!["GOOGL", "AAPL"]);
}

#[test]
fn evict_uses_the_given_now() {
    let mut w = FailureWindow::new(FIVE_MIN, 100);
    w.insert(rec("1", "AAPL", at(0)));
    w.insert(rec("2", "MSFT", at(100)));
    assert_eq!(w.evict(at(300)), 0);
    assert_eq!(w.evict(at(301)), 1);
    assert_eq!(w.items(), vec!["MSFT"]);
    assert_eq!(w.evict(at(1000)), 1);
    assert!(w.is_empty());
    assert_eq!(w.distinct_items(), 0);
}

#[test]
fn the_cap_drops_the_oldest_and_keeps_counts_right() {
    let mut w = FailureWindow::new(FIVE_MIN, 3);
    for (i, item) in ["AAPL", "MSFT", "AAPL", "GOOGL", "AMZN"].iter().enumerate() {
        w.insert(rec(&i.to_string(), item, at(i as i64)));
    }
    assert_eq!(w.len(), 3);
    let ids: Vec<&str> = w.records().map(|r| r.event_id.as_str()).collect();
    assert_eq!(ids, vec!["2", "3", "4"]);
    assert_eq!(w.items(), vec!["AAPL", "GOOGL", "AMZN"]);
    assert_eq!(w.distinct_items(), 3);
    // Full and older than everything kept: refused rather than kept then dropped.
    assert!(!w.insert(rec("old", "TSLA", at(1))));
    assert!(!w.contains_item("TSLA"));
}
