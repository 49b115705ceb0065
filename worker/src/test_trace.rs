//! Tests that look at trace context need spans with OpenTelemetry ids: the
//! process's telemetry, as a service installs it (no exporter), once.

use std::sync::Once;

use caucus_shared::config::TelemetryConfig;

/// Installs the process's tracing once (later calls do nothing).
pub(crate) fn init() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let cfg = TelemetryConfig {
            // Task spans are `info`; other crates' events stay quiet.
            log_level: "warn,caucus_worker=info".into(),
            sample_ratio: 1.0,
            ..TelemetryConfig::default()
        };
        let provider = caucus_shared::telemetry::tracer_provider(&cfg, "worker-test")
            .expect("a provider without an exporter");
        let guard = caucus_shared::telemetry::init_with_provider(&cfg, "worker-test", provider)
            .expect("the first telemetry of this test process");
        // Dropping the guard would shut the provider down for every test.
        std::mem::forget(guard);
    });
}
