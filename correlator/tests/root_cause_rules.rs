//! Root-cause rules and their thresholds (DESIGN §5), at the boundaries.

use caucus_correlator::normalize::classify;
use caucus_correlator::root_cause::{
    display_source, infer, infer_with, RootCause, RootCauseKind, RootCauseThresholds,
};
use caucus_correlator::window::FailureRecord;
use chrono::{TimeZone, Utc};

const QUOTA: &str = "429 Too Many Requests: quota exceeded (1000/1000)";
const TIMEOUT: &str = "Read timed out. (read timeout=30)";
const REFUSED: &str = "Connection refused";
const NOT_FOUND: &str = "HTTP Error 404: Not Found";
const BUG: &str = "cannot compute WACC: beta is NaN";

fn rec(item: &str, agent: &str, error_type: &str, source: &str, message: &str) -> FailureRecord {
    FailureRecord {
        event_id: format!("ev-{item}-{source}-{message}"),
        item: item.to_string(),
        agent_type: agent.to_string(),
        error_type: error_type.to_string(),
        data_source: source.to_string(),
        message: message.to_string(),
        timestamp: Utc.with_ymd_and_hms(2024, 3, 15, 14, 47, 0).unwrap(),
        pattern: classify(message),
    }
}

fn same(
    items: &[&str],
    agent: &str,
    error_type: &str,
    source: &str,
    msg: &str,
) -> Vec<FailureRecord> {
    items
        .iter()
        .map(|i| rec(i, agent, error_type, source, msg))
        .collect()
}

fn cause(kind: RootCauseKind, text: &str) -> RootCause {
    RootCause {
        kind,
        text: text.to_string(),
    }
}

const TICKERS: [&str; 5] = ["AAPL", "MSFT", "GOOGL", "AMZN", "TSLA"];

#[test]
fn quota_needs_three_items_from_one_source() {
    let two = same(&TICKERS[..2], "valuation", "QuotaError", "koyfin", QUOTA);
    assert_eq!(
        infer(&two),
        cause(RootCauseKind::Shared, "Shared failure - 2 stocks")
    );
    let three = same(&TICKERS[..3], "valuation", "QuotaError", "koyfin", QUOTA);
    assert_eq!(
        infer(&three),
        cause(RootCauseKind::Quota, "Koyfin API quota exceeded")
    );
}

#[test]
fn quota_counts_distinct_items_not_failures() {
    let one_item = same(
        &["AAPL", "AAPL", "AAPL", "AAPL"],
        "valuation",
        "QuotaError",
        "koyfin",
        QUOTA,
    );
    assert_eq!(
        infer(&one_item),
        cause(RootCauseKind::Shared, "Shared failure - 1 stocks")
    );
}

#[test]
fn quota_from_mixed_sources_is_not_a_source_quota() {
    let mut mixed = same(&TICKERS[..2], "valuation", "QuotaError", "koyfin", QUOTA);
    mixed.push(rec("GOOGL", "valuation", "QuotaError", "polygon", QUOTA));
    // Falls through to the agent-bug rule: same agent and error everywhere.
    assert_eq!(
        infer(&mixed),
        cause(RootCauseKind::AgentBug, "valuation failure - QuotaError")
    );
    mixed.push(rec("AMZN", "financial", "HTTPError", "polygon", QUOTA));
    assert_eq!(
        infer(&mixed),
        cause(RootCauseKind::Shared, "Shared failure - 4 stocks")
    );
}

#[test]
fn quota_needs_a_named_source() {
    let unnamed = same(&TICKERS[..3], "valuation", "QuotaError", "", QUOTA);
    assert_eq!(infer(&unnamed).kind, RootCauseKind::AgentBug);
}

#[test]
fn network_needs_five_items_from_one_source() {
    let four = same(&TICKERS[..4], "strategy", "ReadTimeout", "polygon", TIMEOUT);
    assert_eq!(
        infer(&four),
        cause(RootCauseKind::AgentBug, "strategy failure - ReadTimeout")
    );
    let five = same(&TICKERS, "strategy", "ReadTimeout", "polygon", TIMEOUT);
    assert_eq!(
        infer(&five),
        cause(RootCauseKind::Network, "Polygon network connectivity")
    );
}

#[test]
fn network_mixes_timeouts_and_connection_errors_but_not_sources() {
    let mut mixed_kinds = same(&TICKERS[..3], "strategy", "NetError", "polygon", TIMEOUT);
    mixed_kinds.extend(same(
        &TICKERS[3..],
        "strategy",
        "NetError",
        "polygon",
        REFUSED,
    ));
    assert_eq!(
        infer(&mixed_kinds),
        cause(RootCauseKind::Network, "Polygon network connectivity")
    );

    let mut mixed_sources = same(&TICKERS[..4], "strategy", "NetError", "polygon", TIMEOUT);
    mixed_sources.push(rec("TSLA", "strategy", "NetError", "koyfin", TIMEOUT));
    assert_eq!(
        infer(&mixed_sources),
        cause(RootCauseKind::AgentBug, "strategy failure - NetError")
    );
}

