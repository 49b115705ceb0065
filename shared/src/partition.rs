//! Which coordinator partition a workflow belongs to (docs/PARTITIONS.md).

use std::hash::Hasher;

/// Partitions a deployment may be split into, at most.
pub const MAX_PARTITIONS: u32 = 1_024;

/// The partition of `workflow_id` among `count`: FNV-1a (64 bit) of the id's
/// bytes modulo `count`. Stable across releases and platforms (never
/// Rust's `DefaultHasher`, whose output may change), since every
/// coordinator and every release must agree. One partition (or none) is 0.
pub fn of(workflow_id: &str, count: u32) -> u32 {
    if count <= 1 {
        return 0;
    }
    let mut h = fnv::FnvHasher::default();
    // `write`, not `write_str`: the latter may add a terminator.
    h.write(workflow_id.as_bytes());
    (h.finish() % u64::from(count)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_of_known_ids_is_stable() {
        // FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c (the published test vector).
        assert_eq!(
            of("a", u32::MAX),
            (0xaf63dc4c8601ec8c_u64 % u64::from(u32::MAX)) as u32
        );
        assert_eq!(of("anything", 1), 0);
        assert_eq!(of("anything", 0), 0);
    }

    #[test]
    fn ids_spread_over_the_partitions() {
        let mut seen = [0u32; 8];
        for i in 0..8_000 {
            seen[of(&uuid::Uuid::now_v7().to_string(), 8) as usize] += 1;
            let _ = i;
        }
        assert!(seen.iter().all(|n| (800..1200).contains(n)), "{seen:?}");
    }
}
