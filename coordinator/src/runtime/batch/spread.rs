//! Batches that span partitions: each partition's manager drives its part
//! of a batch, and the batch's concurrency limit stays one number over
//! every part through its running slots in Redis
//! ([`caucus_shared::redis::BatchSlots`]): a part resumes a workflow only
//! once it took a slot, and gives the slot back when the workflow
//! finishes, fails or pauses again (or its resume was refused).
//!
//! What this partition holds in Redis (the fields naming it) is made to
//! match its part's items (the `Resuming` ones) whenever they differ, and
//! once right after the part was loaded (a takeover: the previous owner
//! may have been stopped between a change and its release), so no slot
//! outlives its run.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};

use caucus_shared::redis::BatchSlots;

use super::logic::{BatchRecord, BatchState, ItemState};
use super::resume::{follow, stop_if_failing, Resumes, Step};
use super::BatchManager;
use crate::engine::Engine;
use crate::runtime::partition::Partition;

/// How long the scheduler waits for one slot call: it waits inside its
/// tick, so a Redis that does not answer must not stall the partition;
/// a call that timed out is retried at a later tick like a failed one.
const SLOT_CALL: Duration = Duration::from_millis(500);

/// `call`, failed after [`SLOT_CALL`].
async fn bounded<T>(
    call: impl std::future::Future<Output = Result<T, caucus_shared::Error>>,
) -> Result<T, String> {
    match tokio::time::timeout(SLOT_CALL, call).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("no answer from Redis within {SLOT_CALL:?}")),
    }
}

/// `<id>.p<partition>`: where partition `p`'s part of batch `id` is stored.
fn part_key(id: &str, p: u32) -> String {
    format!("{id}.p{p}")
}

/// The batch whose part of partition `p` is stored under `key`; `None`
/// for another partition's part or a batch of one partition.
fn batch_of_key(key: &str, p: u32) -> Option<String> {
    let (id, of) = key.rsplit_once(".p")?;
    (of.parse::<u32>().ok()? == p && !id.contains('.')).then(|| id.to_string())
}

/// One partition's share of the batches' running slots.
pub struct Spread {
    part: Partition,
    slots: BatchSlots,
    /// Per batch, the workflows this part holds a slot for, as Redis has
    /// them (as far as this part knows).
    held: HashMap<String, BTreeSet<String>>,
    /// Batches whose slots in Redis are unknown (just loaded, or a call
    /// failed): synced at the next drive.
    unsynced: BTreeSet<String>,
}

impl Spread {
    /// Partition `part`'s share, over `slots`.
    pub fn new(part: Partition, slots: BatchSlots) -> Self {
        Spread {
            part,
            slots,
            held: HashMap::new(),
            unsynced: BTreeSet::new(),
        }
    }

    /// The KV key of this partition's part of batch `id`.
    pub fn kv_key(&self, id: &str) -> String {
        part_key(id, self.part.index)
    }

    /// The batch whose part (of this partition) is stored under `key`.
    pub fn id_of_key(&self, key: &str) -> Option<String> {
        batch_of_key(key, self.part.index)
    }

    /// A part was loaded from the store: its slots are checked first.
    pub fn loaded(&mut self, id: &str) {
        self.unsynced.insert(id.to_string());
    }

    /// Makes this part's slots of `id` the `Resuming` items of `b`, when
    /// they differ from what Redis is known to hold.
    async fn sync(&mut self, id: &str, b: &BatchRecord) {
        let running: BTreeSet<String> = b
            .items
            .iter()
            .filter(|i| i.state == ItemState::Resuming)
            .filter_map(|i| i.workflow_id.clone())
            .collect();
        let held = self.held.get(id);
        if !self.unsynced.contains(id) && held.map_or(running.is_empty(), |h| *h == running) {
            return;
        }
        let keep: Vec<String> = running.iter().cloned().collect();
        match bounded(self.slots.sync(id, self.part.index, &keep)).await {
            Ok(n) => {
                tracing::debug!(batch_id = %id, partition = self.part.index, running = n, "batch slots synced");
                self.unsynced.remove(id);
                if running.is_empty() {
                    self.held.remove(id);
                } else {
                    self.held.insert(id.to_string(), running);
                }
            }
            Err(e) => {
                tracing::warn!(batch_id = %id, error = %e, "cannot sync the batch's running slots; will retry");
                self.unsynced.insert(id.to_string());
            }
        }
    }

