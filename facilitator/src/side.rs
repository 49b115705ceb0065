//! The two sides of a debate (the type lives in the shared API crate).

pub use caucus_shared::api::facilitator::Side;
