//! NATS plumbing.
