//! Active/standby by the Redis lock `correlator-leader` (same scheme as the
//! coordinator, [`caucus_shared::redis::leadership`]). Leadership is an
//! optimisation, not the safety net: every side effect is idempotent by id
//! (see [`crate::effects`]), so two instances that briefly both believe they
//! lead still publish each correlation, trigger and card once.

pub use caucus_shared::redis::leadership::{acquire, keep};

/// Name of the leadership lock.
pub const LEADER_LOCK: &str = "correlator-leader";
