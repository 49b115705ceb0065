//! The page limits of `gates` (the open-gates list), one partition's or
//! merged from several (`route::gates`): a leaf, so the merge can import
//! them without depending on the rest of the gates API.

/// Open gates per `gates` page unless `limit` says otherwise.
pub const GATES_PAGE: usize = 200;
/// The largest page: an open gate is well under 1 KiB, so a page stays far
/// below NATS's 1 MiB `max_payload`.
pub const GATES_PAGE_MAX: usize = 1000;
