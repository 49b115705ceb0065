//! Single-threaded throughput of the engine, measured once and printed.
//!
//! Not a timed test: it asserts only correctness. Run with
//! `cargo test --release -p caucus-correlator --test throughput -- --ignored --nocapture`.

use std::time::Instant;

use caucus_correlator::engine::{CorrelationOutcome, Correlator, CorrelatorSettings};
use caucus_correlator::event::FailureEvent;
use chrono::{TimeDelta, TimeZone, Utc};

type Template = (
    &'static str,
    &'static str,
    &'static str,
    fn(usize, &str) -> String,
);

/// Distinct failure kinds, each message carrying per-event ids and times.
const TEMPLATES: [Template; 8] = [
    ("valuation", "QuotaError", "koyfin", |n, _| {
        format!("Koyfin API error 429: quota exceeded (1000/1000 calls used) at 2024-03-15T14:{:02}:{:02}.{:03}Z request_id=7f3c9a2e-1b4d-4e8f-9a6c-{n:012x}", n % 60, (n / 60) % 60, n % 1000)
    }),
    ("financial", "HTTPError", "polygon", |n, _| {
        format!(
            r#"{{"status":"ERROR","request_id":"{n:032x}","error":"You've exceeded the maximum requests per minute, please wait or upgrade your subscription to continue."}}"#
        )
    }),
    ("financial", "BlpapiError", "bloomberg", |n, _| {
        format!("BLPAPI request timed out after {} ms (correlationId={}, requestId=5f2a8c91-3e4b-4d6a-8b7c-{n:012x})", 30000 + n % 5000, n % 97)
    }),
    ("business", "HTTPError", "sec_edgar", |n, t| {
        format!("HTTP Error 404: Not Found for url https://data.sec.gov/api/xbrl/companyfacts/CIK{n:010}.json ({t})")
    }),
    ("strategy", "ConnectionError", "polygon", |n, t| {
        format!("HTTPSConnectionPool(host='api.polygon.io', port=443): Max retries exceeded with url: /v2/aggs/ticker/{t}/range/1/day/2024-01-01/2024-03-15 (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f8b{n:08x}>: Failed to establish a new connection: [Errno 111] Connection refused'))")
    }),
    ("valuation", "ValueError", "", |n, t| {
        format!("Failed to compute DCF for {t}: terminal growth 0.0{} exceeds discount rate 0.0{} (run {n:012x}, 2024-03-15T14:47:03Z)", n % 90 + 10, n % 80 + 10)
    }),
    ("screening", "JSONDecodeError", "alphavantage", |n, _| {
        format!(
            "JSONDecodeError: Expecting value: line 1 column {} (char {})",
            n % 40,
            n % 400
        )
    }),
    ("macro", "HTTPError", "fred", |n, _| {
        format!("[Fri, 15 Mar 2024 14:{:02}:{:02} GMT] upstream returned 503 Service Unavailable (trace_id={n:x})", n % 60, (n / 7) % 60)
    }),
];

#[test]
#[ignore = "measurement; run in release with --ignored --nocapture"]
fn throughput_single_thread() {
    const EVENTS: usize = 200_000;
    const TICKERS: usize = 400;
    let t0 = Utc.with_ymd_and_hms(2024, 3, 15, 14, 0, 0).unwrap();
    let tickers: Vec<String> = (0..TICKERS).map(|i| format!("T{i:03}X")).collect();
    let events: Vec<FailureEvent> = (0..EVENTS)
        .map(|n| {
            let (agent, error_type, source, msg) = TEMPLATES[n % TEMPLATES.len()];
            let ticker = &tickers[(n / TEMPLATES.len()) % TICKERS];
            FailureEvent {
                schema_version: 1,
                event_id: format!("ev-{n}"),
                workflow_id: None,
                stock_ticker: ticker.clone(),
                agent_type: agent.into(),
                error_type: error_type.into(),
                error_message: msg(n, ticker),
                data_source: source.into(),
                // 1 ms apart: the whole run fits in one window.
                timestamp: t0 + TimeDelta::milliseconds(n as i64),
            }
        })
        .collect();

    let mut c = Correlator::new(CorrelatorSettings::default()).unwrap();
    let (mut detected, mut joined) = (0usize, 0usize);
    let start = Instant::now();
    for (n, ev) in events.into_iter().enumerate() {
        let now = ev.timestamp;
        for o in c.on_failure(ev).unwrap() {
            match o {
                CorrelationOutcome::Detected(_) => detected += 1,
                CorrelationOutcome::Joined { .. } => joined += 1,
                CorrelationOutcome::Closed(_) => {}
            }
        }
        if n % 10_000 == 0 {
            c.expire(now);
        }
    }
    let elapsed = start.elapsed();
    let rate = EVENTS as f64 / elapsed.as_secs_f64();
    println!(
        "correlator throughput: {EVENTS} events in {:.3} s = {rate:.0} events/s \
         ({detected} detected, {joined} joined, {} signatures)",
        elapsed.as_secs_f64(),
        c.tracked_signatures()
    );
    // Every template is one signature that reaches the threshold once; each
    // later failure joins its incident.
    assert_eq!(detected, TEMPLATES.len());
    assert_eq!(c.tracked_signatures(), TEMPLATES.len());
    assert_eq!(joined, EVENTS - 3 * TEMPLATES.len());
}
