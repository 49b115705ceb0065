//! Turning vendor error text into a stable form, so that the same failure
//! reported with different timestamps, ids and counts yields the same text.
//!
//! Pipeline: mask the item's ticker → lowercase → strip timestamps, UUIDs,
//! request ids, hex ids, epochs and IP:port → ratios `used/limit` with
//! used ≥ limit become `LIMIT_EXCEEDED` → detect the semantic pattern →
//! remaining numbers become `N` → tidy separators and empty brackets left
//! behind, collapse whitespace.
//! The pattern is detected before numbers are replaced so that status codes
//! (`429`, `404`, …) still count, and after ids are stripped so that digits
//! inside an id never look like a status code.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde::{Deserialize, Serialize};

/// Placeholder for a ratio whose used part reached its limit (`1000/1000`).
pub const LIMIT_EXCEEDED: &str = "LIMIT_EXCEEDED";
/// Placeholder for the failing item's own ticker inside its message.
pub const ITEM_PLACEHOLDER: &str = "ITEM";
/// Placeholder for any other number.
pub const NUMBER_PLACEHOLDER: &str = "N";

/// A known failure cause recognised from the message's wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SemanticPattern {
    /// Vendor quota or rate limit hit (`429`, "rate limit", "quota exceeded").
    ApiQuotaExceeded,
    /// The call did not answer in time.
    Timeout,
    /// The connection could not be made or was dropped (refused, reset, DNS).
    ConnectionError,
    /// The vendor has no data for the request (`404`, "not found", "no data").
    DataNotFound,
    /// Credentials rejected (`401`, `403`).
    AuthError,
    /// The vendor failed on its side (`500`, `502`, `503`).
    UpstreamError,
    /// The answer could not be parsed.
    ParseError,
}

impl SemanticPattern {
    /// Every pattern, in the order they are tried.
    pub const ALL: [SemanticPattern; 7] = [
        SemanticPattern::ApiQuotaExceeded,
        SemanticPattern::Timeout,
        SemanticPattern::ConnectionError,
        SemanticPattern::AuthError,
        SemanticPattern::DataNotFound,
        SemanticPattern::UpstreamError,
        SemanticPattern::ParseError,
    ];

    /// The pattern's stable name, e.g. `api_quota_exceeded`.
    pub const fn as_str(self) -> &'static str {
        match self {
            SemanticPattern::ApiQuotaExceeded => "api_quota_exceeded",
            SemanticPattern::Timeout => "timeout",
            SemanticPattern::ConnectionError => "connection_error",
            SemanticPattern::DataNotFound => "data_not_found",
            SemanticPattern::AuthError => "auth_error",
            SemanticPattern::UpstreamError => "upstream_error",
            SemanticPattern::ParseError => "parse_error",
        }
    }

    /// Whether this is a network-level failure (timeout or connection).
    pub const fn is_network(self) -> bool {
        matches!(
            self,
            SemanticPattern::Timeout | SemanticPattern::ConnectionError
        )
    }

    fn regex(self) -> &'static Regex {
        match self {
            SemanticPattern::ApiQuotaExceeded => &QUOTA,
            SemanticPattern::Timeout => &TIMEOUT,
            SemanticPattern::ConnectionError => &CONNECTION,
            SemanticPattern::DataNotFound => &NOT_FOUND,
            SemanticPattern::AuthError => &AUTH,
            SemanticPattern::UpstreamError => &UPSTREAM,
            SemanticPattern::ParseError => &PARSE,
        }
    }
}

impl std::fmt::Display for SemanticPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A message after normalisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalizedMessage {
    /// The stripped text (ids, timestamps and numbers removed, lowercased).
    pub text: String,
    /// The recognised cause, if any.
    pub pattern: Option<SemanticPattern>,
}

impl NormalizedMessage {
    /// What identifies the message in a signature: the pattern when one
    /// matched (so different wordings of one cause collide), else the text.
    pub fn signature_text(&self) -> &str {
        match self.pattern {
            Some(p) => p.as_str(),
            None => &self.text,
        }
    }
}

fn re(pattern: &str) -> Regex {
    // The patterns are constants of this file; a typo is caught by every test.
    Regex::new(pattern).expect("built-in normalisation regex must compile")
}

const MONTH: &str = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?";
const ZONE: &str = r"(?:z|\s?[+-]\d{2}:?\d{2}|\s?(?:utc|gmt|est|edt|et))";