#[test]
fn not_found_needs_three_items_and_names_every_source() {
    let two = same(
        &TICKERS[..2],
        "business",
        "HTTPError",
        "SEC EDGAR",
        NOT_FOUND,
    );
    assert_eq!(infer(&two).kind, RootCauseKind::Shared);
    let three = same(
        &TICKERS[..3],
        "business",
        "HTTPError",
        "SEC EDGAR",
        NOT_FOUND,
    );
    assert_eq!(
        infer(&three),
        cause(RootCauseKind::DataUnavailable, "SEC EDGAR data unavailable")
    );
    let mut mixed = same(&TICKERS[..2], "business", "HTTPError", "fmp", NOT_FOUND);
    mixed.push(rec(
        "GOOGL",
        "financial",
        "DataError",
        "polygon",
        "no data for ticker",
    ));
    assert_eq!(
        infer(&mixed),
        cause(
            RootCauseKind::DataUnavailable,
            "Fmp/Polygon data unavailable"
        )
    );
}

#[test]
fn agent_bug_needs_three_items_with_one_agent_and_error() {
    let two = same(&TICKERS[..2], "valuation", "ValueError", "", BUG);
    assert_eq!(
        infer(&two),
        cause(RootCauseKind::Shared, "Shared failure - 2 stocks")
    );
    let three = same(&TICKERS[..3], "valuation", "ValueError", "", BUG);
    assert_eq!(
        infer(&three),
        cause(RootCauseKind::AgentBug, "valuation failure - ValueError")
    );
    let mut two_errors = same(&TICKERS[..2], "valuation", "ValueError", "", BUG);
    two_errors.push(rec("GOOGL", "valuation", "KeyError", "", BUG));
    assert_eq!(
        infer(&two_errors),
        cause(RootCauseKind::Shared, "Shared failure - 3 stocks")
    );
    let mut two_agents = same(&TICKERS[..2], "valuation", "ValueError", "", BUG);
    two_agents.push(rec("GOOGL", "financial", "ValueError", "", BUG));
    assert_eq!(infer(&two_agents).kind, RootCauseKind::Shared);
}

#[test]
fn rules_apply_in_design_order() {
    // Quota failures also share agent and error: quota wins over agent bug.
    let quota = same(&TICKERS, "valuation", "QuotaError", "koyfin", QUOTA);
    assert_eq!(infer(&quota).kind, RootCauseKind::Quota);
    // Five 404s from one source: data unavailable, not network or agent bug.
    let missing = same(&TICKERS, "business", "HTTPError", "fmp", NOT_FOUND);
    assert_eq!(infer(&missing).kind, RootCauseKind::DataUnavailable);
}

#[test]
fn thresholds_are_configuration() {
    let strict = RootCauseThresholds {
        quota_items: 5,
        network_items: 2,
        not_found_items: 4,
        agent_bug_items: 4,
    };
    let three_quota = same(&TICKERS[..3], "valuation", "QuotaError", "koyfin", QUOTA);
    assert_eq!(
        infer_with(&three_quota, &strict),
        cause(RootCauseKind::Shared, "Shared failure - 3 stocks")
    );
    let two_timeouts = same(&TICKERS[..2], "strategy", "ReadTimeout", "polygon", TIMEOUT);
    assert_eq!(
        infer_with(&two_timeouts, &strict),
        cause(RootCauseKind::Network, "Polygon network connectivity")
    );
    assert_eq!(
        RootCauseThresholds::default(),
        RootCauseThresholds {
            quota_items: 3,
            network_items: 5,
            not_found_items: 3,
            agent_bug_items: 3,
        }
    );
}

#[test]
fn source_display_names() {
    assert_eq!(display_source("koyfin"), "Koyfin");
    assert_eq!(display_source(" polygon "), "Polygon");
    assert_eq!(display_source("SEC EDGAR"), "SEC EDGAR");
    assert_eq!(display_source("AlphaVantage"), "AlphaVantage");
    assert_eq!(display_source(""), "Unknown source");
    // The first event's spelling is used for the text.
    let mut recs = same(&TICKERS[..2], "valuation", "QuotaError", "KOYFIN", QUOTA);
    recs.push(rec("GOOGL", "valuation", "QuotaError", "koyfin", QUOTA));
    assert_eq!(infer(&recs).text, "KOYFIN API quota exceeded");
}

#[test]
fn empty_input_is_a_shared_failure_of_nothing() {
    assert_eq!(
        infer(&[]),
        cause(RootCauseKind::Shared, "Shared failure - 0 stocks")
    );
}
