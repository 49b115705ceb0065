//! Vendor messages → normalised text, semantic pattern and signature.

use std::collections::HashMap;

use caucus_correlator::normalize::{
    classify, normalize, normalize_message, semantic_pattern, SemanticPattern,
};
use caucus_correlator::signature::{signature, signature_for_item};

use SemanticPattern::*;

/// One vendor failure: who failed, the verbatim message, the pattern it must
/// map to and a group label; equal labels must share a signature, different
/// labels must not.
struct Row {
    agent: &'static str,
    error_type: &'static str,
    source: &'static str,
    item: &'static str,
    message: &'static str,
    pattern: Option<SemanticPattern>,
    group: &'static str,
}

const fn row(
    agent: &'static str,
    error_type: &'static str,
    source: &'static str,
    item: &'static str,
    message: &'static str,
    pattern: Option<SemanticPattern>,
    group: &'static str,
) -> Row {
    Row {
        agent,
        error_type,
        source,
        item,
        message,
        pattern,
        group,
    }
}

fn table() -> Vec<Row> {
    vec![
        // Koyfin quota: same failure, different timestamps, request ids and items.
        row("valuation", "QuotaError", "koyfin", "AAPL",
            "Koyfin API error 429: Too Many Requests - quota exceeded (1000/1000 calls used) at 2024-03-15T14:47:03.512Z request_id=7f3c9a2e-1b4d-4e8f-9a6c-2d5e8f1a3b7c",
            Some(ApiQuotaExceeded), "koyfin-quota"),
        row("valuation", "QuotaError", "koyfin", "MSFT",
            "Koyfin API error 429: Too Many Requests - quota exceeded (1000/1000 calls used) at 2024-03-15T14:47:41.087Z request_id=0b1e9d8c-7a6f-4e5d-8c3b-2a1f0e9d8c7b",
            Some(ApiQuotaExceeded), "koyfin-quota"),
        row("valuation", "QuotaError", "Koyfin", "GOOGL",
            "Quota exceeded for Koyfin plan: 1000/1000 requests today. RequestId: 4f1c2b3a9d8e",
            Some(ApiQuotaExceeded), "koyfin-quota"),
        // Polygon quota (JSON body with a 32-hex request id).
        row("financial", "HTTPError", "polygon", "AMZN",
            r#"{"status":"ERROR","request_id":"a1b2c3d4e5f60718293a4b5c6d7e8f90","error":"You've exceeded the maximum requests per minute, please wait or upgrade your subscription to continue. https://polygon.io/pricing"}"#,
            Some(ApiQuotaExceeded), "polygon-quota"),
        row("financial", "HTTPError", "polygon", "TSLA",
            r#"{"status":"ERROR","request_id":"f0e1d2c3b4a5968778695a4b3c2d1e0f","error":"You've exceeded the maximum requests per minute, please wait or upgrade your subscription to continue. https://polygon.io/pricing"}"#,
            Some(ApiQuotaExceeded), "polygon-quota"),
        // AlphaVantage: two wordings of its rate limit.
        row("screening", "RateLimitError", "alphavantage", "NVDA",
            "Thank you for using Alpha Vantage! Our standard API rate limit is 25 requests per day. Please subscribe to any of the premium plans at https://www.alphavantage.co/premium/ to instantly remove all daily rate limits.",
            Some(ApiQuotaExceeded), "av-quota"),
        row("screening", "RateLimitError", "alphavantage", "META",
            "Thank you for using Alpha Vantage! Our standard API call frequency is 5 calls per minute and 500 calls per day.",
            Some(ApiQuotaExceeded), "av-quota"),
        // FMP quota.
        row("business", "HTTPError", "fmp", "AAPL",
            "Limit Reach . Please upgrade your plan or visit our documentation for more details at https://site.financialmodelingprep.com/",
            Some(ApiQuotaExceeded), "fmp-quota"),
        // SEC EDGAR: fair-access throttle with a reference id, then the 403 page.
        row("business", "HTTPError", "sec_edgar", "MSFT",
            "Request Rate Threshold Exceeded. Your request rate has exceeded the fair access limit of 10 requests per second. Reference ID: 0.5c1f3a17.1710513423.2b8e9f01",
            Some(ApiQuotaExceeded), "edgar-quota"),
        row("business", "HTTPError", "sec_edgar", "GOOGL",
            "Request Rate Threshold Exceeded. Your request rate has exceeded the fair access limit of 10 requests per second. Reference ID: 0.7a2b3c4d.1710513487.9f8e7d6c",
            Some(ApiQuotaExceeded), "edgar-quota"),
        row("business", "HTTPError", "sec_edgar", "AMZN",
            "403 Forbidden: Your Request Originates from an Undeclared Automated Tool. Please declare your traffic by updating your user agent to include company specific information.",
            Some(AuthError), "edgar-auth"),
        row("business", "HTTPError", "sec_edgar", "AAPL",
            "HTTP Error 404: Not Found for url https://data.sec.gov/api/xbrl/companyfacts/CIK0000320193.json",
            Some(DataNotFound), "edgar-404"),
        row("business", "HTTPError", "sec_edgar", "TSLA",
            "HTTP Error 404: Not Found for url https://data.sec.gov/api/xbrl/companyfacts/CIK0001318605.json",
            Some(DataNotFound), "edgar-404"),
        // Bloomberg: timeout with ids, connection refused with IP:port, data license limit.
        row("financial", "BlpapiError", "bloomberg", "AAPL",
            "BLPAPI request timed out after 30000 ms (correlationId=12, requestId=5f2a8c91-3e4b-4d6a-8b7c-1a2b3c4d5e6f)",
            Some(Timeout), "bbg-timeout"),
        row("financial", "BlpapiError", "bloomberg", "MSFT",
            "BLPAPI request timed out after 45000 ms (correlationId=97, requestId=9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b)",
            Some(Timeout), "bbg-timeout"),
        row("financial", "BlpapiError", "bloomberg", "GOOGL",
            "Session terminated: connection refused by 10.12.4.21:8194 at Fri, 15 Mar 2024 14:47:03 GMT",
            Some(ConnectionError), "bbg-conn"),
        row("financial", "BlpapiError", "bloomberg", "AMZN",
            "Session terminated: connection refused by 10.12.4.37:8196 at Fri, 15 Mar 2024 14:52:11 GMT",
            Some(ConnectionError), "bbg-conn"),
        row("financial", "DataLicenseError", "bloomberg", "TSLA",
            "Bloomberg Data License: monthly limit exceeded (50000/50000 hits), x-request-id: req-9f8e7d6c5b4a",
            Some(ApiQuotaExceeded), "bbg-quota"),
        // FMP upstream failure; the item's ticker inside the URL is masked.
        row("financial", "HTTPError", "fmp", "AAPL",
            "500 Server Error: Internal Server Error for url: https://financialmodelingprep.com/api/v3/income-statement/AAPL?period=annual&apikey=****",
            Some(UpstreamError), "fmp-500"),
        row("financial", "HTTPError", "fmp", "NFLX",
            "500 Server Error: Internal Server Error for url: https://financialmodelingprep.com/api/v3/income-statement/NFLX?period=annual&apikey=****",
            Some(UpstreamError), "fmp-500"),
        row("financial", "HTTPError", "fmp", "META",
            "Error Message: Invalid API KEY. Feel free to create a Free API Key or visit https://site.financialmodelingprep.com/faqs?search=why-is-my-api-key-invalid",
            Some(AuthError), "fmp-auth"),
        // Polygon connection failure from urllib3 (object address is a hex id).
        row("strategy", "ConnectionError", "polygon", "AAPL",
            "HTTPSConnectionPool(host='api.polygon.io', port=443): Max retries exceeded with url: /v2/aggs/ticker/AAPL/range/1/day/2024-01-01/2024-03-15 (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f8b2c3d4e50>: Failed to establish a new connection: [Errno 111] Connection refused'))",
            Some(ConnectionError), "polygon-conn"),
        row("strategy", "ConnectionError", "polygon", "MSFT",
            "HTTPSConnectionPool(host='api.polygon.io', port=443): Max retries exceeded with url: /v2/aggs/ticker/MSFT/range/1/day/2024-01-01/2024-03-15 (Caused by NewConnectionError('<urllib3.connection.HTTPSConnection object at 0x7f0a1b2c9d88>: Failed to establish a new connection: [Errno 111] Connection refused'))",
            Some(ConnectionError), "polygon-conn"),
        row("strategy", "Timeout", "polygon", "AMZN",
            "Get \"https://api.polygon.io/v3/reference/tickers/AMZN\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
            Some(Timeout), "polygon-timeout"),
        // Koyfin timeout, DNS failure and bad key.
        row("valuation", "ReadTimeout", "koyfin", "AAPL",
            "HTTPSConnectionPool(host='api.koyfin.com', port=443): Read timed out. (read timeout=30)",
            Some(Timeout), "koyfin-timeout"),
        row("valuation", "ConnectionError", "koyfin", "MSFT",
            "Failed to resolve 'api.koyfin.com' ([Errno -3] Temporary failure in name resolution)",
            Some(ConnectionError), "koyfin-dns"),
        row("valuation", "AuthError", "koyfin", "GOOGL",
            "Invalid API key. Please check your credentials (x-request-id: req-9f8e7d6c5b4a)",
            Some(AuthError), "koyfin-auth"),
        // EDGAR network failure from a Go client.
        row("business", "NetError", "sec_edgar", "NVDA",
            "Get \"https://efts.sec.gov/LATEST/search-index?q=NVDA\": dial tcp 23.45.67.89:443: connect: network is unreachable",
            Some(ConnectionError), "edgar-net"),
        // AlphaVantage returning HTML instead of JSON.
        row("screening", "JSONDecodeError", "alphavantage", "AAPL",
            "JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
            Some(ParseError), "av-parse"),
        // No data for a symbol, and Bloomberg's unknown security.
        row("screening", "DataError", "fmp", "XYZQ",
            "No data found for symbol XYZQ (checked 2024-03-15 14:47:03 UTC)",
            Some(DataNotFound), "fmp-nodata"),
        row("screening", "DataError", "fmp", "ABCD",
            "No data found for symbol ABCD (checked 2024-03-15 14:49:27 UTC)",
            Some(DataNotFound), "fmp-nodata"),
        row("financial", "BlpapiError", "bloomberg", "MSFT",
            "RequestId: 3b9d2f4e-8a7c-4d6b-9e5f-1a2b3c4d5e6f Security not found: MSFT US Equity",
            Some(DataNotFound), "bbg-notfound"),
        // Agent bugs: no vendor pattern, collide on the stripped text.
        row("valuation", "ValueError", "", "AAPL",
            "Failed to compute DCF for AAPL: terminal growth 0.031 exceeds discount rate 0.029 (run 3f9a2c1d7e6b, 2024-03-15T14:47:03Z)",
            None, "dcf-bug"),
        row("valuation", "ValueError", "", "MSFT",
            "Failed to compute DCF for MSFT: terminal growth 0.042 exceeds discount rate 0.038 (run 9b8a7c6d5e4f, 2024-03-15T14:49:55Z)",
            None, "dcf-bug"),
        row("valuation", "ZeroDivisionError", "", "GOOGL",
            "float division by zero in dcf_model.py line 214 (task 018e4f7a-5b6c-7d8e-9f0a-1b2c3d4e5f60, epoch 1710513423)",
            None, "zero-div"),
        row("valuation", "ZeroDivisionError", "", "AMZN",
            "float division by zero in dcf_model.py line 214 (task 018e4f7b-0000-7d8e-9f0a-aabbccddeeff, epoch 1710513499)",
            None, "zero-div"),
        // Upstream 503 with an HTTP date.
        row("macro", "HTTPError", "fred", "SPY",
            "[Fri, 15 Mar 2024 14:47:03 GMT] upstream returned 503 Service Unavailable",
            Some(UpstreamError), "fred-503"),
    ]
}

