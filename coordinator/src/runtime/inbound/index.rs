//! The addressed findings per item that the next tasks receive.
//!
//! In memory only: it is a cache of `caucus.findings.>`, filled from the
//! stream when a coordinator takes over ([`super::replay`]) and by the
//! findings consumer afterwards. Bounded three ways: findings per item
//! ([`PER_ITEM`]), items (`coordinator.findings_items`, the least recently
//! addressed forgotten first) and what one task receives
//! (`coordinator.findings_per_task`, `coordinator.findings_bytes_per_task`).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use chrono::{DateTime, Utc};
use serde_json::Value;

use caucus_shared::inbound::{InputFinding, INPUT_FINDINGS};
use caucus_shared::messages::Addressee;
use caucus_shared::task::TaskDispatch;

/// Findings held per item, at most (the oldest go first).
pub const PER_ITEM: usize = 256;

/// One held finding.
#[derive(Debug, Clone)]
struct Held {
    finding: InputFinding,
    addressee: Addressee,
    /// Its serialised size in a task's inputs.
    bytes: usize,
}

#[derive(Debug, Default)]
struct ItemFindings {
    /// Oldest first, by `stored_at`.
    list: VecDeque<Held>,
    ids: HashSet<String>,
    /// When the item was last addressed (the eviction order).
    touched: u64,
}

/// The limits of one task's `inputs.findings`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskLimits {
    /// Findings, at most.
    pub count: usize,
    /// Serialised bytes of the array, at most.
    pub bytes: usize,
}

/// Addressed findings by item.
#[derive(Debug)]
pub struct FindingsIndex {
    items: HashMap<String, ItemFindings>,
    /// Items by last touch, for eviction.
    by_touch: BTreeMap<u64, String>,
    clock: u64,
    max_items: usize,
    limits: TaskLimits,
}

impl FindingsIndex {
    /// An empty index holding at most `max_items` items.
    pub fn new(max_items: usize, limits: TaskLimits) -> Self {
        FindingsIndex {
            items: HashMap::new(),
            by_touch: BTreeMap::new(),
            clock: 0,
            max_items: max_items.max(1),
            limits,
        }
    }

    /// Holds `finding` about `item` for `addressee`; false when it was held
    /// already (the same id) or can never fit a task's inputs.
    pub fn insert(&mut self, item: &str, addressee: Addressee, finding: InputFinding) -> bool {
        let bytes = serde_json::to_vec(&finding).map_or(usize::MAX, |b| b.len() + 1);
        if bytes > self.limits.bytes {
            tracing::warn!(finding_id = %finding.id, bytes, limit = self.limits.bytes, "finding larger than a task's findings may be; not handed to tasks");
            return false;
        }
        self.clock += 1;
        let touch = self.clock;
        let entry = self.items.entry(item.to_string()).or_default();
        if !entry.ids.insert(finding.id.clone()) {
            return false;
        }
        self.by_touch.remove(&entry.touched);
        entry.touched = touch;
        self.by_touch.insert(touch, item.to_string());
        // Keep `stored_at` order: replay and the live consumer may overlap.
        let at = entry
            .list
            .iter()
            .rposition(|h| h.finding.stored_at <= finding.stored_at)
            .map_or(0, |i| i + 1);
        entry.list.insert(
            at,
            Held {
                finding,
                addressee,
                bytes,
            },
        );
        if entry.list.len() > PER_ITEM {
            if let Some(old) = entry.list.pop_front() {
                entry.ids.remove(&old.finding.id);
            }
        }
        while self.items.len() > self.max_items {
            let Some((_, oldest)) = self.by_touch.pop_first() else {
                break;
            };
            self.items.remove(&oldest);
        }
        true
    }

    /// The findings a task of `agent_type` on `item` dispatched at `at`
    /// receives: addressed to its type or `all`, stored by then, the most
    /// recent that fit the limits, oldest first.
    pub fn for_task(&self, item: &str, agent_type: &str, at: DateTime<Utc>) -> Vec<InputFinding> {
        let Some(entry) = self.items.get(item) else {
            return Vec::new();
        };
        let mut picked = Vec::new();
        // `[` and `]`: the array's own bytes.
        let mut bytes = 2usize;
        for h in entry.list.iter().rev() {
            if picked.len() >= self.limits.count {
                break;
            }
            if h.finding.stored_at > at || !h.addressee.includes(agent_type) {
                continue;
            }
            if bytes + h.bytes > self.limits.bytes {
                break;
            }
            bytes += h.bytes;
            picked.push(h.finding.clone());
        }
        picked.reverse();
        picked
    }

    /// Puts the findings for `d` into its `inputs.findings` (nothing, and
    /// no key, when there are none).
    pub fn attach(&self, d: &mut TaskDispatch) {
        if self.limits.count == 0 {
            return;
        }
        let found = self.for_task(&d.item, &d.agent_type, d.dispatched_at);
        if found.is_empty() {
            return;
        }
        let v = serde_json::to_value(found).unwrap_or(Value::Null);
        d.inputs.insert(INPUT_FINDINGS.to_string(), v);
    }

