//! The log layer: human-readable lines or one JSON object per line, on
//! stderr.

use std::io::IsTerminal;

use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::config::LogFormat;

/// The formatting layer for `format`.
pub(super) fn layer<S>(format: LogFormat) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    match format {
        LogFormat::Pretty => tracing_subscriber::fmt::layer()
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .with_writer(std::io::stderr)
            .boxed(),
    }
}
