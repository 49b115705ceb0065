//! A sliding time window of failures sharing one signature.
//!
//! The window is defined on event time: it keeps the records whose timestamp
//! is at most `span` before the newest record it has seen, so the result does
//! not depend on when the events are processed, only on their timestamps.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};

use crate::event::FailureEvent;
use crate::normalize::SemanticPattern;

/// Default window span (5 minutes, from the seed).
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(5 * 60);

/// One failure as the correlator keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureRecord {
    /// Id of the failure event.
    pub event_id: String,
    /// The failing item (stock ticker), trimmed and upper-cased.
    pub item: String,
    /// Agent type as reported.
    pub agent_type: String,
    /// Error type as reported.
    pub error_type: String,
    /// Data source as reported (original casing, used for display).
    pub data_source: String,
    /// Error message, verbatim.
    pub message: String,
    /// When the failure happened.
    pub timestamp: DateTime<Utc>,
    /// The message's semantic pattern, computed once when the record is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<SemanticPattern>,
}

impl FailureRecord {
    /// A record of `ev`; `pattern` is the one found while signing the message.
    pub fn from_event(ev: &FailureEvent, pattern: Option<SemanticPattern>) -> Self {
        FailureRecord {
            event_id: ev.event_id.clone(),
            item: canonical_item(&ev.stock_ticker),
            agent_type: ev.agent_type.trim().to_string(),
            error_type: ev.error_type.trim().to_string(),
            data_source: ev.data_source.trim().to_string(),
            message: ev.error_message.clone(),
            timestamp: ev.timestamp,
            pattern,
        }
    }
}

/// Tickers are case-insensitive; `aapl` and `AAPL` are one item.
pub fn canonical_item(ticker: &str) -> String {
    ticker.trim().to_uppercase()
}

/// `t - span`, saturating at the earliest representable instant.
pub(crate) fn before(t: DateTime<Utc>, span: TimeDelta) -> DateTime<Utc> {
    t.checked_sub_signed(span)
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// A standard duration as a chrono delta, saturating at the largest delta.
pub(crate) fn to_delta(d: Duration) -> TimeDelta {
    TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)
}

/// Failures of one signature within `span` of the newest one.
#[derive(Debug, Clone)]
pub struct FailureWindow {
    span: TimeDelta,
    cap: usize,
    /// Sorted by timestamp; ties keep arrival order.
    records: VecDeque<FailureRecord>,
    /// Records per item currently in the window.
    items: HashMap<String, u32>,
}

impl FailureWindow {
    /// An empty window of `span` keeping at most `cap` records (at least 1).
    pub fn new(span: Duration, cap: usize) -> Self {
        FailureWindow {
            span: to_delta(span),
            cap: cap.max(1),
            records: VecDeque::new(),
            items: HashMap::new(),
        }
    }

    /// Adds `record`, then drops records older than `span` before the newest
    /// and, beyond the cap, the oldest ones. Returns false when the record
    /// itself fell outside the window (it arrived too late) and was not kept.
    pub fn insert(&mut self, record: FailureRecord) -> bool {
        let ts = record.timestamp;
        if let Some(newest) = self.last_seen() {
            if ts < before(newest, self.span) {
                return false;
            }
        }
        if self.records.len() >= self.cap && self.first_seen().is_some_and(|first| ts < first) {
            // Full, and older than everything kept: it would be dropped first.
            return false;
        }
        let at = self.records.partition_point(|r| r.timestamp <= ts);
        *self.items.entry(record.item.clone()).or_insert(0) += 1;
        self.records.insert(at, record);
        if let Some(newest) = self.last_seen() {
            self.evict_before(before(newest, self.span));
        }
        while self.records.len() > self.cap {
            self.pop_oldest();
        }
        true
    }

    /// Drops records older than `span` before `now`; returns how many.
    pub fn evict(&mut self, now: DateTime<Utc>) -> usize {
        self.evict_before(before(now, self.span))
    }

    /// Drops records with a timestamp before `cutoff`; returns how many.
    pub fn evict_before(&mut self, cutoff: DateTime<Utc>) -> usize {
        let mut dropped = 0;
        while self.records.front().is_some_and(|r| r.timestamp < cutoff) {
            self.pop_oldest();
            dropped += 1;
        }
        dropped
    }

    fn pop_oldest(&mut self) {
        if let Some(old) = self.records.pop_front() {
            if let Some(n) = self.items.get_mut(&old.item) {
                *n -= 1;
                if *n == 0 {
                    self.items.remove(&old.item);
                }
            }
        }
    }

    /// Number of different items in the window (an item failing twice counts once).
    pub fn distinct_items(&self) -> usize {
        self.items.len()
    }

    /// Whether `item` has a failure in the window.
    pub fn contains_item(&self, item: &str) -> bool {
        self.items.contains_key(item)
    }

    /// Items in the order of their first failure in the window.
    pub fn items(&self) -> Vec<String> {
        let mut seen = std::collections::HashSet::with_capacity(self.items.len());
        self.records
            .iter()
            .filter(|r| seen.insert(r.item.as_str()))
            .map(|r| r.item.clone())
            .collect()
    }

    /// The records, oldest first.
    pub fn records(&self) -> impl ExactSizeIterator<Item = &FailureRecord> + '_ {
        self.records.iter()
    }

    /// Number of records kept.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether the window holds no record.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Timestamp of the oldest record.
    pub fn first_seen(&self) -> Option<DateTime<Utc>> {
        self.records.front().map(|r| r.timestamp)
    }

    /// Timestamp of the newest record.
    pub fn last_seen(&self) -> Option<DateTime<Utc>> {
        self.records.back().map(|r| r.timestamp)
    }
}
