//! Reading spans from the fake OTLP collector in the trace tests.

use std::time::Duration;

use fake_opentelemetry_collector::{ExportedSpan, FakeCollectorServer};
use tokio::time::Instant;

/// Drains `collector` into `all` (its channel holds only 64 spans, so a
/// test drains it while it waits) until `done` finds what the test waits
/// for, and returns that; fails after `timeout`, listing every span seen.
pub async fn spans_until<T>(
    collector: &mut FakeCollectorServer,
    all: &mut Vec<ExportedSpan>,
    timeout: Duration,
    mut done: impl FnMut(&[ExportedSpan]) -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        all.extend(collector.exported_spans(0, Duration::ZERO).await);
        if let Some(found) = done(all) {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "spans so far: {:?}",
            all.iter()
                .map(|s| format!(
                    "{} {} {} <- {}",
                    s.name, s.trace_id, s.span_id, s.parent_span_id
                ))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
