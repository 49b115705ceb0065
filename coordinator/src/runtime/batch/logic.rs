//! Batch records and their pure rules: counts, resume order, the failure
//! stop rule and the capacity check.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::workflow::InFlightPolicy;

/// Version of the stored batch record.
pub const BATCH_SCHEMA_VERSION: u32 = 1;

// Items and states are part of the batch replies: their types live with the API.
pub use caucus_shared::api::coordinator::control::{BatchItem, BatchState, ItemState};

/// A batch's pause outcomes in its other partitions' parts (and, summed
/// with a part's own, what its failure-ratio check counts). A part counts
/// them into that check, so that it judges the whole batch as
/// one partition would: judged alone, a part holding only an item no
/// partition had a workflow of stopped the whole batch (1 of 1 failed)
/// where one partition pauses the other 16 and carries on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Elsewhere {
    /// Items paused or pausing there (or about to be: those with a
    /// workflow, in the same request).
    pub ok: usize,
    /// Items whose pause failed there (or will: those without a workflow).
    pub failed: usize,
    /// Items there that count (all but the skipped).
    pub total: usize,
}

impl Elsewhere {
    /// Counts one item in `state`.
    pub fn add(&mut self, state: ItemState) {
        match state {
            ItemState::Skipped => return,
            ItemState::Pausing | ItemState::Paused => self.ok += 1,
            ItemState::Failed => self.failed += 1,
            _ => {}
        }
        self.total += 1;
    }

    /// Nothing elsewhere (one partition).
    pub fn is_none(&self) -> bool {
        *self == Elsewhere::default()
    }
}

/// A batch operation (KV bucket `batches`, key = batch id).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BatchRecord {
    /// Stored-record version.
    pub schema_version: u32,
    /// Id (`corr-<correlation id>` for correlator triggers).
    pub batch_id: String,
    /// Why, shown to people.
    pub reason: String,
    /// The failure correlation behind it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// Lifecycle.
    pub state: BatchState,
    /// Pauses per wave.
    pub max_concurrency: u32,
    /// Workflows resumed and unfinished at once, at most.
    pub concurrency_limit: u32,
    /// In-flight policy of the resumes.
    #[serde(default)]
    pub in_flight: InFlightPolicy,
    /// The items, in the order they joined.
    pub items: Vec<BatchItem>,
    /// Why it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Created.
    pub created_at: DateTime<Utc>,
    /// Last change.
    pub updated_at: DateTime<Utc>,
}

/// `{total, paused, resumed, failed}` (+ skipped).
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct BatchCounts {
    /// Items.
    pub total: usize,
    /// Pausing, paused or waiting to resume.
    pub paused: usize,
    /// Resumed (running again or completed).
    pub resumed: usize,
    /// Failed pause or resume operations.
    pub failed: usize,
    /// Nothing to do.
    pub skipped: usize,
}

/// Whether a person's batch pause naming an item in state `s` pauses it
/// again (it resumed since, or its pause or resume failed); the
/// correlator's repeated triggers only add items it has not named.
pub fn paused_again(s: ItemState) -> bool {
    matches!(
        s,
        ItemState::Resuming | ItemState::Resumed | ItemState::ResumeFailed | ItemState::Failed
    )
}

/// True when more than `ratio` of the finished operations failed, judged
/// once a first wave (`wave` operations, or all if fewer) has finished.
pub fn exceeds_failure_ratio(
    succeeded: usize,
    failed: usize,
    total: usize,
    wave: usize,
    ratio: f64,
) -> bool {
    let finished = succeeded + failed;
    finished > 0 && finished >= wave.min(total).max(1) && failed as f64 > ratio * finished as f64
}

/// The capacity rule: a workflow may resume when, for every agent type its
/// first ready tasks need, the resumed-and-unfinished workflows already
/// using that type are fewer than its capacity. Returns the agent type
/// that is full.
pub fn capacity_blocker(
    needs: &[String],
    active: &HashMap<String, usize>,
    capacity: &HashMap<String, usize>,
) -> Option<String> {
    needs
        .iter()
        .find(|a| active.get(*a).copied().unwrap_or(0) >= capacity.get(*a).copied().unwrap_or(0))
        .cloned()
}

