//! Metrics for a caucus process: one OpenTelemetry meter provider whose
//! instruments are read two ways, by the Prometheus exporter behind
//! `/metrics` (when `telemetry.metrics_addr` is set) and by an OTLP push
//! (when `telemetry.otlp_endpoint` is set). With neither, no provider is
//! installed and every instrument is the API's no-op: recording costs
//! nothing measurable on the hot path.
//!
//! Instruments are named as Prometheus shows them, without unit suffixes
//! (histograms carry `_seconds` in their name); the exporter adds `_total`
//! to counters. Every process uses [`meter`].

use std::sync::OnceLock;

use opentelemetry::metrics::Meter;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::Resource;

use crate::config::TelemetryConfig;
use crate::Error;

/// The instrumentation scope of every caucus instrument.
pub const SCOPE: &str = "caucus";

/// Bucket bounds (seconds) of every duration histogram: from a millisecond
/// (a no-op task's dispatch) to ten minutes (a slow valuation).
pub const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0, 600.0,
];

static REGISTRY: OnceLock<prometheus::Registry> = OnceLock::new();

/// The meter every caucus instrument is made from (a no-op until
/// [`install`] ran with an exporter configured).
pub fn meter() -> Meter {
    opentelemetry::global::meter(SCOPE)
}

/// The Prometheus registry `/metrics` encodes, once [`install`] made one.
pub fn registry() -> Option<&'static prometheus::Registry> {
    REGISTRY.get()
}

/// The current metrics in Prometheus text format (empty when metrics are
/// off).
pub fn encode() -> String {
    use prometheus::Encoder;
    let Some(reg) = registry() else {
        return String::new();
    };
    let mut out = Vec::new();
    if let Err(e) = prometheus::TextEncoder::new().encode(&reg.gather(), &mut out) {
        tracing::warn!(error = %e, "encoding metrics failed");
    }
    String::from_utf8(out).unwrap_or_default()
}

/// Builds and installs the global meter provider for `cfg` (call once,
/// inside a Tokio runtime when OTLP is on). `None` when neither
/// `metrics_addr` nor `otlp_endpoint` (with `otlp_metrics`) is set.
pub fn install(
    cfg: &TelemetryConfig,
    service_name: &str,
) -> Result<Option<SdkMeterProvider>, Error> {
    let prometheus_on = cfg.metrics_addr.as_deref().is_some_and(|a| !a.is_empty());
    let otlp = cfg.otlp_target().filter(|_| cfg.otlp_metrics);
    if !prometheus_on && otlp.is_none() {
        return Ok(None);
    }
    let mut b = SdkMeterProvider::builder().with_resource(
        Resource::builder()
            .with_service_name(service_name.to_string())
            .build(),
    );
    if prometheus_on {
        let registry = REGISTRY.get_or_init(prometheus::Registry::new).clone();
        let exporter = opentelemetry_prometheus::exporter()
            .with_registry(registry)
            .without_target_info()
            .without_units()
            .scope_info_enabled(false)
            .build()
            .map_err(|e| Error::Config(format!("telemetry.metrics_addr: {e}")))?;
        b = b.with_reader(exporter);
    }
    if let Some(endpoint) = otlp {
        use opentelemetry_otlp::WithExportConfig;
        let exporter = opentelemetry_otlp::MetricExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .build()
            .map_err(|e| Error::Config(format!("telemetry.otlp_endpoint `{endpoint}`: {e}")))?;
        let reader = opentelemetry_sdk::metrics::PeriodicReader::builder(exporter)
            .with_interval(cfg.metrics_export_interval)
            .build();
        b = b.with_reader(reader);
    }
    let provider = b.build();
    opentelemetry::global::set_meter_provider(provider.clone());
    Ok(Some(provider))
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry::KeyValue;

    /// The names the dashboards and alerts use are the names Prometheus
    /// sees: counters gain `_total`, nothing else is added.
    #[test]
    fn prometheus_names_are_the_instrument_names() {
        let registry = prometheus::Registry::new();
        let exporter = opentelemetry_prometheus::exporter()
            .with_registry(registry.clone())
            .without_target_info()
            .without_units()
            .scope_info_enabled(false)
            .build()
            .unwrap();
        let provider = SdkMeterProvider::builder().with_reader(exporter).build();
        let m = provider.meter(SCOPE);
        m.u64_counter("caucus_tasks_dispatched")
            .build()
            .add(2, &[KeyValue::new("agent_type", "valuation")]);
        m.f64_histogram("caucus_dispatch_latency_seconds")
            .with_boundaries(SECONDS_BUCKETS.to_vec())
            .build()
            .record(0.02, &[]);
        m.i64_gauge("caucus_task_queue_depth")
            .build()
            .record(25, &[KeyValue::new("agent_type", "valuation")]);
        use prometheus::Encoder;
        let mut out = Vec::new();
        prometheus::TextEncoder::new()
            .encode(&registry.gather(), &mut out)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("caucus_tasks_dispatched_total{agent_type=\"valuation\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("caucus_dispatch_latency_seconds_bucket{le=\"0.025\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("caucus_task_queue_depth{agent_type=\"valuation\"} 25"),
            "{text}"
        );
        assert!(!text.contains("otel_scope"), "{text}");
    }
}
