//! TODO(service): being written.
