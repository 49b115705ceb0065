//! Logs, traces and metrics for a caucus process.
//!
//! `tracing` events go to stderr (human-readable or JSON lines; `RUST_LOG`
//! overrides `telemetry.log_level`; see [`logs`]). Spans get
//! OpenTelemetry ids, and are exported over OTLP gRPC, when
//! `otlp_endpoint` is set; by default (`trace_level = "auto"`) a process
//! with no endpoint builds none, since that cost about a fifth of the
//! no-op throughput (docs/OBSERVABILITY.md). `trace_level = "info"`
//! without an endpoint still makes trace context flow through the process
//! for others to export. Metrics: [`metrics`], served by [`http`].

pub mod http;
mod logs;
pub mod metrics;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::{TelemetryConfig, AUTO_TRACE_LEVEL};
use crate::Error;

/// Flushes and shuts the trace pipeline down when dropped; keep it alive
/// for the whole of `main`.
#[must_use = "dropping the guard shuts tracing down"]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
    meters: Option<opentelemetry_sdk::metrics::SdkMeterProvider>,
}

impl std::fmt::Debug for TelemetryGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelemetryGuard").finish_non_exhaustive()
    }
}

impl TelemetryGuard {
    /// Exports every finished span now.
    pub fn flush(&self) {
        if let Some(p) = &self.provider {
            if let Err(e) = p.force_flush() {
                eprintln!("trace flush failed: {e}");
            }
        }
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        let traces = self.provider.take();
        let meters = self.meters.take();
        if traces.is_none() && meters.is_none() {
            return;
        }
        let shutdown = move || {
            if let Some(p) = traces {
                if let Err(e) = p.shutdown() {
                    eprintln!("trace shutdown failed: {e}");
                }
            }
            if let Some(m) = meters {
                if let Err(e) = m.shutdown() {
                    eprintln!("metrics shutdown failed: {e}");
                }
            }
        };
        // The gRPC exporter runs on the Tokio runtime: shutting down blocks,
        // so step off the worker thread if we are on one.
        match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(shutdown)
            }
            _ => shutdown(),
        }
    }
}

/// Spans per OTLP export request (about 1 MB, well under a receiver's
/// usual 4 MB message limit).
const EXPORT_BATCH: usize = 2_048;

/// The tracer provider `init` uses: OTLP gRPC export when `otlp_endpoint`
/// is set (call from inside a Tokio runtime), none otherwise.
pub fn tracer_provider(
    cfg: &TelemetryConfig,
    service_name: &str,
) -> Result<SdkTracerProvider, Error> {
    let mut b = SdkTracerProvider::builder()
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            cfg.sample_ratio.clamp(0.0, 1.0),
        ))))
        .with_resource(
            Resource::builder()
                .with_service_name(service_name.to_string())
                .build(),
        );
    if let Some(endpoint) = cfg.otlp_target() {
        use opentelemetry_otlp::WithExportConfig;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .build()
            .map_err(|e| Error::Config(format!("telemetry.otlp_endpoint `{endpoint}`: {e}")))?;
        use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor};
        // The defaults (2,048 queued, 512 per export, every 5 s) drop most
        // spans of a busy coordinator: measured, 2,500 of 24,000 arrived.
        let batch = BatchConfigBuilder::default()
            .with_max_queue_size(cfg.trace_queue_size.max(1))
            .with_max_export_batch_size(EXPORT_BATCH.min(cfg.trace_queue_size.max(1)))
            .with_scheduled_delay(std::time::Duration::from_secs(1))
            .build();
        b = b.with_span_processor(
            BatchSpanProcessor::builder(exporter)
                .with_batch_config(batch)
                .build(),
        );
    }
    Ok(b.build())
}

/// Installs logging and tracing for this process (once).
pub fn init(cfg: &TelemetryConfig, service_name: &str) -> Result<TelemetryGuard, Error> {
    let exporting = cfg.otlp_target().is_some();
    install(
        cfg,
        service_name,
        tracer_provider(cfg, service_name)?,
        exporting,
    )
}

/// Like [`init`] with a provider of the caller's (tests pass one with an
/// in-memory exporter): a provider handed over is one that collects, so
/// `trace_level = "auto"` traces.
pub fn init_with_provider(
    cfg: &TelemetryConfig,
    service_name: &str,
    provider: SdkTracerProvider,
) -> Result<TelemetryGuard, Error> {
    install(cfg, service_name, provider, true)
}

