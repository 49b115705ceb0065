//! The newest findings of an item's subject, read oldest first, each once.

use std::collections::{HashSet, VecDeque};

use caucus_shared::api::coordinator::gates::PackageFinding;

/// One finding read for the package, with the envelope id its answers are
/// filed under.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// The finding as listed.
    pub finding: PackageFinding,
    /// The envelope's `id` (`responses` key, `applied_findings` id).
    pub envelope_id: Option<String>,
}

/// The newest `cap` findings read oldest first, each once: a finding whose
/// `finding_id` comes again (a re-run restating it) replaces the earlier
/// one, as its newest run stated it.
#[derive(Debug)]
pub struct Newest {
    cap: usize,
    items: VecDeque<Listed>,
    ids: HashSet<String>,
}

impl Newest {
    /// Holds at most `cap` findings.
    pub fn new(cap: usize) -> Self {
        Newest {
            cap,
            items: VecDeque::new(),
            ids: HashSet::new(),
        }
    }

    /// Adds `l`, read after every finding added before it.
    pub fn push(&mut self, l: Listed) {
        if let Some(id) = &l.finding.finding_id {
            if !self.ids.insert(id.clone()) {
                self.items
                    .retain(|o| o.finding.finding_id.as_ref() != Some(id));
            }
        }
        self.items.push_back(l);
        while self.items.len() > self.cap {
            if let Some(old) = self.items.pop_front() {
                if let Some(id) = old.finding.finding_id {
                    self.ids.remove(&id);
                }
            }
        }
    }

    /// The findings held, oldest first.
    pub fn into_vec(self) -> Vec<Listed> {
        self.items.into()
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::gates_package::finding_id;
    use super::*;

    fn finding(id: Option<&str>, text: &str) -> PackageFinding {
        serde_json::from_value(serde_json::json!({
            "from_agent": "valuation", "finding": text, "confidence": 0.9,
            "evidence": [], "timestamp": null, "finding_id": id}))
        .expect("a package finding")
    }

    #[test]
    fn the_newest_findings_are_kept_each_once_as_its_newest_run_stated_it() {
        let l = |id: Option<&str>, text: &str| Listed {
            finding: finding(id.and_then(finding_id).as_deref(), text),
            envelope_id: None,
        };
        let mut n = Newest::new(10);
        n.push(l(Some("w/valuation@1:finding:0"), "v1"));
        n.push(l(Some("w/financial@1:finding:0"), "f1"));
        n.push(l(None, "x"));
        n.push(l(None, "x"));
        n.push(l(Some("w/valuation@2:finding:0"), "v2"));
        let texts: Vec<String> = n
            .into_vec()
            .into_iter()
            .map(|l| l.finding.finding)
            .collect();
        assert_eq!(
            texts,
            ["f1", "x", "x", "v2"],
            "the re-run replaces the first run's; findings without an id are kept"
        );

        let mut n = Newest::new(2);
        n.push(l(Some("w/a@1:finding:0"), "a1"));
        n.push(l(Some("w/b@1:finding:0"), "b1"));
        n.push(l(Some("w/c@1:finding:0"), "c1"));
        n.push(l(Some("w/a@2:finding:0"), "a2"));
        let texts: Vec<String> = n
            .into_vec()
            .into_iter()
            .map(|l| l.finding.finding)
            .collect();
        assert_eq!(
            texts,
            ["c1", "a2"],
            "an id dropped by the bound is listed again when restated"
        );
    }
}