#[test]
fn every_vendor_message_maps_to_its_pattern() {
    let rows = table();
    assert!(rows.len() >= 20, "table has {} rows", rows.len());
    for r in &rows {
        let n = normalize(r.message, Some(r.item));
        assert_eq!(
            n.pattern, r.pattern,
            "pattern of {:?} (normalised {:?})",
            r.message, n.text
        );
        assert_eq!(classify(r.message), r.pattern, "classify {:?}", r.message);
    }
}

#[test]
fn same_group_collides_and_different_groups_do_not() {
    let rows = table();
    let mut by_group: HashMap<&str, String> = HashMap::new();
    let mut by_hash: HashMap<String, &str> = HashMap::new();
    for r in &rows {
        let sig = signature_for_item(r.agent, r.error_type, r.source, r.message, Some(r.item));
        if let Some(hash) = by_group.get(r.group) {
            assert_eq!(
                hash, &sig.hash,
                "group {} must collide: {:?} normalised {:?}",
                r.group, r.message, sig.normalized_message
            );
        } else {
            by_group.insert(r.group, sig.hash.clone());
        }
        if let Some(group) = by_hash.get(&sig.hash) {
            assert_eq!(
                *group, r.group,
                "{:?} collides with group {}",
                r.message, group
            );
        } else {
            by_hash.insert(sig.hash.clone(), r.group);
        }
    }
    let groups: std::collections::HashSet<&str> = rows.iter().map(|r| r.group).collect();
    assert_eq!(by_hash.len(), groups.len());
}

