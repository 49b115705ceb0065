//! TODO(messages): being written.
