//! One partition's part of a batch that spans partitions: the router
//! resolves the batch's items to their latest workflows over every
//! partition and hands each owner its own (`route/batches.rs`); the part
//! then runs the logic of one partition on them.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use caucus_shared::api::coordinator::control::{BatchStatusReply, InFlightPolicy};
use caucus_shared::nats::ApiError;

use super::logic::{paused_again, Elsewhere};
use super::pause::{resolve_targets, valid_id};
use super::resume::{new_resume_batch, resume_item};
use super::BatchManager;
use crate::engine::Engine;

/// A partition's share of a batch pause or a correlator's trigger.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PartPause {
    /// The batch (chosen by the router when the request named none).
    pub batch_id: String,
    /// Why, shown to people.
    pub reason: String,
    /// The failure correlation behind it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correlation_id: Option<String>,
    /// Pauses per wave (default `coordinator.batch_concurrency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_concurrency: Option<u32>,
    /// A correlator's trigger: items already in the batch are left as
    /// they are (a person's pause pauses resumed ones again).
    #[serde(default)]
    pub correlator: bool,
    /// This partition's workflows: the latest of each item.
    #[serde(default)]
    pub workflow_ids: Vec<String>,
    /// Items no partition held a workflow of (they fail here, as with one
    /// partition, unless one turned up meanwhile).
    #[serde(default)]
    pub items: Vec<String>,
    /// Items a person pauses again whose latest workflow is another
    /// partition's: their entries here go if resumed or failed (with one
    /// partition the batch drops them and adds the latest workflow).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forget: Vec<String>,
    /// The batch's items in the other partitions' parts, counted into this
    /// part's failure-ratio check (absent from an older router: judged
    /// alone).
    #[serde(default, skip_serializing_if = "Elsewhere::is_none")]
    pub elsewhere: Elsewhere,
}

/// A partition's share of a resume of items (a new batch).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PartResume {
    /// The new batch's id (chosen by the router).
    pub batch_id: String,
    /// Resumed-and-unfinished workflows at once, over every part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency_limit: Option<u32>,
    /// In-flight tasks on resume.
    #[serde(default)]
    pub in_flight: InFlightPolicy,
    /// Items and their latest workflow over every partition (this
    /// partition's), or none.
    pub targets: Vec<(String, Option<String>)>,
}

impl BatchManager {
    /// Adds this partition's workflows to batch `p.batch_id` and pauses
    /// them (in waves, as [`BatchManager::pause`]).
    pub fn pause_part(
        &mut self,
        p: PartPause,
        engine: &mut Engine,
        dirty: &mut HashSet<String>,
        now: DateTime<Utc>,
    ) -> Result<BatchStatusReply, ApiError> {
        valid_id(&p.batch_id)?;
        if p.max_concurrency == Some(0) {
            return Err(ApiError::bad_request("max_concurrency must be at least 1"));
        }
        if let Some((b, _)) = self.batches.get_mut(&p.batch_id) {
            let before = b.items.len();
            b.items
                .retain(|i| !(p.forget.contains(&i.item) && paused_again(i.state)));
            if b.items.len() != before {
                b.refresh_state();
                b.updated_at = now;
                self.dirty.insert(p.batch_id.clone());
            }
        }
        let targets = resolve_targets(&p.items, &p.workflow_ids, engine);
        let source = if p.correlator { "correlator" } else { "batch" };
        self.add_and_pause(
            &p.batch_id,
            p.reason,
            p.correlation_id,
            p.max_concurrency.unwrap_or(self.default_concurrency),
            source,
            targets,
            p.elsewhere,
            engine,
            dirty,
            now,
        )?;
        self.status(&p.batch_id)
    }

    /// Creates this partition's part of a resume of items (once: a retry
    /// finds it) and queues its paused workflows.
    pub fn resume_part(
        &mut self,
        p: PartResume,
        engine: &Engine,
        now: DateTime<Utc>,
    ) -> Result<BatchStatusReply, ApiError> {
        if p.concurrency_limit == Some(0) {
            return Err(ApiError::bad_request(
                "concurrency_limit must be at least 1",
            ));
        }
        let limit = p.concurrency_limit.unwrap_or(self.default_concurrency);
        if !self.batches.contains_key(&p.batch_id) {
            let items = p
                .targets
                .iter()
                .map(|(item, wf)| resume_item(item, wf.as_deref().and_then(|w| engine.get(w))))
                .collect();
            let b = new_resume_batch(&p.batch_id, items, limit, p.in_flight, now);
            self.batches.insert(p.batch_id.clone(), (b, None));
        }
        self.queue(&p.batch_id, limit, p.in_flight, now);
        self.status(&p.batch_id)
    }
}