#[test]
fn volatile_parts_are_stripped_from_the_text() {
    let cases = [
        (
            "Failed to compute DCF for AAPL: terminal growth 0.031 exceeds discount rate 0.029 (run 3f9a2c1d7e6b, 2024-03-15T14:47:03Z)",
            Some("AAPL"),
            "failed to compute dcf for ITEM: terminal growth N exceeds discount rate N (run)",
        ),
        (
            "float division by zero in dcf_model.py line 214 (task 018e4f7a-5b6c-7d8e-9f0a-1b2c3d4e5f60, epoch 1710513423)",
            None,
            "float division by zero in dcf_model.py line N (task, epoch)",
        ),
        (
            "Worker 7 failed at 14:47:03.123 on 10.0.0.12:4222 (request_id=abc-123)",
            None,
            "worker N failed at on",
        ),
        ("quota 1000/1000 used", None, "quota LIMIT_EXCEEDED used"),
        ("page 3/10 failed", None, "page N/N failed"),
        (
            "  Multiple    SPACES\tand\nLines  ",
            None,
            "multiple spaces and lines",
        ),
        ("x-request-id: 5f2a8c91 upstream hiccup", None, "upstream hiccup"),
        ("hiccup at Mar 15, 2024 (trace_id=ab12)", None, "hiccup at"),
        ("hiccup on 03/15/2024 2:47 PM", None, "hiccup on"),
        ("hiccup txn 0xdeadbeef", None, "hiccup txn"),
    ];
    for (msg, item, want) in cases {
        assert_eq!(normalize(msg, item).text, want, "normalising {msg:?}");
    }
}

