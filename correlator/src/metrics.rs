//! The correlator's metrics (docs/OBSERVABILITY.md lists them all).
//! Instruments are made once, from the process's meter; recording into
//! them is a no-op when metrics are off.
//!
//! - `caucus_correlations_total` (counter): incidents detected, counted
//!   when their `correlation_detected` goes out, so a replay that
//!   re-detects an incident already announced does not count it again.
//! - `caucus_failures_observed_total` (counter): failure events the live
//!   consumer took in (the start-up replay re-reads failures a previous
//!   leader already counted, and is not counted).

use std::sync::OnceLock;

use caucus_shared::telemetry::metrics::meter;
use opentelemetry::metrics::Counter;

struct Instruments {
    correlations: Counter<u64>,
    failures: Counter<u64>,
}

fn instruments() -> &'static Instruments {
    static I: OnceLock<Instruments> = OnceLock::new();
    I.get_or_init(|| {
        let m = meter();
        Instruments {
            correlations: m
                .u64_counter("caucus_correlations")
                .with_description("Incidents of correlated failures detected")
                .build(),
            failures: m
                .u64_counter("caucus_failures_observed")
                .with_description("Failure events the correlator took in")
                .build(),
        }
    })
}

/// Counts an incident whose detection went out.
pub(crate) fn correlation_detected() {
    instruments().correlations.add(1, &[]);
}

/// Counts a failure event taken in by the live consumer.
pub(crate) fn failure_observed() {
    instruments().failures.add(1, &[]);
}
