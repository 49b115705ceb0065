//! Redis primitives.
