//! The correlator: failures in, incidents (correlations) out.
//!
//! Pure and deterministic: it never reads a clock. Everything on the
//! `on_failure` path is decided by the events' own timestamps, so two
//! instances fed the same events in the same order produce the same outcomes
//! and the same correlation ids. Only [`Correlator::expire`] takes a `now`,
//! to close quiet incidents and free memory.
//!
//! Per signature there is at most one open incident. It opens when the
//! signature's window first holds `batch_threshold` distinct items, takes in
//! every later failure of that signature, and closes once a full window passes
//! with no failure (seen either by a later event or by `expire`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::event::{FailureEvent, InvalidFailureEvent};
use crate::root_cause::{infer_with, RootCause, RootCauseThresholds};
use crate::signature::{signature_for_item, Signature};
use crate::window::{before, to_delta, FailureRecord, FailureWindow, DEFAULT_WINDOW};

/// Tunables of the correlator; every duration and bound is configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorrelatorSettings {
    /// Span of the sliding window (default 5 min).
    pub window: Duration,
    /// Distinct items within the window that make an incident (default 3).
    pub batch_threshold: usize,
    /// Records kept per signature window; the oldest go first (default 1000).
    pub max_records_per_signature: usize,
    /// Signatures tracked at once; the least recently failing one is dropped
    /// to make room (default 10 000).
    pub max_signatures: usize,
    /// Event ids listed in one correlation; later ones are only counted
    /// (default 1000).
    pub max_event_ids_per_correlation: usize,
    /// How long an event id is remembered to ignore its replay (default 1 h).
    pub dedupe_horizon: Duration,
    /// Event ids remembered at most (default 200 000).
    pub max_tracked_event_ids: usize,
    /// Root-cause rule thresholds.
    pub thresholds: RootCauseThresholds,
}

impl Default for CorrelatorSettings {
    fn default() -> Self {
        CorrelatorSettings {
            window: DEFAULT_WINDOW,
            batch_threshold: 3,
            max_records_per_signature: 1000,
            max_signatures: 10_000,
            max_event_ids_per_correlation: 1000,
            dedupe_horizon: Duration::from_secs(3600),
            max_tracked_event_ids: 200_000,
            thresholds: RootCauseThresholds::default(),
        }
    }
}

/// What went wrong in the correlator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CorrelatorError {
    /// The failure event is unusable.
    #[error(transparent)]
    InvalidEvent(#[from] InvalidFailureEvent),
    /// A setting is out of range.
    #[error("invalid correlator setting `{name}`: {reason}")]
    InvalidSetting {
        /// The setting's field name.
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

impl CorrelatorSettings {
    /// Checks that the settings can work.
    pub fn validate(&self) -> Result<(), CorrelatorError> {
        let bad = |name, reason: &str| {
            Err(CorrelatorError::InvalidSetting {
                name,
                reason: reason.to_string(),
            })
        };
        if self.window.is_zero() {
            return bad("window", "must be longer than zero");
        }
        if TimeDelta::from_std(self.window).is_err() {
            return bad("window", "is too long to represent");
        }
        let positive = [
            ("batch_threshold", self.batch_threshold),
            ("max_records_per_signature", self.max_records_per_signature),
            ("max_signatures", self.max_signatures),
            ("max_tracked_event_ids", self.max_tracked_event_ids),
            ("thresholds.quota_items", self.thresholds.quota_items),
            ("thresholds.network_items", self.thresholds.network_items),
            (
                "thresholds.not_found_items",
                self.thresholds.not_found_items,
            ),
            (
                "thresholds.agent_bug_items",
                self.thresholds.agent_bug_items,
            ),
        ];
        for (name, value) in positive {
            if value == 0 {
                return bad(name, "must be at least 1");
            }
        }
        if self.max_records_per_signature < self.batch_threshold {
            return bad(
                "max_records_per_signature",
                "must be at least batch_threshold, or no incident could ever open",
            );
        }
        Ok(())
    }
}

/// One incident: failures of one signature affecting several items.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Correlation {
    /// Stable id, a UUIDv8 derived from the signature and `first_seen` at
    /// detection, so replaying the same events yields the same id.
    pub correlation_id: String,
    /// The shared signature.
    pub signature: Signature,
    /// Affected items, in order of their first failure.
    pub items: Vec<String>,
    /// Inferred root cause; refined as items join.
    pub root_cause: RootCause,
    /// Earliest failure in the incident.
    pub first_seen: DateTime<Utc>,
    /// Latest failure in the incident.
    pub last_seen: DateTime<Utc>,
    /// Ids of the incident's failure events (the first
    /// `max_event_ids_per_correlation`).
    pub event_ids: Vec<String>,
    /// Number of failure events in the incident, listed or not.
    pub failure_count: u64,
}

/// What one input did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum CorrelationOutcome {
    /// A signature reached the batch threshold: a new incident.
    Detected(Correlation),
    /// A failure joined an open incident.
    Joined {
        /// The incident joined.
        correlation_id: String,
        /// The failing item.
        item: String,
        /// Whether the item is new to the incident (false: it failed again).
        new_item: bool,
        /// The incident's root cause when this failure changed it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        root_cause: Option<RootCause>,
    },
    /// An incident ended: a full window passed without a failure, or it was
    /// dropped to stay within `max_signatures`. Final state.
    Closed(Correlation),
}

