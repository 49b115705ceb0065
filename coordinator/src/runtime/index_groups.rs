//! Index groups: the unfinished workflows of one submission step and one
//! partition, indexed under a single key of `workflows_active` instead of
//! a key each.
//!
//! A key per workflow cost two stored messages per workflow (its put at
//! creation, its delete after the finishing write), a third of a stored
//! message per task of a six-task pipeline, on the hot path. A group costs
//! two per step (up to `coordinator.submit_chunk` workflows). The group's
//! key is written before any of its records, and deleted only after the
//! last of its members (this partition's, all of them) has had its
//! finishing write stored, so every unfinished record stays indexed, as
//! with a key each. Workflows indexed on their own (one brought back
//! unfinished, or a store's index built from a full scan) keep their own
//! key.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

/// Prefix of a group's key; the rest is its first member's id (a valid KV
/// key already, and the same on a retry of the step).
pub const GROUP_PREFIX: &str = "_grp.";

/// Version of [`IndexGroup`]'s shape.
pub const INDEX_GROUP_SCHEMA_VERSION: u32 = 1;

/// A group's stored value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexGroup {
    /// Version of this shape ([`INDEX_GROUP_SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The workflows indexed, all of one partition.
    pub workflow_ids: Vec<String>,
}

/// The key of the group whose first member is `first`.
pub fn group_key(first: &str) -> String {
    format!("{GROUP_PREFIX}{first}")
}

/// Whether an index key is a group's.
pub fn is_group(key: &str) -> bool {
    key.starts_with(GROUP_PREFIX)
}

/// The members not yet finished of every group a scheduler knows (held
/// in memory; rebuilt from the stored groups on a takeover).
#[derive(Debug, Default)]
pub struct ActiveGroups {
    pending: HashMap<String, HashSet<String>>,
    group_of: HashMap<String, String>,
}

impl ActiveGroups {
    /// Tracks group `key` with its members still unfinished, `pending`.
    /// Returns `true` when none is (the key is to be deleted now).
    pub fn track(&mut self, key: &str, pending: impl IntoIterator<Item = String>) -> bool {
        let set = self.pending.entry(key.to_string()).or_default();
        for id in pending {
            self.group_of.insert(id.clone(), key.to_string());
            set.insert(id);
        }
        if set.is_empty() {
            self.pending.remove(key);
            return true;
        }
        false
    }

    /// `id`'s finishing write is stored: the index key to delete now, if
    /// any. That is its group's when it was the group's last unfinished
    /// member, nothing while others remain, and its own key when it is in
    /// no group.
    pub fn finished(&mut self, id: &str) -> Option<String> {
        let Some(key) = self.group_of.remove(id) else {
            return Some(id.to_string());
        };
        let set = self.pending.get_mut(&key)?;
        set.remove(id);
        if set.is_empty() {
            self.pending.remove(&key);
            return Some(key);
        }
        None
    }

    /// Groups tracked (for tests and the gauges).
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// Whether no group is tracked.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_group_is_deleted_after_its_last_member_only() {
        let mut g = ActiveGroups::default();
        let key = group_key("s-0");
        assert!(!g.track(&key, ids(&["s-0", "s-1", "s-2"])));
        assert_eq!(g.finished("s-1"), None);
        assert_eq!(g.finished("s-0"), None);
        assert_eq!(g.finished("s-2"), Some(key.clone()));
        assert!(g.is_empty());
        // Finished again (a later write of a finished record): its own key,
        // which is gone already; the group is not deleted twice.
        assert_eq!(g.finished("s-2"), Some("s-2".to_string()));
    }

    #[test]
    fn a_workflow_in_no_group_deletes_its_own_key() {
        let mut g = ActiveGroups::default();
        assert_eq!(g.finished("w-9"), Some("w-9".to_string()));
    }

    #[test]
    fn a_group_with_nothing_pending_is_deleted_at_once() {
        let mut g = ActiveGroups::default();
        assert!(g.track("_grp.x", Vec::new()));
        assert!(g.is_empty());
    }

    #[test]
    fn tracking_a_group_again_adds_to_it() {
        let mut g = ActiveGroups::default();
        let key = group_key("a");
        g.track(&key, ids(&["a"]));
        g.track(&key, ids(&["b"]));
        assert_eq!(g.len(), 1);
        assert_eq!(g.finished("a"), None);
        assert_eq!(g.finished("b"), Some(key));
    }

    #[test]
    fn keys_are_recognised() {
        assert!(is_group(&group_key("wf-1")));
        assert!(!is_group("wf-1"));
        assert!(!is_group("_epoch"));
    }
}