#[test]
fn ticker_masking_is_whole_word_and_case_sensitive() {
    // `ALL` is a ticker and an English word: only the upper-case token goes.
    let n = normalize("all retries failed for ALL; ALLY unaffected", Some("all"));
    assert_eq!(n.text, "all retries failed for ITEM; ally unaffected");
    let a = normalize("no quote for BRK.B today", Some("BRK.B"));
    let b = normalize("no quote for BF.B today", Some("BF.B"));
    assert_eq!(a.text, b.text);
    assert_eq!(a.text, "no quote for ITEM today");
}

#[test]
fn status_digits_inside_ids_do_not_fake_a_pattern() {
    assert_eq!(semantic_pattern("job req-404abc crashed"), None);
    assert_eq!(
        semantic_pattern("task 4040a404-0404-4404-8404-404040404040 crashed"),
        None
    );
    assert_eq!(semantic_pattern("took 500ms then crashed"), None);
    assert_eq!(semantic_pattern("HTTP 404"), Some("data_not_found"));
    assert_eq!(semantic_pattern("HTTP 429"), Some("api_quota_exceeded"));
    assert_eq!(semantic_pattern("HTTP 401"), Some("auth_error"));
    assert_eq!(semantic_pattern("HTTP 502"), Some("upstream_error"));
}