#[derive(Debug)]
struct Incident {
    correlation: Correlation,
    /// First failure of each item: enough for root-cause inference, since
    /// every failure of an incident has the same signature.
    representatives: Vec<FailureRecord>,
    item_set: HashSet<String>,
}

#[derive(Debug)]
struct SignatureState {
    signature: Signature,
    window: FailureWindow,
    incident: Option<Incident>,
}

impl SignatureState {
    fn last_activity(&self) -> Option<DateTime<Utc>> {
        let incident = self.incident.as_ref().map(|i| i.correlation.last_seen);
        self.window.last_seen().max(incident)
    }
}

/// The failure correlator.
#[derive(Debug)]
pub struct Correlator {
    settings: CorrelatorSettings,
    window: TimeDelta,
    dedupe_horizon: TimeDelta,
    states: HashMap<String, SignatureState>,
    /// Open incident id → signature hash.
    open: HashMap<String, String>,
    seen: HashSet<String>,
    seen_order: VecDeque<(DateTime<Utc>, String)>,
    watermark: Option<DateTime<Utc>>,
}

impl Correlator {
    /// A correlator with validated `settings`.
    pub fn new(settings: CorrelatorSettings) -> Result<Self, CorrelatorError> {
        settings.validate()?;
        Ok(Correlator {
            window: to_delta(settings.window),
            dedupe_horizon: to_delta(settings.dedupe_horizon),
            settings,
            states: HashMap::new(),
            open: HashMap::new(),
            seen: HashSet::new(),
            seen_order: VecDeque::new(),
            watermark: None,
        })
    }

    /// The settings in force.
    pub fn settings(&self) -> &CorrelatorSettings {
        &self.settings
    }

