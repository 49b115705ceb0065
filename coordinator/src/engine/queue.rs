//! A ready queue for one agent type: longest remaining path first, then the
//! oldest workflow, then arrival order.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

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

/// Max-heap of ready entries.
#[derive(Debug, Default)]
pub(super) struct ReadyQueue {
    heap: BinaryHeap<ReadyEntry>,
}

impl ReadyQueue {
    pub(super) fn push(&mut self, e: ReadyEntry) {
        self.heap.push(e);
    }

    pub(super) fn pop(&mut self) -> Option<ReadyEntry> {
        self.heap.pop()
    }

    pub(super) fn len(&self) -> usize {
        self.heap.len()
    }

    pub(super) fn remove_workflow(&mut self, wf: &str) {
        self.heap.retain(|e| e.workflow_id != wf);
    }

    pub(super) fn oldest_enqueued(&self) -> Option<DateTime<Utc>> {
        self.heap.iter().map(|e| e.enqueued_at).min()
    }
}