/// Everything that differs between two reports of the same failure.
static VOLATILE: LazyLock<Regex> = LazyLock::new(|| {
    let alternatives = [
        // ISO-8601 date-time, optional fraction and zone.
        format!(r"\b\d{{4}}-\d{{2}}-\d{{2}}[t ]\d{{1,2}}:\d{{2}}(?::\d{{2}}(?:[.,]\d+)?)?{ZONE}?"),
        // Bare dates: 2024-01-15, 2024/01/15, 01/15/2024 (with optional time).
        r"\b\d{4}[-/]\d{2}[-/]\d{2}\b".to_string(),
        r"\b\d{1,2}/\d{1,2}/\d{2,4}(?:,?\s\d{1,2}:\d{2}(?::\d{2})?(?:\s?[ap]m)?)?\b".to_string(),
        // RFC 2822 / HTTP dates: "mon, 15 jan 2024 14:47:03 gmt".
        format!(
            r"\b(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*,?\s+\d{{1,2}}\s+{MONTH}\s+\d{{4}}(?:\s+\d{{1,2}}:\d{{2}}(?::\d{{2}})?)?{ZONE}?"
        ),
        // "15 jan 2024", "jan 15, 2024", "jan 15".
        format!(r"\b\d{{1,2}}\s+{MONTH}\s+\d{{4}}\b"),
        format!(r"\b{MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"),
        // Clock times: 14:47, 14:47:03.123, 2:47 pm utc.
        format!(r"\b\d{{1,2}}:\d{{2}}(?::\d{{2}}(?:[.,]\d+)?)?(?:\s?[ap]m)?{ZONE}?\b"),
        // UUIDs.
        r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b".to_string(),
        // Request / trace ids with their key: request_id=…, x-request-id: …,
        // "requestid": "…", correlation-id=…, reference id: …
        r#"(?:x-)?(?:amzn-)?(?:request|req|trace|correlation|span|reference|ref)[ _-]?id"?\s*[:=]\s*["']?[a-z0-9][a-z0-9._\-/+]*["']?"#
            .to_string(),
        // Prefixed request ids: req-8f3a2b, req_01hq…
        r"\breq[-_][a-z0-9][a-z0-9\-]*".to_string(),
        // IPv4 with optional port.
        r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b".to_string(),
        // Epoch seconds / milliseconds, with optional fraction.
        r"\b\d{10,}(?:\.\d+)?\b".to_string(),
        // Hex ids of 8+ digits, also when glued to a prefix by `_`.
        r"(?:\b|_)(?:0x)?[0-9a-f]{8,}\b".to_string(),
        r"\b0x[0-9a-f]+\b".to_string(),
    ];
    re(&alternatives.join("|"))
});

static RATIO: LazyLock<Regex> = LazyLock::new(|| re(r"\b(\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)\b"));

static NUMBER: LazyLock<Regex> = LazyLock::new(|| re(r"\d+(?:[.,]\d+)*"));

/// Separators and spaces left dangling before a closing bracket or a
/// separator once ids are gone: "(run , )" → "(run)", "at , retry" → "at, retry".
static DANGLING_BEFORE: LazyLock<Regex> =
    LazyLock::new(|| re(r"\s*(?:[,;:]\s*)*([)\]}])|\s+([,;:])"));
/// The same after an opening bracket: "( , x" → "(x".
static DANGLING_AFTER: LazyLock<Regex> = LazyLock::new(|| re(r"([(\[{])[\s,;:]+"));
static EMPTY_BRACKETS: LazyLock<Regex> = LazyLock::new(|| re(r#"\(\)|\[\]|\{\}|""|''"#));

static QUOTA: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"quota|rate[ _-]?limit|too many requests|\b429\b|limit (?:exceeded|reached)|",
        r"limit reach\b|call frequency|throttl|exceeded (?:the )?max(?:imum)? (?:number of )?requests|",
        r"(?:daily|monthly) (?:capacity|limit)|capacity reached|rate threshold|usage limit|",
        r"credits? (?:exhausted|exceeded)"
    ))
});

static TIMEOUT: LazyLock<Regex> =
    LazyLock::new(|| re(r"timed?[ -]?out|deadline exceeded|\b504\b|took too long"));

static CONNECTION: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"connection (?:refused|reset|aborted|closed|error|failed|lost)|",
        r"(?:could not|couldn't|cannot|can't|unable to|failed to) (?:connect|establish|resolve)|",
        r"econn(?:reset|refused|aborted)|enotfound|eai_again|",
        r"(?:network|host) (?:is )?unreachable|no route to host|\bdns\b|name resolution|",
        r"getaddrinfo|name or service not known|broken pipe|remote end closed|",
        r"connectionerror|ssl ?(?:error|handshake)|tls handshake|socket hang up"
    ))
});

