//! Persisting what changed, then acknowledging the events behind it:
//! the pump holds an unfinished workflow's write back for up to
//! `persist_delay` so that its events close together share one write,
//! large outputs go to the outputs bucket first, lazily recorded starts
//! ride along, a revision conflict is resolved by epoch, and a tenure that
//! is over returns its unapplied events.

use std::collections::HashSet;

use async_nats::jetstream;
use futures::future::join_all;

use caucus_shared::task::TaskEvent;

use super::Scheduler;
use crate::runtime::store::StoreError;

impl Scheduler {
    /// Makes every lazily recorded `started` due for the next persist.
    pub(super) fn flush_lazy(&mut self) {
        for (id, msgs) in self.lazy.drain() {
            self.dirty.insert(id.clone());
            self.pending_acks.entry(id).or_default().extend(msgs);
        }
    }

    /// Moves a just-recorded output that is over `inline_output_bytes` out
    /// of the record: it is written to the outputs bucket ahead of the
    /// record, which keeps only its key.
    pub(super) fn spill_output(&mut self, ev: &TaskEvent) {
        let Some(rec) = self.engine.get_mut(&ev.workflow_id) else {
            return;
        };
        let Some(key) = ev.task_id.strip_prefix(&format!("{}/", ev.workflow_id)) else {
            return;
        };
        let Some(t) = rec.tasks.get_mut(key) else {
            return;
        };
        let Some(out) = &t.output else { return };
        let body = serde_json::to_vec(out).expect("outputs serialise");
        if body.len() <= self.cfg.inline_output_bytes {
            return;
        }
        let okey = crate::runtime::store::output_key(&ev.task_id, t.attempt);
        t.output_key = Some(okey.clone());
        self.unsaved_outputs
            .entry(ev.workflow_id.clone())
            .or_default()
            .push((okey, body.into()));
    }

    /// The tenure is over: nothing more is written or acknowledged. Events
    /// applied only in memory are nak'ed so the current leader applies them
    /// now rather than after `ack_wait`.
    pub(super) async fn abandon(&mut self) {
        self.flush_lazy();
        self.dirty.clear();
        self.dirty_since.clear();
        self.next_persist = None;
        let msgs: Vec<jetstream::Message> =
            self.pending_acks.drain().flat_map(|(_, m)| m).collect();
        if !msgs.is_empty() {
            tracing::warn!(
                events = msgs.len(),
                "not the leader any more: returning unapplied events"
            );
        }
        nak_all(&msgs).await;
    }

    /// Writes every changed workflow, then acknowledges the events behind
    /// them: for what a person or the API asked for, which must be stored
    /// before the caller hears "done", and at shutdown.
    pub(super) async fn persist(&mut self) {
        self.write(false).await;
    }

    /// The pump's write: as [`Self::persist`], except that an unfinished
    /// workflow first changed less than `persist_delay` ago waits (with its
    /// events unacknowledged) so that its next events share the write.
    pub(super) async fn persist_due(&mut self) {
        self.write(true).await;
    }

    /// The workflows whose write waits, and when the first of them is due
    /// (`next_persist`, which wakes the loop).
    fn held_back(&mut self) -> HashSet<String> {
        let delay = self.cfg.persist_delay;
        let mut held = HashSet::new();
        self.next_persist = None;
        if delay.is_zero() {
            return held;
        }
        let now = tokio::time::Instant::now();
        for id in &self.dirty {
            let since = match self.dirty_since.get(id) {
                Some(t) => *t,
                None => {
                    self.dirty_since.insert(id.clone(), now);
                    now
                }
            };
            let due = since + delay;
            let finished = self.engine.get(id).is_none_or(|r| r.state.is_terminal());
            if due <= now || finished {
                continue;
            }
            held.insert(id.clone());
            self.next_persist = Some(self.next_persist.map_or(due, |n| n.min(due)));
        }
        held
    }

