//! Least privilege per service (docs/SECURITY.md): the roles, what each
//! may do on NATS and Redis, and the files `caucus auth init` writes.
//!
//! One table ([`nats::permissions`], [`redis_acl::rules`]) feeds both the
//! generator ([`generate`]) and the role × subject matrix of
//! docs/SECURITY.md ([`matrix`]), so the two cannot drift.

pub mod generate;
pub mod matrix;
pub mod nats;
pub mod redis_acl;
pub mod render;
mod role;
pub mod secrets;

pub use generate::{init, InitError, InitOptions, InitReport};
pub use role::{validate_person, Role, ROLES};