/// The `telemetry.trace_level` installed: `auto` is `info` when spans are
/// `exporting` somewhere and `off` otherwise; any other value is as given.
fn effective_trace_level(cfg: &TelemetryConfig, exporting: bool) -> &str {
    match cfg.trace_level.as_str() {
        AUTO_TRACE_LEVEL if exporting => "info",
        AUTO_TRACE_LEVEL => "off",
        t => t,
    }
}

fn install(
    cfg: &TelemetryConfig,
    service_name: &str,
    provider: SdkTracerProvider,
    exporting: bool,
) -> Result<TelemetryGuard, Error> {
    // Separate filters: what is logged must not decide what is traced (a
    // `warn` log level would otherwise leave workflows without traces).
    let fmt = logs::layer(cfg.log_format).with_filter(env_filter(cfg)?);
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer(service_name.to_string()))
        // Code locations, thread ids, the module path (`target`) and
        // busy/idle times on every span cost on the hot path and say
        // nothing a caucus attribute does not.
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        // Entering a span would otherwise start its OpenTelemetry span and
        // make it OpenTelemetry's current context, on every poll of an
        // instrumented future. Nothing here reads that context: trace
        // context is taken from the `tracing` span (`trace::inject`).
        .with_context_activation(false)
        .with_filter(trace_filter(cfg, exporting)?);
    tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init()
        .map_err(|e| Error::Config(format!("telemetry already initialised: {e}")))?;
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    opentelemetry::global::set_tracer_provider(provider.clone());
    let meters = metrics::install(cfg, service_name)?;
    Ok(TelemetryGuard {
        provider: Some(provider),
        meters,
    })
}

/// Which spans the OpenTelemetry layer records: `telemetry.trace_level`
/// as [`effective_trace_level`] reads it (the SDK's own spans never).
fn trace_filter(cfg: &TelemetryConfig, exporting: bool) -> Result<EnvFilter, Error> {
    let text = effective_trace_level(cfg, exporting);
    EnvFilter::try_new(format!(
        "{text},opentelemetry=off,opentelemetry_sdk=off,opentelemetry_otlp=off,tonic=off,h2=off,hyper=off,tower=off"
    ))
    .map_err(|e| Error::Config(format!("telemetry.trace_level `{text}`: {e}")))
}

fn env_filter(cfg: &TelemetryConfig) -> Result<EnvFilter, Error> {
    let (origin, text) = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() => ("RUST_LOG".to_string(), v),
        _ => ("telemetry.log_level".to_string(), cfg.log_level.clone()),
    };
    // The OpenTelemetry SDK logs its own set-up at info; keep that out of
    // service logs unless asked for by name. Likewise the spans that exist
    // for traces alone: formatting their fields on every task would cost
    // each process for lines that name their task anyway.
    let mut directives = text.clone();
    if !text.contains("opentelemetry") {
        directives.push_str(",opentelemetry=warn,opentelemetry_sdk=warn");
    }
    if !text.contains(crate::nats::trace::SPAN_TARGET) {
        directives.push_str(&format!(",{}=off", crate::nats::trace::SPAN_TARGET));
    }
    EnvFilter::try_new(&directives).map_err(|e| Error::Config(format!("{origin} `{text}`: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(trace_level: &str, endpoint: Option<&str>) -> TelemetryConfig {
        TelemetryConfig {
            trace_level: trace_level.into(),
            otlp_endpoint: endpoint.map(String::from),
            ..TelemetryConfig::default()
        }
    }

    /// The level [`init`] installs for `c`.
    fn installed(c: &TelemetryConfig) -> &str {
        effective_trace_level(c, c.otlp_target().is_some())
    }

    #[test]
    fn auto_traces_only_where_spans_are_exported() {
        assert_eq!(TelemetryConfig::default().trace_level, AUTO_TRACE_LEVEL);
        assert_eq!(installed(&cfg("auto", None)), "off");
        assert_eq!(installed(&cfg("auto", Some(""))), "off");
        let exported = cfg("auto", Some("http://127.0.0.1:4317"));
        assert_eq!(installed(&exported), "info");
        let filter = trace_filter(&exported, true).unwrap().to_string();
        assert!(filter.split(",").any(|d| d == "info"), "{filter}");
        // A provider handed to init_with_provider collects: auto traces.
        assert_eq!(effective_trace_level(&cfg("auto", None), true), "info");
        // Asked for by name, spans are built with nothing to export them:
        // trace context then flows through for other processes to export.
        assert_eq!(installed(&cfg("info", None)), "info");
        assert_eq!(installed(&cfg("off", Some("http://x:4317"))), "off");
    }
}
