//! TODO(subjects): being written.
