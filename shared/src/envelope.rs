//! TODO(envelope): being written.
