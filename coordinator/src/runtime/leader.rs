//! Active/standby: only the holder of the Redis lock `coordinator-leader`
//! schedules; see [`caucus_shared::redis::leadership`].

pub use caucus_shared::redis::leadership::{acquire, keep};

/// Name of the leadership lock.
pub const LEADER_LOCK: &str = "coordinator-leader";

/// The lock of partition `p` of `count`: with one partition it is the
/// leader lock itself (what every release before partitions used), so a
/// rolling upgrade keeps one fenced history.
pub fn partition_lock(p: u32, count: u32) -> String {
    if count <= 1 {
        LEADER_LOCK.to_string()
    } else {
        format!("coordinator-partition-{p}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_partition_is_the_leader_lock() {
        assert_eq!(partition_lock(0, 1), LEADER_LOCK);
        assert_eq!(partition_lock(3, 8), "coordinator-partition-3");
        caucus_shared::redis::validate_name("lock name", &partition_lock(7, 8)).unwrap();
    }
}
