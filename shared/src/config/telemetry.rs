//! `[telemetry]`: logs, traces and metrics.

use serde::{Deserialize, Serialize};

/// Log output format.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Pretty,
    /// One JSON object per line.
    Json,
}

/// `telemetry.trace_level`'s default: trace every caucus span when an
/// exporter is configured, none otherwise.
pub const AUTO_TRACE_LEVEL: &str = "auto";

/// Logging and tracing settings.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct TelemetryConfig {
    /// `pretty` or `json`.
    pub log_format: LogFormat,
    /// An `EnvFilter` directive such as `info,caucus=debug` (`RUST_LOG` wins).
    pub log_level: String,
    /// OTLP gRPC endpoint (e.g. `http://127.0.0.1:4317`); traces are exported
    /// only when set.
    pub otlp_endpoint: Option<String>,
    /// Fraction of root traces sampled (0.0–1.0).
    pub sample_ratio: f64,
    /// An `EnvFilter` directive choosing which spans are traced, apart
    /// from which lines are logged (`info`: every caucus span; `off`: no
    /// spans, so no trace context is made or stored), or `auto`: `info`
    /// when `otlp_endpoint` is set, `off` otherwise (building spans that
    /// go nowhere cost a fifth of the no-op throughput). A quieter
    /// `log_level` never switches traces off.
    pub trace_level: String,
    /// Finished spans held for export at most; beyond it spans are dropped
    /// (a burst of dispatches must not lose its traces nor grow memory
    /// without bound).
    pub trace_queue_size: usize,
    /// Where this process serves HTTP: `/metrics` (Prometheus text),
    /// `/healthz` and, on the coordinator, `/scaling/<agent_type>`. Off
    /// when unset (the library default); compose, Helm and `scripts/stack`
    /// set it. `127.0.0.1:0` picks a free port (logged at start).
    pub metrics_addr: Option<String>,
    /// Push metrics over OTLP too when `otlp_endpoint` is set (turn off
    /// where Prometheus scrapes `/metrics` and the collector only takes
    /// traces).
    pub otlp_metrics: bool,
    /// How often metrics are pushed over OTLP when `otlp_endpoint` is set.
    #[serde(with = "humantime_serde")]
    pub metrics_export_interval: std::time::Duration,
}

impl TelemetryConfig {
    /// The OTLP endpoint to export to, when one is set (an empty value is
    /// none, as an unset environment variable often arrives).
    pub fn otlp_target(&self) -> Option<&str> {
        self.otlp_endpoint.as_deref().filter(|e| !e.is_empty())
    }
}

// By hand: a password in the OTLP endpoint's URL must not reach a log.
impl std::fmt::Debug for TelemetryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelemetryConfig")
            .field("log_format", &self.log_format)
            .field("log_level", &self.log_level)
            .field(
                "otlp_endpoint",
                &self.otlp_endpoint.as_deref().map(super::redact_url),
            )
            .field("sample_ratio", &self.sample_ratio)
            .field("trace_level", &self.trace_level)
            .field("trace_queue_size", &self.trace_queue_size)
            .field("metrics_addr", &self.metrics_addr)
            .field("otlp_metrics", &self.otlp_metrics)
            .field("metrics_export_interval", &self.metrics_export_interval)
            .finish()
    }
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            log_format: LogFormat::Pretty,
            log_level: "info".into(),
            otlp_endpoint: None,
            sample_ratio: 1.0,
            trace_level: AUTO_TRACE_LEVEL.into(),
            trace_queue_size: 65_536,
            metrics_addr: None,
            otlp_metrics: true,
            metrics_export_interval: std::time::Duration::from_secs(15),
        }
    }
}
