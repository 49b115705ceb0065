//! Root-cause inference over a set of correlated failures (DESIGN §5).
//!
//! Rules are tried in order; the first that holds wins:
//! 1. quota: every failure is `api_quota_exceeded`, one named source,
//!    ≥ `quota_items` items → "{Source} API quota exceeded";
//! 2. network: every failure is a timeout or connection error, one named
//!    source, ≥ `network_items` items → "{Source} network connectivity";
//! 3. data: every failure is `data_not_found`, ≥ `not_found_items` items →
//!    "{Source} data unavailable" (sources joined by `/` when several);
//! 4. agent bug: one agent type and one error type, ≥ `agent_bug_items`
//!    items → "{agent} failure - {error}";
//! 5. otherwise "Shared failure - {count} stocks".
//!
//! "Items" are distinct: the same stock failing twice counts once.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::normalize::SemanticPattern;
use crate::window::FailureRecord;

/// Which rule explained the failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RootCauseKind {
    /// A data source's quota or rate limit.
    Quota,
    /// A data source unreachable or too slow.
    Network,
    /// A data source without the requested data.
    DataUnavailable,
    /// One agent type failing the same way for many items.
    AgentBug,
    /// Correlated, but no rule explains why.
    Shared,
}

/// The inferred cause and its human-readable text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootCause {
    /// Which rule matched.
    pub kind: RootCauseKind,
    /// Text for people, e.g. "Koyfin API quota exceeded".
    pub text: String,
}

/// Minimum distinct items for each rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RootCauseThresholds {
    /// Items for the quota rule (default 3).
    pub quota_items: usize,
    /// Items for the network rule (default 5).
    pub network_items: usize,
    /// Items for the data-unavailable rule (default 3).
    pub not_found_items: usize,
    /// Items for the agent-bug rule (default 3).
    pub agent_bug_items: usize,
}

impl Default for RootCauseThresholds {
    fn default() -> Self {
        RootCauseThresholds {
            quota_items: 3,
            network_items: 5,
            not_found_items: 3,
            agent_bug_items: 3,
        }
    }
}

/// Infers the root cause with the default thresholds.
pub fn infer(failures: &[FailureRecord]) -> RootCause {
    infer_with(failures, &RootCauseThresholds::default())
}

/// Infers the root cause of `failures` with the given thresholds.
pub fn infer_with(failures: &[FailureRecord], thresholds: &RootCauseThresholds) -> RootCause {
    let items = failures
        .iter()
        .map(|f| f.item.as_str())
        .collect::<HashSet<_>>()
        .len();
    let all = |p: fn(SemanticPattern) -> bool| {
        !failures.is_empty() && failures.iter().all(|f| f.pattern.is_some_and(p))
    };
    let single_source = single_named_source(failures);

    if items >= thresholds.quota_items && all(|p| p == SemanticPattern::ApiQuotaExceeded) {
        if let Some(source) = &single_source {
            return cause(RootCauseKind::Quota, format!("{source} API quota exceeded"));
        }
    }
    if items >= thresholds.network_items && all(SemanticPattern::is_network) {
        if let Some(source) = &single_source {
            return cause(
                RootCauseKind::Network,
                format!("{source} network connectivity"),
            );
        }
    }
    if items >= thresholds.not_found_items && all(|p| p == SemanticPattern::DataNotFound) {
        let sources = display_sources(failures).join("/");
        return cause(
            RootCauseKind::DataUnavailable,
            format!("{sources} data unavailable"),
        );
    }
    if items >= thresholds.agent_bug_items {
        if let Some(first) = failures.first() {
            let same = failures.iter().all(|f| {
                f.agent_type.eq_ignore_ascii_case(&first.agent_type)
                    && f.error_type.eq_ignore_ascii_case(&first.error_type)
            });
            if same {
                return cause(
                    RootCauseKind::AgentBug,
                    format!("{} failure - {}", first.agent_type, first.error_type),
                );
            }
        }
    }
    cause(
        RootCauseKind::Shared,
        format!("Shared failure - {items} stocks"),
    )
}

fn cause(kind: RootCauseKind, text: String) -> RootCause {
    RootCause { kind, text }
}

/// The display name of the one non-empty source all failures share.
fn single_named_source(failures: &[FailureRecord]) -> Option<String> {
    let first = failures.first()?;
    if first.data_source.is_empty() {
        return None;
    }
    failures
        .iter()
        .all(|f| f.data_source.eq_ignore_ascii_case(&first.data_source))
        .then(|| display_source(&first.data_source))
}

/// Display names of the distinct sources, in order of first appearance.
fn display_sources(failures: &[FailureRecord]) -> Vec<String> {
    let mut seen = HashSet::new();
    failures
        .iter()
        .filter(|f| seen.insert(f.data_source.to_lowercase()))
        .map(|f| display_source(&f.data_source))
        .collect()
}

/// "koyfin" → "Koyfin"; a name with any capital ("SEC EDGAR", "AlphaVantage")
/// is kept as the event spelled it; no name → "Unknown source".
pub fn display_source(source: &str) -> String {
    let source = source.trim();
    if source.is_empty() {
        return "Unknown source".to_string();
    }
    if source.chars().any(char::is_uppercase) {
        return source.to_string();
    }
    let mut chars = source.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}
