//! Where a submission's workflow records go: the one scheduler, or, with
//! several partitions, the store first and then each partition's owner,
//! which adopts its own (docs/PARTITIONS.md, item 6).

use std::collections::BTreeMap;

use futures::StreamExt;
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
            SubmitTo::Partitions { router, store } => Ok(SubmitGrant {
                epoch: 0,
                store: store.clone(),
                partitions: router.schedulers().count(),
            }),
        }
    }

    /// Hands stored records to their owners. `Ok(Some(grant))` renews the
    /// grant (one scheduler); `Err` says why some were not taken over.
    pub async fn adopt(
        &self,
        records: Vec<(WorkflowRecord, u64)>,
        groups: Vec<(String, Vec<String>)>,
    ) -> Result<Option<SubmitGrant>, String> {
        match self {
            SubmitTo::Scheduler(s) => match ask(s, |reply| Command::Submit {
                op: SubmitOp::Adopt(records, groups),
                reply,
            })
            .await
            {
                Ok(Ok(g)) => Ok(Some(g)),
                Ok(Err(e)) => Err(e.to_string()),
                Err(e) => Err(ApiError::from(e).message),
            },
            SubmitTo::Partitions { router, .. } => {
                let mut by_partition: BTreeMap<u32, Vec<(WorkflowRecord, u64)>> = BTreeMap::new();
                for r in records {
                    by_partition
                        .entry(router.partition_of(&r.0.workflow_id))
                        .or_default()
                        .push(r);
                }
                let mut group_of: BTreeMap<u32, (String, Vec<String>)> = groups
                    .into_iter()
                    .filter_map(|g| Some((router.partition_of(g.1.first()?), g)))
                    .collect();
                let calls = by_partition.into_iter().map(|(p, records)| {
                    let group = group_of.remove(&p);
                    async move { adopt_in(router, p, records, group).await }
                });
                for r in futures::future::join_all(calls).await {
                    r.map_err(|e| e.message)?;
                }
                Ok(None)
            }
        }
    }
}

/// Hands partition `p`'s stored `records` to its owner: in memory when
/// this instance holds `p` (the records are at hand, as with one
/// partition), else by [`Adopt`], whose owner reads them from KV.
async fn adopt_in(
    router: &Router,
    p: u32,
    records: Vec<(WorkflowRecord, u64)>,
    group: Option<(String, Vec<String>)>,
) -> Result<(), ApiError> {
    let workflow_ids: Vec<String> = records.iter().map(|(r, _)| r.workflow_id.clone()).collect();
    if let Some(local) = router.schedulers().get(p) {
        let groups: Vec<(String, Vec<String>)> = group.iter().cloned().collect();
        let taken = ask(&local, |reply| Command::Submit {
            op: SubmitOp::Adopt(records, groups),
            reply,
        })
        .await;
        // A term that just ended (the partition moved): its next owner,
        // wherever it runs, reads them.
        if matches!(taken, Ok(Ok(_))) {
            return Ok(());
        }
    }
    let req = AdoptRequest {
        workflow_ids,
        group: group.map(|(key, _)| key),
    };
    router.call::<Adopt>(p, &req).await.map(|_| ())
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
    /// The index group they were indexed under (`_grp.<first id>`), which
    /// the owner removes once every one of them finished; absent from a
    /// coordinator that indexed each on its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// How many the scheduler holds now.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdoptReply {
    /// Workflows of the request it holds.
    pub held: usize,
}

/// How many records an [`Adopt`] reads from KV at once.
const ADOPT_READS: usize = 32;

/// Makes [`Adopt`] answerable by this instance's schedulers.
///
/// The records are read here, concurrently, and handed to the scheduler
/// in memory: read one after another inside its loop, a step of a large
/// submission held up that partition's events and dispatches for as many
/// KV round trips as it had workflows. `AdoptIds` then takes what was not
/// handed over (not found, finished, or unreadable: it reads those itself,
/// as before) and tracks the index group, so what the reply counts and
/// which members keep the group are as they were.
pub fn register(router: &Router) {
    router.register::<Adopt, _, _>(|h, req: AdoptRequest| async move {
        if let Ok(Ok(grant)) = ask(&h, |reply| Command::Submit {
            op: SubmitOp::Begin,
            reply,
        })
        .await
        {
            let read: Vec<_> = futures::stream::iter(req.workflow_ids.clone())
                .map(|id| {
                    let store = grant.store.clone();
                    async move { store.get(&id).await }
                })
                .buffered(ADOPT_READS)
                .collect()
                .await;
            let records: Vec<(WorkflowRecord, u64)> = read
                .into_iter()
                .filter_map(|r| r.ok().flatten())
                .filter(|(rec, _)| !rec.state.is_terminal())
                .collect();
            if !records.is_empty() {
                // Refused only when the term just ended: AdoptIds says so.
                let _ = ask(&h, |reply| Command::Submit {
                    op: SubmitOp::Adopt(records, Vec::new()),
                    reply,
                })
                .await;
            }
        }
        let held = ask(&h, |reply| Command::AdoptIds {
            ids: req.workflow_ids,
            group: req.group,
            reply,
        })
        .await?;
        Ok(AdoptReply { held })
    });
}
