//! The stage graph around a stage: what it depends on, what depends on it.

use std::collections::BTreeSet;

use super::super::WorkflowRecord;

impl WorkflowRecord {
    /// Stages `stage` depends on, directly or not.
    pub fn upstream_of(&self, stage: &str) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut todo = vec![stage.to_string()];
        while let Some(s) = todo.pop() {
            if let Some(def) = self.stages.iter().find(|d| d.name == s) {
                for d in &def.depends_on {
                    if out.insert(d.clone()) {
                        todo.push(d.clone());
                    }
                }
            }
        }
        out
    }

    /// `stages` and every stage depending on one of them, directly or not.
    pub fn downstream_of(&self, stages: &BTreeSet<String>) -> BTreeSet<String> {
        let mut out = stages.clone();
        loop {
            let more: Vec<String> = self
                .stages
                .iter()
                .filter(|s| !out.contains(&s.name))
                .filter(|s| s.depends_on.iter().any(|d| out.contains(d)))
                .map(|s| s.name.clone())
                .collect();
            if more.is_empty() {
                return out;
            }
            out.extend(more);
        }
    }
}