impl BatchRecord {
    /// Current counts.
    pub fn counts(&self) -> BatchCounts {
        let mut c = BatchCounts {
            total: self.items.len(),
            ..BatchCounts::default()
        };
        for i in &self.items {
            match i.state {
                ItemState::Pausing | ItemState::Paused | ItemState::ResumeQueued => c.paused += 1,
                ItemState::Resuming | ItemState::Resumed => c.resumed += 1,
                ItemState::Failed | ItemState::ResumeFailed => c.failed += 1,
                ItemState::Skipped => c.skipped += 1,
            }
        }
        c
    }

    /// Indices of items waiting to resume, in resume order: gate
    /// time-outs first, then the oldest pause, then by item.
    pub fn resume_order(&self) -> Vec<usize> {
        let mut idx: Vec<usize> = (0..self.items.len())
            .filter(|i| self.items[*i].state == ItemState::ResumeQueued)
            .collect();
        idx.sort_by(|a, b| {
            let (x, y) = (&self.items[*a], &self.items[*b]);
            y.gate_timeout
                .cmp(&x.gate_timeout)
                .then(x.paused_at.cmp(&y.paused_at))
                .then(x.item.cmp(&y.item))
        });
        idx
    }

    /// Whether the resume phase must stop (see [`exceeds_failure_ratio`]).
    pub fn resume_should_stop(&self, ratio: f64) -> bool {
        let count = |s: ItemState| self.items.iter().filter(|i| i.state == s).count();
        let ok = count(ItemState::Resumed);
        let bad = count(ItemState::ResumeFailed);
        let total = ok + bad + count(ItemState::Resuming) + count(ItemState::ResumeQueued);
        exceeds_failure_ratio(ok, bad, total, self.concurrency_limit as usize, ratio)
    }

    /// Whether the pause phase must stop, counting the batch's items in
    /// other partitions (`elsewhere`) with this part's own.
    pub fn pause_should_stop(&self, ratio: f64, elsewhere: Elsewhere) -> bool {
        let mut all = elsewhere;
        for i in &self.items {
            all.add(i.state);
        }
        exceeds_failure_ratio(
            all.ok,
            all.failed,
            all.total,
            self.max_concurrency as usize,
            ratio,
        )
    }

