//! Active/standby: only the holder of the Redis lock `coordinator-leader`
//! schedules; see [`caucus_shared::redis::leadership`].

pub use caucus_shared::redis::leadership::{acquire, keep};

/// Name of the leadership lock.
pub const LEADER_LOCK: &str = "coordinator-leader";
