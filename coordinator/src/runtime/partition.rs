//! The partition a scheduler term serves (docs/PARTITIONS.md): which
//! workflows are its own, and the names its consumers take.

use caucus_shared::partition;

/// Partition `index` of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Partition {
    /// This partition.
    pub index: u32,
    /// How many there are (`coordinator.partitions`).
    pub count: u32,
}

impl Partition {
    /// The only partition of an unpartitioned deployment.
    pub const ONLY: Partition = Partition { index: 0, count: 1 };

    /// Whether `workflow_id` belongs to this partition.
    pub fn owns(&self, workflow_id: &str) -> bool {
        partition::of(workflow_id, self.count) == self.index
    }

    /// The partition dispatches and events carry: `None` with one
    /// partition, whose subjects are those of every earlier release.
    pub fn tag(&self) -> Option<u32> {
        (self.count > 1).then_some(self.index)
    }

    /// This partition's share of an agent type's `capacity`: the
    /// capacity divided among the partitions, the remainder to the lowest,
    /// so the shares add up to it; at least 1 while there is any capacity
    /// (with fewer slots than partitions the shares add up to more, and
    /// dispatches may wait in JetStream: give every agent type at least P
    /// slots).
    pub fn share(&self, capacity: usize) -> usize {
        let count = self.count.max(1) as usize;
        let base = capacity / count + usize::from((self.index as usize) < capacity % count);
        if capacity > 0 {
            base.max(1)
        } else {
            0
        }
    }

    /// The durable name of one of this partition's consumers: `base` with
    /// one partition, `base-p<index>` otherwise.
    pub fn consumer(&self, base: &str) -> String {
        match self.tag() {
            Some(p) => format!("{base}-p{p}"),
            None => base.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_partition_owns_everything_under_the_old_names() {
        let p = Partition::ONLY;
        assert!(p.owns("anything"));
        assert_eq!(p.tag(), None);
        assert_eq!(p.consumer("coordinator"), "coordinator");
    }

    #[test]
    fn each_workflow_has_exactly_one_of_several_partitions() {
        for i in 0..100 {
            let id = format!("wf-{i}");
            let owners = (0..8)
                .filter(|&index| Partition { index, count: 8 }.owns(&id))
                .count();
            assert_eq!(owners, 1, "{id}");
        }
        let p = Partition { index: 3, count: 8 };
        assert_eq!(p.tag(), Some(3));
        // 32 slots over 8 partitions: 4 each; 10 over 8: 2 for 0 and 1.
        let shares = |cap| {
            (0..8)
                .map(|index| Partition { index, count: 8 }.share(cap))
                .collect::<Vec<_>>()
        };
        assert_eq!(shares(32), vec![4; 8]);
        assert_eq!(shares(10), vec![2, 2, 1, 1, 1, 1, 1, 1]);
        assert_eq!(shares(10).iter().sum::<usize>(), 10);
        assert_eq!(shares(0), vec![0; 8]);
        assert_eq!(Partition::ONLY.share(7), 7);
        assert_eq!(p.consumer("coordinator"), "coordinator-p3");
    }
}