    /// Recomputes the lifecycle from the items (a stopped batch stays so).
    pub fn refresh_state(&mut self) {
        if self.state == BatchState::Stopped {
            return;
        }
        let any = |s: &[ItemState]| self.items.iter().any(|i| s.contains(&i.state));
        self.state = if any(&[ItemState::Resuming, ItemState::ResumeQueued]) {
            BatchState::Resuming
        } else if any(&[ItemState::Pausing]) {
            BatchState::Pausing
        } else if any(&[ItemState::Paused]) {
            BatchState::Paused
        } else {
            BatchState::Completed
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str, state: ItemState, paused_ms: i64, gate: bool) -> BatchItem {
        BatchItem {
            item: name.into(),
            workflow_id: Some(format!("wf-{name}")),
            state,
            error: None,
            paused_at: Some(
                DateTime::parse_from_rfc3339("2025-11-16T14:47:00Z")
                    .unwrap()
                    .with_timezone(&Utc)
                    + chrono::Duration::milliseconds(paused_ms),
            ),
            gate_timeout: gate,
            resumed_from_pause: None,
        }
    }

    fn batch(items: Vec<BatchItem>, limit: u32) -> BatchRecord {
        BatchRecord {
            schema_version: 1,
            batch_id: "b".into(),
            reason: "r".into(),
            correlation_id: None,
            state: BatchState::Paused,
            max_concurrency: limit,
            concurrency_limit: limit,
            in_flight: InFlightPolicy::Wait,
            items,
            stop_reason: None,
            created_at: Utc::now(),
            updated_at: Utc::now(),
        }
    }

    #[test]
    fn gate_timeouts_first_then_oldest_pause() {
        use ItemState::*;
        let b = batch(
            vec![
                item("MSFT", ResumeQueued, 300, false),
                item("AAPL", ResumeQueued, 200, false),
                item("TSLA", ResumeQueued, 900, true),
                item("AMZN", Resumed, 0, false),
                item("GOOGL", ResumeQueued, 100, false),
            ],
            5,
        );
        let order: Vec<&str> = b
            .resume_order()
            .into_iter()
            .map(|i| b.items[i].item.as_str())
            .collect();
        assert_eq!(order, vec!["TSLA", "GOOGL", "AAPL", "MSFT"]);
    }

    #[test]
    fn stops_when_more_than_half_of_the_first_wave_fails() {
        // 10 items, waves of 4: 2 of 4 failed is not more than half.
        assert!(!exceeds_failure_ratio(2, 2, 10, 4, 0.5));
        assert!(exceeds_failure_ratio(1, 3, 10, 4, 0.5));
        // Not judged before a wave has finished.
        assert!(!exceeds_failure_ratio(0, 2, 10, 4, 0.5));
        // Small batches: judged once all finished.
        assert!(exceeds_failure_ratio(0, 2, 2, 5, 0.5));
        assert!(!exceeds_failure_ratio(1, 1, 2, 5, 0.5));
        // Configurable ratio.
        assert!(exceeds_failure_ratio(3, 1, 10, 4, 0.2));
        use ItemState::*;
        let mut b = batch(
            vec![
                item("A", ResumeFailed, 0, false),
                item("B", ResumeFailed, 0, false),
                item("C", Resumed, 0, false),
                item("D", ResumeQueued, 0, false),
            ],
            3,
        );
        assert!(b.resume_should_stop(0.5));
        b.items[1].state = Resumed;
        assert!(!b.resume_should_stop(0.5));
        let c = b.counts();
        assert_eq!((c.total, c.paused, c.resumed, c.failed), (4, 1, 2, 1));
    }

    #[test]
    fn capacity_blocks_a_full_agent_type() {
        let caps: HashMap<String, usize> =
            [("valuation".to_string(), 1), ("report".to_string(), 3)].into();
        let mut active = HashMap::new();
        let needs = vec!["valuation".to_string()];
        assert_eq!(capacity_blocker(&needs, &active, &caps), None);
        active.insert("valuation".to_string(), 1);
        assert_eq!(
            capacity_blocker(&needs, &active, &caps),
            Some("valuation".to_string())
        );
        // No registered worker: capacity 0, wait.
        assert_eq!(
            capacity_blocker(&["macro".to_string()], &HashMap::new(), &caps),
            Some("macro".to_string())
        );
    }

    #[test]
    fn state_follows_items() {
        use ItemState::*;
        let mut b = batch(
            vec![item("A", Pausing, 0, false), item("B", Paused, 0, false)],
            5,
        );
        b.refresh_state();
        assert_eq!(b.state, BatchState::Pausing);
        b.items[0].state = Paused;
        b.refresh_state();
        assert_eq!(b.state, BatchState::Paused);
        b.items[0].state = ResumeQueued;
        b.refresh_state();
        assert_eq!(b.state, BatchState::Resuming);
        b.items[0].state = Resumed;
        b.items[1].state = Skipped;
        b.refresh_state();
        assert_eq!(b.state, BatchState::Completed);
    }

    #[test]
    fn a_part_judges_the_failure_ratio_over_the_whole_batch() {
        // Partition 0's part of a trigger: only the item no partition had
        // a workflow of, while the other parts paused 16.
        let part = batch(vec![item("NOPE", ItemState::Failed, 0, false)], 5);
        assert!(
            part.pause_should_stop(0.5, Elsewhere::default()),
            "alone: 1 of 1 failed"
        );
        let mut others = Elsewhere::default();
        for _ in 0..16 {
            others.add(ItemState::Paused);
        }
        others.add(ItemState::Skipped);
        assert_eq!(
            others,
            Elsewhere {
                ok: 16,
                failed: 0,
                total: 16
            }
        );
        assert!(!part.pause_should_stop(0.5, others), "1 of 17 failed");
        // Failures elsewhere count too.
        let mut bad = Elsewhere::default();
        bad.add(ItemState::Failed);
        let ok = batch(
            vec![
                item("A", ItemState::Paused, 0, false),
                item("B", ItemState::Failed, 0, false),
            ],
            5,
        );
        assert!(!ok.pause_should_stop(0.5, Elsewhere::default()));
        assert!(ok.pause_should_stop(0.5, bad), "2 of 3 failed");
    }
}
