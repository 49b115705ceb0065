//! TODO(task): being written.