#[test]
fn phrase_table_from_the_brief() {
    let cases = [
        ("Quota exceeded", "api_quota_exceeded"),
        ("rate limit hit", "api_quota_exceeded"),
        ("429 Too Many Requests", "api_quota_exceeded"),
        ("operation timed out", "timeout"),
        ("Timeout waiting for response", "timeout"),
        ("rpc error: DEADLINE EXCEEDED", "timeout"),
        ("Connection refused", "connection_error"),
        ("connection reset by peer", "connection_error"),
        ("could not connect to server", "connection_error"),
        ("read ECONNRESET", "connection_error"),
        ("Network unreachable", "connection_error"),
        ("DNS lookup failed", "connection_error"),
        ("404", "data_not_found"),
        ("ticker not found", "data_not_found"),
        ("No data returned", "data_not_found"),
        ("401 Unauthorized", "auth_error"),
        ("Forbidden", "auth_error"),
        ("500 Internal Server Error", "upstream_error"),
        ("Bad Gateway", "upstream_error"),
        ("503 Service Unavailable", "upstream_error"),
        ("failed to parse response body", "parse_error"),
        ("1000/1000", "api_quota_exceeded"),
    ];
    for (msg, want) in cases {
        assert_eq!(semantic_pattern(msg), Some(want), "pattern of {msg:?}");
    }
    assert_eq!(semantic_pattern("beta is NaN"), None);
    assert_eq!(normalize_message(""), "");
}

#[test]
fn signature_hash_is_sha256_prefix_of_the_joined_fields() {
    // printf 'valuation|quotaerror|koyfin|api_quota_exceeded' | sha256sum
    let sig = signature(
        " Valuation ",
        "QuotaError",
        " KOYFIN ",
        "Quota exceeded (1000/1000)",
    );
    assert_eq!(sig.hash, "f5c9e27414fe3cf6245ebaf5de101baf");
    assert_eq!(sig.agent_type, "valuation");
    assert_eq!(sig.error_type, "quotaerror");
    assert_eq!(sig.data_source, "koyfin");
    assert_eq!(sig.pattern, Some(ApiQuotaExceeded));
    assert_eq!(sig.hashed_message(), "api_quota_exceeded");
    assert_eq!(sig.normalized_message, "quota exceeded (LIMIT_EXCEEDED)");
}

#[test]
fn each_signature_field_separates_failures() {
    let base = signature("valuation", "QuotaError", "koyfin", "quota exceeded");
    for other in [
        signature("financial", "QuotaError", "koyfin", "quota exceeded"),
        signature("valuation", "HTTPError", "koyfin", "quota exceeded"),
        signature("valuation", "QuotaError", "polygon", "quota exceeded"),
        signature("valuation", "QuotaError", "koyfin", "read timed out"),
    ] {
        assert_ne!(base.hash, other.hash, "{other:?}");
    }
}