    async fn write(&mut self, hold: bool) {
        if !self.unindex_due.is_empty() && self.may_act() {
            let keys = std::mem::take(&mut self.unindex_due);
            join_all(keys.iter().map(|k| self.store.unindex(k))).await;
        }
        if self.dirty.is_empty() && self.pending_acks.is_empty() {
            return;
        }
        if !self.may_act() {
            self.abandon().await;
            return;
        }
        let held = if hold {
            self.held_back()
        } else {
            self.next_persist = None;
            HashSet::new()
        };
        let ids: Vec<String> = if held.is_empty() {
            self.dirty.drain().collect()
        } else {
            let all = std::mem::take(&mut self.dirty);
            all.into_iter().filter(|id| !held.contains(id)).collect()
        };
        let epoch = self.epoch();
        let mut retry: HashSet<String> = HashSet::new();
        // What must be stored before the record can be: its large outputs
        // and, for a finished workflow brought back unfinished, its index
        // entry. A workflow whose prerequisites fail waits for the retry.
        let store = &self.store;
        let before = ids.iter().map(|id| {
            let outputs = self.unsaved_outputs.get(id).cloned().unwrap_or_default();
            let finished = self.engine.get(id).is_some_and(|r| r.state.is_terminal());
            let reindex = !finished && self.unindexed.contains(id);
            async move {
                if reindex {
                    store.index(id).await?;
                }
                for (k, body) in outputs {
                    store.put_output(&k, body, finished).await?;
                }
                Ok::<_, StoreError>(())
            }
        });
        for (id, r) in ids.iter().zip(join_all(before).await) {
            match r {
                Ok(()) => {
                    self.unsaved_outputs.remove(id);
                    if self.engine.get(id).is_some_and(|r| !r.state.is_terminal()) {
                        self.unindexed.remove(id);
                    }
                }
                Err(e) => {
                    tracing::warn!(workflow_id = %id, error = %e, "cannot store a workflow's outputs or index entry; will retry");
                    retry.insert(id.clone());
                }
            }
        }
        let mut bodies = Vec::with_capacity(ids.len());
        for id in &ids {
            // A workflow written now carries its lazily recorded starts too.
            if let Some(msgs) = self.lazy.remove(id) {
                self.pending_acks
                    .entry(id.clone())
                    .or_default()
                    .extend(msgs);
            }
            if retry.contains(id) {
                continue;
            }
            let (Some(rec), Some(rev)) = (self.engine.get_mut(id), self.revisions.get(id)) else {
                continue;
            };
            rec.epoch = epoch;
            let finished = rec.state.is_terminal();
            bodies.push((
                id.clone(),
                crate::runtime::store::encode(rec),
                *rev,
                finished,
            ));
        }
        let writes = bodies
            .into_iter()
            .map(|(id, body, rev, finished)| async move {
                let r = store.update_encoded(&id, body, rev, finished).await;
                (id, finished, r)
            });
        let results = join_all(writes).await;
        let mut conflicts = Vec::new();
        let mut unindex = Vec::new();
        for (id, finished, r) in results {
            match r {
                Ok(rev) => {
                    // Unindexed only once the finishing write is stored.
                    if finished {
                        unindex.extend(self.index_groups.finished(&id));
                    }
                    self.revisions.insert(id, rev);
                }
                Err(StoreError::Conflict(id)) => conflicts.push(id),
                Err(e) => {
                    tracing::warn!(workflow_id = %id, error = %e, "persist failed; will retry");
                    retry.insert(id);
                }
            }
        }
        join_all(unindex.iter().map(|k| store.unindex(k))).await;
        for id in conflicts {
            if !self.on_conflict(&id).await {
                // Deposed: a newer tenure wrote this workflow.
                self.abandon().await;
                return;
            }
        }
        // Acknowledge what is stored (and events that changed nothing);
        // events of a workflow whose write failed wait for the retry.
        // Events of a workflow held back wait for its write.
        let done: Vec<String> = self
            .pending_acks
            .keys()
            .filter(|id| !retry.contains(*id) && !held.contains(*id))
            .cloned()
            .collect();
        let mut acks = Vec::new();
        for id in done {
            acks.extend(self.pending_acks.remove(&id).unwrap_or_default());
        }
        join_all(acks.iter().map(|m| m.ack())).await;
        self.dirty.extend(retry);
        self.dirty.extend(held);
        if self.dirty.is_empty() {
            self.dirty_since.clear();
        } else {
            let dirty = &self.dirty;
            self.dirty_since.retain(|id, _| dirty.contains(id));
        }
    }

    /// Another writer changed `id` since this scheduler read it. A record
    /// stamped with a newer epoch means this tenure is over (`false`). An
    /// older or equal epoch is a deposed leader's last write (it passed its
    /// lease check just before a pause): its record is a valid successor
    /// state, so it is adopted and this scheduler's own events for the
    /// workflow are nak'ed, to be applied again on top of it.
    async fn on_conflict(&mut self, id: &str) -> bool {
        let stored = match self.store.get(id).await {
            Ok(Some(found)) => found,
            Ok(None) => {
                tracing::error!(workflow_id = %id, "revision conflict and the record is gone");
                self.engine.remove(id);
                self.revisions.remove(id);
                nak_all(&self.pending_acks.remove(id).unwrap_or_default()).await;
                return true;
            }
            Err(e) => {
                // Not known which writer won: write nothing more, ack nothing.
                tracing::error!(workflow_id = %id, error = %e, "revision conflict and the record cannot be read; stepping down");
                if let Some(l) = &self.lease {
                    l.step_down("revision conflict on an unreadable record");
                }
                return self.lease.is_none();
            }
        };
        let (rec, rev) = stored;
        if rec.epoch > self.epoch() {
            tracing::error!(workflow_id = %id, stored_epoch = rec.epoch, epoch = self.epoch(), "a newer leader wrote this workflow; stepping down");
            if let Some(l) = &self.lease {
                l.step_down("a newer leader's write found");
            }
            return self.lease.is_none();
        }
        tracing::warn!(workflow_id = %id, stored_epoch = rec.epoch, "revision conflict with an older leader's write: adopting it and re-applying this workflow's events");
        self.revisions.insert(id.to_string(), rev);
        self.engine.insert(rec);
        self.hear_in_flight(id);
        self.dirty.remove(id);
        self.unsaved_outputs.remove(id);
        let mut msgs = self.pending_acks.remove(id).unwrap_or_default();
        msgs.extend(self.lazy.remove(id).unwrap_or_default());
        nak_all(&msgs).await;
        true
    }
}

/// Returns events to the stream for redelivery now.
async fn nak_all(msgs: &[jetstream::Message]) {
    join_all(
        msgs.iter()
            .map(|m| m.ack_with(jetstream::AckKind::Nak(None))),
    )
    .await;
}