    /// Takes one failure. Returns, in order: the incident of the same
    /// signature that this failure's timestamp shows has ended (`Closed`),
    /// then `Detected` or `Joined`. An event id already seen returns nothing;
    /// so does a failure older than its signature's window with no open
    /// incident to join.
    pub fn on_failure(
        &mut self,
        ev: FailureEvent,
    ) -> Result<Vec<CorrelationOutcome>, CorrelatorError> {
        ev.validate()?;
        if !self.remember(&ev) {
            return Ok(Vec::new());
        }
        let mut outcomes = Vec::new();
        let sig = signature_for_item(
            &ev.agent_type,
            &ev.error_type,
            &ev.data_source,
            &ev.error_message,
            Some(&ev.stock_ticker),
        );
        let record = FailureRecord::from_event(&ev, sig.pattern);
        if !self.states.contains_key(&sig.hash) {
            self.make_room(&mut outcomes);
        }
        let state = self
            .states
            .entry(sig.hash.clone())
            .or_insert_with(|| SignatureState {
                window: FailureWindow::new(
                    self.settings.window,
                    self.settings.max_records_per_signature,
                ),
                signature: sig,
                incident: None,
            });

        let ts = record.timestamp;
        let span = self.window;
        let quiet = |i: &Incident| before(ts, span) > i.correlation.last_seen;
        if state.incident.as_ref().is_some_and(quiet) {
            if let Some(done) = state.incident.take() {
                self.open.remove(&done.correlation.correlation_id);
                outcomes.push(CorrelationOutcome::Closed(done.correlation));
            }
        }

        let joins = state
            .incident
            .as_ref()
            .is_some_and(|i| ts >= before(i.correlation.first_seen, span));
        if joins {
            if let Some(incident) = state.incident.as_mut() {
                outcomes.push(join(incident, &record, &self.settings));
            }
            state.window.insert(record);
            return Ok(outcomes);
        }

        if !state.window.insert(record) || state.incident.is_some() {
            return Ok(outcomes);
        }
        if state.window.distinct_items() >= self.settings.batch_threshold {
            let incident = open_incident(state, &self.settings);
            let id = incident.correlation.correlation_id.clone();
            self.open.insert(id, state.signature.hash.clone());
            outcomes.push(CorrelationOutcome::Detected(incident.correlation.clone()));
            state.incident = Some(incident);
        }
        Ok(outcomes)
    }

    /// Advances time to `now`: closes incidents quiet for a full window,
    /// drops records that left their window, forgets old event ids and
    /// signatures with nothing left. Returns the closed incidents, oldest
    /// first.
    pub fn expire(&mut self, now: DateTime<Utc>) -> Vec<Correlation> {
        let cutoff = before(now, self.window);
        let mut closed = Vec::new();
        self.states.retain(|_, state| {
            state.window.evict(now);
            if state
                .incident
                .as_ref()
                .is_some_and(|i| i.correlation.last_seen < cutoff)
            {
                if let Some(done) = state.incident.take() {
                    closed.push(done.correlation);
                }
            }
            state.incident.is_some() || !state.window.is_empty()
        });
        for c in &closed {
            self.open.remove(&c.correlation_id);
        }
        closed.sort_by(|a, b| {
            (a.last_seen, &a.correlation_id).cmp(&(b.last_seen, &b.correlation_id))
        });
        let horizon = self.watermark.map_or(now, |w| w.max(now));
        self.forget_before(before(horizon, self.dedupe_horizon));
        closed
    }

    /// An open incident by id.
    pub fn correlation(&self, correlation_id: &str) -> Option<&Correlation> {
        let hash = self.open.get(correlation_id)?;
        self.states
            .get(hash)?
            .incident
            .as_ref()
            .map(|i| &i.correlation)
    }

    /// All open incidents, ordered by first failure then id.
    pub fn open_correlations(&self) -> Vec<&Correlation> {
        let mut all: Vec<&Correlation> = self
            .states
            .values()
            .filter_map(|s| s.incident.as_ref().map(|i| &i.correlation))
            .collect();
        all.sort_by(|a, b| {
            (a.first_seen, &a.correlation_id).cmp(&(b.first_seen, &b.correlation_id))
        });
        all
    }

    /// Number of signatures currently tracked.
    pub fn tracked_signatures(&self) -> usize {
        self.states.len()
    }

    /// Number of event ids remembered for replay detection.
    pub fn tracked_event_ids(&self) -> usize {
        self.seen.len()
    }

    /// Records `ev`'s id; false when it was already seen.
    fn remember(&mut self, ev: &FailureEvent) -> bool {
        if self.seen.contains(&ev.event_id) {
            return false;
        }
        self.seen.insert(ev.event_id.clone());
        self.seen_order
            .push_back((ev.timestamp, ev.event_id.clone()));
        let watermark = self.watermark.map_or(ev.timestamp, |w| w.max(ev.timestamp));
        self.watermark = Some(watermark);
        self.forget_before(before(watermark, self.dedupe_horizon));
        true
    }