    /// Takes a slot of batch `id` for `workflow_id` within `limit`.
    async fn acquire(&mut self, id: &str, workflow_id: &str, limit: u32) -> bool {
        match bounded(self.slots.acquire(id, workflow_id, limit, self.part.index)).await {
            Ok(true) => {
                self.held
                    .entry(id.to_string())
                    .or_default()
                    .insert(workflow_id.to_string());
                true
            }
            Ok(false) => false,
            Err(e) => {
                // It may have been taken before the answer was lost: the
                // next sync gives it back unless the workflow runs.
                tracing::warn!(batch_id = %id, workflow_id, error = %e, "cannot take a batch slot; will retry");
                self.unsynced.insert(id.to_string());
                false
            }
        }
    }
}

impl BatchManager {
    /// [`BatchManager::drive`] for a part of a batch spanning partitions:
    /// the same order, failure rule and capacity rule over this part's
    /// workflows, but a workflow resumes only once it took one of the
    /// batch's running slots in Redis (the limit over every part). Returns
    /// the workflows resumed.
    pub async fn drive_spread(
        &mut self,
        engine: &mut Engine,
        capacity: &HashMap<String, usize>,
        dirty: &mut HashSet<String>,
        now: DateTime<Utc>,
    ) -> Vec<String> {
        let Some(mut spread) = self.spread.take() else {
            return Vec::new();
        };
        let ratio = self.ratio;
        let batches = self.batches.values().map(|(b, _)| b);
        let mut to = Resumes::new(batches, engine, dirty, capacity, now);
        for (id, (b, _)) in self.batches.iter_mut() {
            // A completed part has nothing to follow, but may still hold
            // slots (a release that failed, or a takeover).
            let completed = b.state == BatchState::Completed;
            if completed && !spread.held.contains_key(id) && !spread.unsynced.contains(id) {
                continue;
            }
            let before = b.clone();
            if !completed {
                follow(b, to.engine);
                stop_if_failing(b, ratio);
            }
            spread.sync(id, b).await;
            if !completed && b.state != BatchState::Stopped {
                let mut running = b
                    .items
                    .iter()
                    .filter(|i| i.state == ItemState::Resuming)
                    .count();
                for idx in b.resume_order() {
                    // This part alone already fills the limit.
                    if running >= b.concurrency_limit as usize {
                        break;
                    }
                    let (wf, needs) = match to.step(b, idx, id) {
                        Step::Next => continue,
                        Step::Wait => break,
                        Step::Resume { wf, needs } => (wf, needs),
                    };
                    if !spread.acquire(id, &wf, b.concurrency_limit).await {
                        tracing::debug!(batch_id = %id, workflow_id = %wf, "resume waits for a batch slot");
                        break;
                    }
                    // A refused resume's slot goes back at the next sync.
                    if to.resume(b, idx, wf, needs) {
                        running += 1;
                    }
                }
                // Slots of resumes refused just now go back at once.
                spread.sync(id, b).await;
            }
            b.refresh_state();
            if *b != before {
                b.updated_at = now;
                self.dirty.insert(id.clone());
            }
        }
        self.spread = Some(spread);
        to.resumed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_partition_reads_back_only_its_own_parts() {
        let key = part_key("corr-c=1", 3);
        assert_eq!(key, "corr-c=1.p3");
        assert_eq!(batch_of_key(&key, 3).as_deref(), Some("corr-c=1"));
        assert_eq!(batch_of_key(&key, 1), None, "another partition's part");
        assert_eq!(
            batch_of_key("corr-c=1", 3),
            None,
            "a batch of one partition"
        );
        assert_eq!(batch_of_key("a.b.p3", 3), None, "not a batch id");
        assert_eq!(batch_of_key("b.px", 3), None);
    }
}
