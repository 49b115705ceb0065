//! Which workflow records the scheduler holds in memory: the unfinished
//! ones loaded at start-up, those a submission hands over, finished ones
//! read back on demand, and finished ones evicted after a while.

use chrono::Utc;

use super::Scheduler;
use crate::runtime::commands::LeaseExpired;
use crate::runtime::store::StoreError;
use crate::runtime::submissions;

impl Scheduler {
    /// Loads every unfinished workflow from KV (start-up / takeover).
    /// Returns how many, and the highest fencing epoch found in any record
    /// (the floor this tenure's epoch must be above).
    pub async fn load(&mut self) -> Result<(usize, u64), StoreError> {
        let loaded = self
            .store
            .load_unfinished(self.partition, self.clock.now())
            .await?;
        let max_epoch = loaded.max_epoch;
        for (key, pending) in loaded.groups {
            self.index_groups.track(&key, pending);
        }
        let mut n = 0;
        let mut stage_lists = crate::workflow::StageLists::default();
        for (mut rec, rev) in loaded.records {
            if !self.partition.owns(&rec.workflow_id) {
                continue;
            }
            // Workflows read back from KV share equal stage lists again,
            // as they did when they were submitted together.
            rec.stages = stage_lists.intern(&rec.pipeline, rec.stages);
            self.revisions.insert(rec.workflow_id.clone(), rev);
            let id = rec.workflow_id.clone();
            self.engine.insert(rec);
            self.hear_in_flight(&id);
            n += 1;
        }
        if let Some(c) = self.control.as_mut() {
            c.load(&self.engine).await?;
        }
        Ok((n, max_epoch))
    }

    /// Puts a workflow this scheduler no longer holds (finished and
    /// evicted) back in memory from KV, so it can be re-run or inspected.
    pub(super) async fn ensure_loaded(&mut self, id: &str) {
        // Another partition's workflow is its owner's to load and write.
        if self.engine.get(id).is_some() || !self.partition.owns(id) {
            return;
        }
        if let Ok(Some((rec, rev))) = self.store.get(id).await {
            self.revisions.insert(id.to_string(), rev);
            if rec.state.is_terminal() {
                self.unindexed.insert(id.to_string());
                // Finished before: not a finish of this tenure's.
                self.finished_seen.insert(id.to_string());
            }
            self.engine.insert(rec);
            self.hear_in_flight(id);
        }
    }

    /// A step of a submission. The records were stored by the API (off
    /// this loop) stamped with the epoch this answered before; taking them
    /// over is in memory only, so a large submission, handed over in
    /// steps, never holds up dispatching. A record this scheduler already
    /// holds (a retry racing the first attempt) is left as it is.
    pub(super) fn submit(
        &mut self,
        op: submissions::SubmitOp,
    ) -> Result<submissions::SubmitGrant, LeaseExpired> {
        if !self.may_act() {
            return Err(LeaseExpired);
        }
        if let submissions::SubmitOp::Adopt(records, groups) = op {
            let mut adopted = 0;
            for (rec, rev) in records {
                if self.engine.get(&rec.workflow_id).is_some() {
                    continue;
                }
                if !self.partition.owns(&rec.workflow_id) {
                    // A routing bug, not a user's: never own two ways.
                    tracing::error!(workflow_id = %rec.workflow_id, partition = self.partition.index, "a submission handed over another partition's workflow; left to its owner");
                    continue;
                }
                adopted += 1;
                let id = rec.workflow_id.clone();
                self.revisions.insert(id.clone(), rev);
                self.engine.insert(rec);
                self.hear_in_flight(&id);
            }
            crate::runtime::metrics::workflows_submitted(adopted);
            for (key, ids) in groups {
                self.track_group(key, ids);
            }
        }
        Ok(submissions::SubmitGrant {
            epoch: self.epoch(),
            store: self.store.clone(),
            partitions: self.partition.count,
        })
    }

    /// Tracks index group `key` of `ids`: those not finished yet (a retried
    /// step's may be) keep it; with none, it is removed at the next write.
    pub(super) fn track_group(&mut self, key: String, ids: Vec<String>) {
        let pending = ids.into_iter().filter(|id| {
            self.engine
                .get(id)
                .is_none_or(|r| !r.state.is_terminal() || self.dirty.contains(id))
        });
        let pending: Vec<String> = pending.collect();
        if self.index_groups.track(&key, pending) {
            self.unindex_due.push(key);
        }
    }

    pub(super) fn evict_finished(&mut self, now: chrono::DateTime<Utc>) {
        let keep = chrono::Duration::from_std(self.cfg.retain_finished).unwrap_or_default();
        let old: Vec<String> = self
            .engine
            .workflows()
            .filter(|r| r.state.is_terminal())
            .filter(|r| r.finished_at.is_some_and(|f| now - f > keep))
            .filter(|r| !self.dirty.contains(&r.workflow_id))
            .map(|r| r.workflow_id.clone())
            .collect();
        for id in old {
            self.engine.remove(&id);
            self.revisions.remove(&id);
            self.unindexed.remove(&id);
            self.finished_seen.remove(&id);
        }
    }
}
