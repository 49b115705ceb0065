//! A ready queue for one agent type: longest remaining path first, then the
//! oldest workflow, then arrival order.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use chrono::{DateTime, Utc};

/// A ready task waiting for capacity.
#[derive(Debug, Clone)]
pub struct ReadyEntry {
    /// Longest remaining path (larger first).
    pub priority: f64,
    /// Workflow submission time (older first on ties).
    pub created_at: DateTime<Utc>,
    /// Workflow id.
    pub workflow_id: String,
    /// Task key within the workflow.
    pub key: String,
    /// Arrival order (earlier first on ties).
    pub seq: u64,
    /// When it became ready.
    pub enqueued_at: DateTime<Utc>,
}

impl PartialEq for ReadyEntry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for ReadyEntry {}
impl PartialOrd for ReadyEntry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for ReadyEntry {
    // BinaryHeap pops the greatest: greatest = longest path, oldest, earliest.
    fn cmp(&self, other: &Self) -> Ordering {
        self.priority
            .total_cmp(&other.priority)
            .then_with(|| other.created_at.cmp(&self.created_at))
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// Max-heap of ready entries. Removing a workflow's entries is lazy: a
/// workflow leaves the queues each time it stops accepting dispatches
/// (finished, at a gate, paused), usually with nothing queued, and a scan
/// of the heap each time made finishing a workflow cost the whole queue
/// (quadratic in a large capacity-limited batch). The entries of a
/// removed workflow stay in the heap, marked dead, and are dropped when
/// popped, or all at once when they are half of it.
#[derive(Debug, Default)]
pub(super) struct ReadyQueue {
    heap: BinaryHeap<ReadyEntry>,
    /// Live entries per workflow.
    live: HashMap<String, usize>,
    /// Workflows removed while entries of theirs were in the heap.
    removed: HashMap<String, Removed>,
    /// Dead entries in the heap (the sum of `removed`'s `left`).
    dead: usize,
    /// The largest `seq` pushed.
    last_seq: u64,
}

/// The dead entries of one removed workflow.
#[derive(Debug)]
struct Removed {
    /// Its entries with a `seq` up to this one are dead; later ones were
    /// queued after the removal and are live.
    through: u64,
    /// How many of them are still in the heap.
    left: usize,
}

impl Removed {
    /// Whether `e` is one of the dead entries.
    fn covers(&self, e: &ReadyEntry) -> bool {
        e.seq <= self.through
    }
}

/// Below this many dead entries the heap is not compacted.
const COMPACT_MIN: usize = 1024;

impl ReadyQueue {
    pub(super) fn push(&mut self, e: ReadyEntry) {
        self.last_seq = self.last_seq.max(e.seq);
        *self.live.entry(e.workflow_id.clone()).or_default() += 1;
        self.heap.push(e);
    }

    /// The highest-priority live entry.
    pub(super) fn pop(&mut self) -> Option<ReadyEntry> {
        loop {
            let e = self.heap.pop()?;
            if self.bury(&e) {
                continue;
            }
            if let Some(n) = self.live.get_mut(&e.workflow_id) {
                *n -= 1;
                if *n == 0 {
                    self.live.remove(&e.workflow_id);
                }
            }
            return Some(e);
        }
    }

    /// Live entries.
    pub(super) fn len(&self) -> usize {
        self.heap.len() - self.dead
    }

    /// Drops every entry `wf` has queued so far.
    pub(super) fn remove_workflow(&mut self, wf: &str) {
        let Some(n) = self.live.remove(wf) else {
            return;
        };
        let r = self.removed.entry(wf.to_string()).or_insert(Removed {
            through: 0,
            left: 0,
        });
        r.through = self.last_seq;
        r.left += n;
        self.dead += n;
        if self.dead >= COMPACT_MIN && self.dead * 2 >= self.heap.len() {
            self.compact();
        }
    }

    pub(super) fn oldest_enqueued(&self) -> Option<DateTime<Utc>> {
        self.heap
            .iter()
            .filter(|e| !self.is_dead(e))
            .map(|e| e.enqueued_at)
            .min()
    }

    fn is_dead(&self, e: &ReadyEntry) -> bool {
        self.removed
            .get(&e.workflow_id)
            .is_some_and(|r| r.covers(e))
    }

    /// Whether `e` (just popped) is dead; if so it is counted out.
    fn bury(&mut self, e: &ReadyEntry) -> bool {
        let Some(r) = self.removed.get_mut(&e.workflow_id) else {
            return false;
        };
        if !r.covers(e) {
            return false;
        }
        r.left -= 1;
        self.dead -= 1;
        if r.left == 0 {
            self.removed.remove(&e.workflow_id);
        }
        true
    }

    /// Drops every dead entry at once.
    fn compact(&mut self) {
        let removed = std::mem::take(&mut self.removed);
        self.heap
            .retain(|e| removed.get(&e.workflow_id).is_none_or(|r| !r.covers(e)));
        self.dead = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(wf: &str, key: &str, priority: f64, seq: u64) -> ReadyEntry {
        let at = DateTime::<Utc>::from_timestamp(1_000 + seq as i64, 0).expect("a time");
        ReadyEntry {
            priority,
            created_at: at,
            workflow_id: wf.into(),
            key: key.into(),
            seq,
            enqueued_at: at,
        }
    }

    fn drain(q: &mut ReadyQueue) -> Vec<String> {
        std::iter::from_fn(|| q.pop())
            .map(|e| format!("{}/{}", e.workflow_id, e.key))
            .collect()
    }

    #[test]
    fn a_removed_workflow_is_neither_popped_nor_counted() {
        let mut q = ReadyQueue::default();
        q.push(entry("a", "x", 3.0, 1));
        q.push(entry("b", "x", 2.0, 2));
        q.push(entry("a", "y", 1.0, 3));
        q.remove_workflow("a");
        assert_eq!(q.len(), 1);
        assert_eq!(
            q.oldest_enqueued(),
            Some(entry("b", "x", 0.0, 2).enqueued_at)
        );
        assert_eq!(drain(&mut q), ["b/x"]);
        assert_eq!(q.len(), 0);
        assert!(q.removed.is_empty(), "every dead entry was dropped");
    }

    #[test]
    fn what_a_workflow_queues_after_its_removal_is_live() {
        let mut q = ReadyQueue::default();
        q.push(entry("a", "x", 1.0, 1));
        q.remove_workflow("a");
        // Resumed: the same task queued again, and another.
        q.push(entry("a", "x", 1.0, 2));
        q.push(entry("a", "y", 5.0, 3));
        assert_eq!(q.len(), 2);
        assert_eq!(drain(&mut q), ["a/y", "a/x"]);

        // Removed twice with dead entries left from the first time.
        q.push(entry("a", "x", 1.0, 4));
        q.remove_workflow("a");
        q.push(entry("a", "y", 1.0, 5));
        q.remove_workflow("a");
        q.push(entry("a", "z", 1.0, 6));
        assert_eq!(q.len(), 1);
        assert_eq!(drain(&mut q), ["a/z"]);
        assert_eq!(q.heap.len(), 0);
    }

    #[test]
    fn removing_a_workflow_with_nothing_queued_changes_nothing() {
        let mut q = ReadyQueue::default();
        q.push(entry("a", "x", 1.0, 1));
        q.remove_workflow("b");
        assert_eq!((q.len(), q.dead), (1, 0));
        assert!(q.removed.is_empty());
    }

    #[test]
    fn dead_entries_are_compacted_once_they_are_half_the_heap() {
        let mut q = ReadyQueue::default();
        let n = COMPACT_MIN as u64;
        for i in 0..2 * n {
            q.push(entry(&format!("w{i}"), "x", 1.0, i + 1));
        }
        for i in 0..n - 1 {
            q.remove_workflow(&format!("w{i}"));
        }
        assert_eq!(q.heap.len() as u64, 2 * n, "below the threshold: lazy");
        q.remove_workflow(&format!("w{}", n - 1));
        assert_eq!(q.heap.len() as u64, n, "compacted");
        assert_eq!((q.len() as u64, q.dead), (n, 0));
        assert!(q.removed.is_empty());
        assert_eq!(drain(&mut q).len() as u64, n);
    }
}