static AUTH: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"\b40[13]\b|unauthori[sz]ed|forbidden|invalid api[ _-]?key|",
        r"api[ _-]?key (?:is )?(?:invalid|missing|expired|revoked)|",
        r"authentication (?:failed|required|error)|access denied|permission denied|",
        r"invalid (?:token|credentials)|token (?:has )?expired|undeclared automated tool"
    ))
});

static NOT_FOUND: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"\b404\b|not found|no data|no results|does not exist|doesn't exist|",
        r"unknown (?:symbol|ticker)|no such (?:symbol|ticker)|",
        r"empty (?:response|result|dataset)|no (?:matching )?records"
    ))
});

static UPSTREAM: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"\b50[023]\b|internal server error|bad gateway|",
        r"service (?:temporarily )?unavailable|server error|upstream error|overloaded"
    ))
});

static PARSE: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r"pars(?:e|ing) error|(?:failed to|could not|unable to|cannot) parse|parseerror|",
        r"jsondecodeerror|json decode|invalid json|malformed|unexpected token|",
        r"unexpected end of|unexpected (?:character|eof)|expecting value|deserializ|syntax error"
    ))
});

/// Normalises `msg` without knowing which item failed.
pub fn normalize_message(msg: &str) -> String {
    normalize(msg, None).text
}

/// The semantic pattern name of `msg`, e.g. `Some("api_quota_exceeded")`.
pub fn semantic_pattern(msg: &str) -> Option<&'static str> {
    classify(msg).map(SemanticPattern::as_str)
}

/// The semantic pattern of `msg`.
pub fn classify(msg: &str) -> Option<SemanticPattern> {
    normalize(msg, None).pattern
}

/// Normalises `msg`; when `item` is given, upper-case occurrences of that
/// ticker become `ITEM` so that "no price for AAPL" and "no price for MSFT"
/// collide.
pub fn normalize(msg: &str, item: Option<&str>) -> NormalizedMessage {
    let lowered = lower_and_mask(msg, item);
    let stripped = VOLATILE.replace_all(&lowered, " ");
    let ratios = RATIO.replace_all(&stripped, |c: &Captures<'_>| ratio_placeholder(c));
    let pattern = detect(&ratios);
    let numbers = NUMBER.replace_all(&ratios, NUMBER_PLACEHOLDER);
    let before = DANGLING_BEFORE.replace_all(&numbers, "$1$2");
    let after = DANGLING_AFTER.replace_all(&before, "$1");
    let cleaned = EMPTY_BRACKETS.replace_all(&after, " ");
    NormalizedMessage {
        text: collapse(&cleaned),
        pattern,
    }
}

fn detect(text: &str) -> Option<SemanticPattern> {
    SemanticPattern::ALL
        .into_iter()
        .find(|p| p.regex().is_match(text))
        // A bare `1000/1000` with no other clue is a used-up allowance.
        .or_else(|| {
            text.contains(LIMIT_EXCEEDED)
                .then_some(SemanticPattern::ApiQuotaExceeded)
        })
}

fn ratio_placeholder(c: &Captures<'_>) -> Cow<'static, str> {
    let used = c[1].parse::<f64>().unwrap_or(0.0);
    let limit = c[2].parse::<f64>().unwrap_or(0.0);
    if limit > 0.0 && used >= limit {
        Cow::Borrowed(LIMIT_EXCEEDED)
    } else {
        Cow::Borrowed("N/N")
    }
}

/// Lowercases `msg`, replacing whole-word upper-case occurrences of the
/// ticker with [`ITEM_PLACEHOLDER`]. Matching is case-sensitive on purpose:
/// tickers such as `ALL`, `KEY` or `A` are also English words.
fn lower_and_mask(msg: &str, item: Option<&str>) -> String {
    let ticker = item.map(|t| t.trim().to_uppercase()).unwrap_or_default();
    if ticker.is_empty() {
        return msg.to_lowercase();
    }
    let mut out = String::with_capacity(msg.len());
    let mut last = 0;
    for (start, _) in msg.match_indices(ticker.as_str()) {
        let end = start + ticker.len();
        if start < last || !is_boundary(msg, start, end) {
            continue;
        }
        out.push_str(&msg[last..start].to_lowercase());
        out.push_str(ITEM_PLACEHOLDER);
        last = end;
    }
    out.push_str(&msg[last..].to_lowercase());
    out
}

fn is_boundary(msg: &str, start: usize, end: usize) -> bool {
    let before = msg[..start].chars().next_back();
    let after = msg[end..].chars().next();
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    !word(before) && !word(after)
}

/// Collapses whitespace and trims separators left over at either end.
fn collapse(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    let trimmed = out.trim_matches(|c: char| c.is_whitespace() || ",;:.-|/".contains(c));
    if trimmed.len() == out.len() {
        out
    } else {
        trimmed.to_string()
    }
}
