//! Where a submission's workflow records go: the one scheduler, or, with
//! several partitions, the store first and then each partition's owner,
//! which adopts its own (docs/PARTITIONS.md, item 6).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use caucus_shared::api::Operation;
use caucus_shared::nats::ApiError;

use super::commands::{ask, Command, SchedulerHandle};
use super::route::Router;
use super::store::WorkflowStore;
use super::submissions::{SubmitGrant, SubmitOp};
use crate::workflow::WorkflowRecord;

/// Where a submission's records go.
// One per submission (or per request intake): its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub enum SubmitTo {
    /// The scheduler that owns every workflow (one partition).
    Scheduler(SchedulerHandle),
    /// Several partitions: the records are stored with epoch 0 (owned by
    /// nobody yet), then each partition's owner reads and adopts its own.
    Partitions {
        /// Reaches each partition's owner.
        router: Router,
        /// Where the records are created.
        store: WorkflowStore,
    },
}

impl SubmitTo {
    /// The epoch and store for the next records.
    pub async fn begin(&self) -> Result<SubmitGrant, ApiError> {
        match self {
            SubmitTo::Scheduler(s) => ask(s, |reply| Command::Submit {
                op: SubmitOp::Begin,
                reply,
            })
            .await?
            .map_err(|e| ApiError::new("store_failed", e.to_string())),
            SubmitTo::Partitions { store, .. } => Ok(SubmitGrant {
                epoch: 0,
                store: store.clone(),
            }),
        }
    }

    /// Hands stored records to their owners. `Ok(Some(grant))` renews the
    /// grant (one scheduler); `Err` says why some were not taken over.
    pub async fn adopt(
        &self,
        records: Vec<(WorkflowRecord, u64)>,
    ) -> Result<Option<SubmitGrant>, String> {
        match self {
            SubmitTo::Scheduler(s) => match ask(s, |reply| Command::Submit {
                op: SubmitOp::Adopt(records),
                reply,
            })
            .await
            {
                Ok(Ok(g)) => Ok(Some(g)),
                Ok(Err(e)) => Err(e.to_string()),
                Err(e) => Err(ApiError::from(e).message),
            },
            SubmitTo::Partitions { router, .. } => {
                let mut by_partition: BTreeMap<u32, Vec<String>> = BTreeMap::new();
                for (rec, _) in &records {
                    by_partition
                        .entry(router.partition_of(&rec.workflow_id))
                        .or_default()
                        .push(rec.workflow_id.clone());
                }
                let calls = by_partition.into_iter().map(|(p, workflow_ids)| {
                    let req = AdoptRequest { workflow_ids };
                    async move { router.call::<Adopt>(p, &req).await }
                });
                for r in futures::future::join_all(calls).await {
                    r.map_err(|e| e.message)?;
                }
                Ok(None)
            }
        }
    }
}

/// The internal operation a partition's owner answers: take over these
/// stored workflows (never in the catalog: only coordinators send it).
pub struct Adopt;

impl Operation for Adopt {
    const SERVICE: &'static str = "coordinator";
    const NAME: &'static str = "adopt";
    const SUMMARY: &'static str = "take over stored workflows of this partition (internal)";
    const ERRORS: &'static [&'static str] = &[];
    const MUTATES: bool = true;
    type Request = AdoptRequest;
    type Reply = AdoptReply;
}

/// The workflows to take over.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdoptRequest {
    /// Their ids (all of the answering partition).
    pub workflow_ids: Vec<String>,
}

/// How many the scheduler holds now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdoptReply {
    /// Workflows of the request it holds.
    pub held: usize,
}

/// Makes [`Adopt`] answerable by this instance's schedulers.
pub fn register(router: &Router) {
    router.register::<Adopt, _, _>(|h, req: AdoptRequest| async move {
        let held = ask(&h, |reply| Command::AdoptIds {
            ids: req.workflow_ids,
            reply,
        })
        .await?;
        Ok(AdoptReply { held })
    });
}