    /// Items held.
    pub fn items(&self) -> usize {
        self.items.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caucus_shared::envelope::Priority;
    use serde_json::json;

    fn finding(id: &str, secs: i64) -> InputFinding {
        InputFinding {
            id: id.into(),
            from_agent: "financial_analyst".into(),
            to_agent: "valuation_agent".into(),
            priority: Priority::High,
            requires_response: false,
            content: json!({"finding": format!("f {id}"), "confidence": 0.8}),
            stored_at: DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap(),
        }
    }

    fn to(t: &str) -> Addressee {
        Addressee::parse(t).unwrap()
    }

    fn limits(count: usize, bytes: usize) -> TaskLimits {
        TaskLimits { count, bytes }
    }

    fn at(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap()
    }

    #[test]
    fn a_task_gets_its_types_findings_stored_before_it_oldest_first() {
        let mut ix = FindingsIndex::new(10, limits(20, 1 << 20));
        assert!(ix.insert("AAPL", to("valuation_agent"), finding("b", 2)));
        assert!(ix.insert("AAPL", to("valuation_agent"), finding("a", 1)));
        assert!(ix.insert("AAPL", to("all"), finding("c", 3)));
        assert!(ix.insert("AAPL", to("financial"), finding("d", 4)));
        assert!(ix.insert("AAPL", to("valuation"), finding("late", 100)));
        assert!(
            !ix.insert("AAPL", to("valuation"), finding("a", 1)),
            "same id"
        );
        let ids: Vec<String> = ix
            .for_task("AAPL", "valuation", at(50))
            .into_iter()
            .map(|f| f.id)
            .collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert!(ix.for_task("MSFT", "valuation", at(50)).is_empty());
        let fin: Vec<String> = ix
            .for_task("AAPL", "financial", at(50))
            .into_iter()
            .map(|f| f.id)
            .collect();
        assert_eq!(fin, ["c", "d"]);
    }

    #[test]
    fn the_most_recent_that_fit_are_given() {
        let one = serde_json::to_vec(&finding("x", 1)).unwrap().len() + 1;
        let mut ix = FindingsIndex::new(10, limits(2, 1 << 20));
        for (i, id) in ["a", "b", "c"].iter().enumerate() {
            ix.insert("I", to("all"), finding(id, i as i64));
        }
        let ids: Vec<String> = ix
            .for_task("I", "t", at(10))
            .into_iter()
            .map(|f| f.id)
            .collect();
        assert_eq!(ids, ["b", "c"], "count bound keeps the newest");
        let mut ix = FindingsIndex::new(10, limits(20, 2 + one * 2));
        for (i, id) in ["a", "b", "c"].iter().enumerate() {
            ix.insert("I", to("all"), finding(id, i as i64));
        }
        assert_eq!(ix.for_task("I", "t", at(10)).len(), 2, "byte bound");
        let mut tiny = FindingsIndex::new(10, limits(20, 10));
        assert!(!tiny.insert("I", to("all"), finding("big", 1)));
    }

    #[test]
    fn items_and_findings_per_item_are_bounded() {
        let mut ix = FindingsIndex::new(2, limits(20, 1 << 20));
        ix.insert("A", to("all"), finding("1", 1));
        ix.insert("B", to("all"), finding("2", 1));
        ix.insert("A", to("all"), finding("3", 2));
        ix.insert("C", to("all"), finding("4", 1));
        assert_eq!(ix.items(), 2);
        assert!(
            ix.for_task("B", "t", at(10)).is_empty(),
            "least recent gone"
        );
        assert_eq!(ix.for_task("A", "t", at(10)).len(), 2);
        let mut ix = FindingsIndex::new(2, limits(PER_ITEM + 10, 1 << 30));
        for i in 0..(PER_ITEM + 5) {
            ix.insert("A", to("all"), finding(&i.to_string(), i as i64));
        }
        let got = ix.for_task("A", "t", at(100_000));
        assert_eq!(got.len(), PER_ITEM);
        assert_eq!(got[0].id, "5");
    }

    #[test]
    fn attach_adds_the_key_only_when_there_are_findings() {
        let mut ix = FindingsIndex::new(10, limits(20, 1 << 20));
        let mut d: TaskDispatch = serde_json::from_value(json!({
            "task_id": "wf/valuation", "workflow_id": "wf", "item": "AAPL", "pipeline": "p",
            "stage": "valuation", "agent_type": "valuation", "attempt": 1,
            "dispatched_at": at(50)
        }))
        .unwrap();
        ix.attach(&mut d);
        assert!(!d.inputs.contains_key(INPUT_FINDINGS));
        ix.insert("AAPL", to("valuation_agent"), finding("a", 1));
        ix.attach(&mut d);
        let got = caucus_shared::inbound::input_findings(&d.inputs);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].id, "a");
    }
}
