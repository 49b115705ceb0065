//! The control API's server, errors and request function, which live in
//! [`crate::api`] now; kept under this path for existing callers.

pub use crate::api::server::*;
