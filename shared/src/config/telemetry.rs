//! `[telemetry]`: logs and traces.

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
        }
    }
}