    fn forget_before(&mut self, cutoff: DateTime<Utc>) {
        while let Some((ts, _)) = self.seen_order.front() {
            if *ts >= cutoff && self.seen_order.len() <= self.settings.max_tracked_event_ids {
                break;
            }
            if let Some((_, id)) = self.seen_order.pop_front() {
                self.seen.remove(&id);
            }
        }
    }

    /// Drops the least recently failing signature when at capacity,
    /// preferring one without an open incident.
    fn make_room(&mut self, outcomes: &mut Vec<CorrelationOutcome>) {
        if self.states.len() < self.settings.max_signatures {
            return;
        }
        let victim = self
            .states
            .iter()
            .min_by(|(ha, a), (hb, b)| {
                (a.incident.is_some(), a.last_activity(), *ha).cmp(&(
                    b.incident.is_some(),
                    b.last_activity(),
                    *hb,
                ))
            })
            .map(|(hash, _)| hash.clone());
        if let Some(state) = victim.and_then(|h| self.states.remove(&h)) {
            if let Some(done) = state.incident {
                self.open.remove(&done.correlation.correlation_id);
                outcomes.push(CorrelationOutcome::Closed(done.correlation));
            }
        }
    }
}

fn open_incident(state: &SignatureState, settings: &CorrelatorSettings) -> Incident {
    let window = &state.window;
    let first_seen = window.first_seen().unwrap_or(DateTime::<Utc>::MIN_UTC);
    let last_seen = window.last_seen().unwrap_or(first_seen);
    let mut item_set = HashSet::new();
    let representatives: Vec<FailureRecord> = window
        .records()
        .filter(|r| item_set.insert(r.item.clone()))
        .cloned()
        .collect();
    let items = representatives.iter().map(|r| r.item.clone()).collect();
    let event_ids = window
        .records()
        .take(settings.max_event_ids_per_correlation)
        .map(|r| r.event_id.clone())
        .collect();
    Incident {
        correlation: Correlation {
            correlation_id: correlation_id(&state.signature.hash, first_seen),
            signature: state.signature.clone(),
            items,
            root_cause: infer_with(&representatives, &settings.thresholds),
            first_seen,
            last_seen,
            event_ids,
            failure_count: window.len() as u64,
        },
        representatives,
        item_set,
    }
}

fn join(
    incident: &mut Incident,
    record: &FailureRecord,
    settings: &CorrelatorSettings,
) -> CorrelationOutcome {
    let c = &mut incident.correlation;
    c.first_seen = c.first_seen.min(record.timestamp);
    c.last_seen = c.last_seen.max(record.timestamp);
    c.failure_count += 1;
    if c.event_ids.len() < settings.max_event_ids_per_correlation {
        c.event_ids.push(record.event_id.clone());
    }
    let new_item = incident.item_set.insert(record.item.clone());
    let mut changed = None;
    if new_item {
        c.items.push(record.item.clone());
        incident.representatives.push(record.clone());
        let cause = infer_with(&incident.representatives, &settings.thresholds);
        if cause != c.root_cause {
            c.root_cause = cause.clone();
            changed = Some(cause);
        }
    }
    CorrelationOutcome::Joined {
        correlation_id: c.correlation_id.clone(),
        item: record.item.clone(),
        new_item,
        root_cause: changed,
    }
}

/// The id of the incident of `signature_hash` whose first failure was at
/// `first_seen`: a UUIDv8 over SHA-256 of both.
pub fn correlation_id(signature_hash: &str, first_seen: DateTime<Utc>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"caucus-correlation|");
    hasher.update(signature_hash.as_bytes());
    hasher.update(b"|");
    hasher.update(
        first_seen
            .to_rfc3339_opts(SecondsFormat::AutoSi, true)
            .as_bytes(),
    );
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes)
        .into_uuid()
        .to_string()
}
