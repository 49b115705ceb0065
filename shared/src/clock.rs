//! Time as a dependency: logic takes a [`Clock`], tests use [`ManualClock`].

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};

/// A source of wall-clock time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current instant in UTC.
    fn now(&self) -> DateTime<Utc>;

    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64 {
        self.now().timestamp_millis()
    }
}

/// Shared handle to a clock.
pub type SharedClock = Arc<dyn Clock>;

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to; for pure-logic tests.
#[derive(Debug)]
pub struct ManualClock {
    ms: AtomicI64,
}

impl ManualClock {
    /// A clock stopped at `start`.
    pub fn new(start: DateTime<Utc>) -> Self {
        ManualClock {
            ms: AtomicI64::new(start.timestamp_millis()),
        }
    }

    /// A clock stopped at 2025-01-01T00:00:00Z.
    pub fn at_epoch() -> Self {
        Self::new(Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap())
    }

    /// Moves the clock forward.
    pub fn advance(&self, d: Duration) {
        self.ms.fetch_add(d.as_millis() as i64, Ordering::SeqCst);
    }

    /// Sets the clock.
    pub fn set(&self, t: DateTime<Utc>) {
        self.ms.store(t.timestamp_millis(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        Utc.timestamp_millis_opt(self.ms.load(Ordering::SeqCst))
            .single()
            .expect("valid timestamp")
    }
}

/// JetStream's `time` timestamps → `chrono`.
pub fn to_chrono(t: time::OffsetDateTime) -> DateTime<Utc> {
    let nanos = i64::try_from(t.unix_timestamp_nanos()).unwrap_or(i64::MAX);
    DateTime::from_timestamp_nanos(nanos)
}

/// `chrono` → JetStream's `time` (clamped to the Unix epoch).
pub fn to_time(t: DateTime<Utc>) -> time::OffsetDateTime {
    let nanos = t.timestamp_nanos_opt().unwrap_or(0).max(0);
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(nanos))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let c = ManualClock::at_epoch();
        let t0 = c.now();
        assert_eq!(c.now(), t0);
        c.advance(Duration::from_secs(90));
        assert_eq!((c.now() - t0).num_seconds(), 90);
    }
}
