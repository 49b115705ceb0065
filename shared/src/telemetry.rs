//! TODO(telemetry): being written.
