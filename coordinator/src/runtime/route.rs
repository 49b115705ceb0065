//! Which scheduler answers a request: the schedulers of the partitions this
//! instance holds, and the owners of the others, reached over NATS
//! (docs/PARTITIONS.md, item 7).
//!
//! Every coordinator subscribes to `<prefix>.api.coordinator.partition.*`
//! without a queue group and answers only for the partitions it holds; a
//! request is the typed API request of one operation, already checked
//! and attributed by the public handler, run by the same local handler.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use caucus_shared::api::Operation;
use caucus_shared::nats::ApiError;
use caucus_shared::subjects::Subjects;

use super::commands::SchedulerHandle;

pub mod batches;
pub mod by_item;
pub mod gates;

/// The schedulers this instance runs, by partition, and the operations
/// they answer for other instances (shared by every [`Router`] over them).
pub struct Schedulers {
    count: AtomicU32,
    held: RwLock<BTreeMap<u32, SchedulerHandle>>,
    ops: RwLock<HashMap<&'static str, LocalOp>>,
}

impl Default for Schedulers {
    fn default() -> Self {
        Schedulers {
            count: AtomicU32::new(1),
            held: RwLock::default(),
            ops: RwLock::default(),
        }
    }
}

impl std::fmt::Debug for Schedulers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schedulers")
            .field("count", &self.count())
            .field(
                "held",
                &self
                    .held
                    .read()
                    .map(|h| h.keys().copied().collect::<Vec<_>>()),
            )
            .finish_non_exhaustive()
    }
}

impl Schedulers {
    /// How many partitions there are (`coordinator.partitions`).
    pub fn count(&self) -> u32 {
        self.count.load(Ordering::Relaxed)
    }

    /// Sets the partition count (once, when the coordinator starts).
    pub fn set_count(&self, count: u32) {
        self.count.store(count.max(1), Ordering::Relaxed);
    }

    /// Partition `p`'s scheduler, when this instance holds it.
    pub fn get(&self, p: u32) -> Option<SchedulerHandle> {
        self.held.read().ok()?.get(&p).cloned()
    }

    /// The one scheduler of an unpartitioned deployment (the leader's).
    pub fn leader(&self) -> Option<SchedulerHandle> {
        if self.count() > 1 {
            return None;
        }
        self.get(0)
    }

    /// Partition `p`'s scheduler starts (`Some`) or stopped (`None`).
    pub fn set(&self, p: u32, handle: Option<SchedulerHandle>) {
        let mut held = self.held.write().expect("scheduler slots");
        match handle {
            Some(h) => held.insert(p, h),
            None => held.remove(&p),
        };
    }

    /// The partitions this instance holds.
    pub fn held(&self) -> Vec<(u32, SchedulerHandle)> {
        self.held
            .read()
            .map(|h| h.iter().map(|(p, s)| (*p, s.clone())).collect())
            .unwrap_or_default()
    }
}

/// One operation run on a local scheduler, JSON in and out.
type LocalOp = Arc<
    dyn Fn(SchedulerHandle, Value) -> BoxFuture<'static, Result<Value, ApiError>> + Send + Sync,
>;

/// A request forwarded to a partition's owner.
#[derive(Debug, Serialize, Deserialize)]
struct Forwarded {
    /// The operation's name.
    op: String,
    /// Its typed request, as JSON.
    request: Value,
}

/// The reply to a [`Forwarded`] request.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Answer {
    Ok(Value),
    Err(ApiError),
}

/// Routes operations to partitions.
#[derive(Clone)]
pub struct Router {
    schedulers: Arc<Schedulers>,
    client: async_nats::Client,
    subjects: Subjects,
    timeout: Duration,
}

impl Router {
    /// A router over this instance's `schedulers`.
    pub fn new(
        schedulers: Arc<Schedulers>,
        client: async_nats::Client,
        subjects: Subjects,
        timeout: Duration,
    ) -> Self {
        Router {
            schedulers,
            client,
            subjects,
            timeout,
        }
    }

    /// This instance's schedulers.
    pub fn schedulers(&self) -> &Arc<Schedulers> {
        &self.schedulers
    }

    /// The partition of `workflow_id`.
    pub fn partition_of(&self, workflow_id: &str) -> u32 {
        caucus_shared::partition::of(workflow_id, self.schedulers.count())
    }

    /// Makes `O` forwardable: `local` runs it on a scheduler of this
    /// instance, for its own callers and for other instances'.
    pub fn register<O, F, Fut>(&self, local: F)
    where
        O: Operation,
        F: Fn(SchedulerHandle, O::Request) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<O::Reply, ApiError>> + Send + 'static,
    {
        let local = Arc::new(local);
        let op: LocalOp = Arc::new(move |handle, request| {
            let local = local.clone();
            async move {
                let req: O::Request = serde_json::from_value(request)
                    .map_err(|e| ApiError::bad_request(format!("forwarded {}: {e}", O::NAME)))?;
                let reply = local(handle, req).await?;
                serde_json::to_value(reply)
                    .map_err(|e| ApiError::internal(format!("reply not serialisable: {e}")))
            }
            .boxed()
        });
        self.schedulers
            .ops
            .write()
            .expect("routed operations")
            .insert(O::NAME, op);
    }

    /// Runs `O` on partition `p`: here when this instance holds it, on its
    /// owner otherwise.
    pub async fn call<O: Operation>(
        &self,
        p: u32,
        request: &O::Request,
    ) -> Result<O::Reply, ApiError> {
        let body = serde_json::to_value(request)
            .map_err(|e| ApiError::internal(format!("request not serialisable: {e}")))?;
        let value = match self.schedulers.get(p) {
            Some(handle) => self.run_local(O::NAME, handle, body).await?,
            None => self.forward(p, O::NAME, body).await?,
        };
        serde_json::from_value(value)
            .map_err(|e| ApiError::internal(format!("partition {p} answered {}: {e}", O::NAME)))
    }

    /// Runs `O` on every partition, in partition order.
    pub async fn call_all<O: Operation>(
        &self,
        request: &O::Request,
    ) -> Result<Vec<O::Reply>, ApiError> {
        let calls = (0..self.schedulers.count()).map(|p| self.call::<O>(p, request));
        futures::future::join_all(calls).await.into_iter().collect()
    }

    async fn run_local(
        &self,
        op: &str,
        handle: SchedulerHandle,
        body: Value,
    ) -> Result<Value, ApiError> {
        let f = self
            .schedulers
            .ops
            .read()
            .expect("routed operations")
            .get(op)
            .cloned()
            .ok_or_else(|| ApiError::internal(format!("operation {op} is not routed")))?;
        f(handle, body).await
    }

    fn subject(&self, p: u32) -> String {
        format!("{}.api.coordinator.partition.{p}", self.subjects.prefix())
    }

    async fn forward(&self, p: u32, op: &str, request: Value) -> Result<Value, ApiError> {
        let unowned = || {
            ApiError::new(
                "unavailable",
                format!("partition {p} has no owner right now (coordinators are dividing the partitions); retry"),
            )
        };
        let body = serde_json::to_vec(&Forwarded {
            op: op.to_string(),
            request,
        })
        .map_err(|e| ApiError::internal(e.to_string()))?;
        let reply = tokio::time::timeout(
            self.timeout,
            self.client.request(self.subject(p), body.into()),
        )
        .await
        .map_err(|_| unowned())?
        .map_err(|_| unowned())?;
        match serde_json::from_slice::<Answer>(&reply.payload) {
            Ok(Answer::Ok(v)) => Ok(v),
            Ok(Answer::Err(e)) => Err(e),
            Err(e) => Err(ApiError::internal(format!(
                "partition {p}'s owner answered {op} unreadably: {e}"
            ))),
        }
    }

    /// Answers other instances' requests for the partitions this instance
    /// holds, until `shutdown`.
    pub async fn serve(self, shutdown: CancellationToken) {
        let wildcard = format!("{}.api.coordinator.partition.*", self.subjects.prefix());
        let mut sub = match self.client.subscribe(wildcard.clone()).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(subject = %wildcard, error = %e, "cannot serve forwarded requests");
                return;
            }
        };
        loop {
            let msg = tokio::select! {
                _ = shutdown.cancelled() => break,
                m = sub.next() => match m { Some(m) => m, None => break },
            };
            let Some(p) = msg
                .subject
                .rsplit('.')
                .next()
                .and_then(|t| t.parse::<u32>().ok())
            else {
                continue;
            };
            // Not ours: its owner answers (no reply here, or the caller
            // could take a refusal for the answer).
            let Some(handle) = self.schedulers.get(p) else {
                continue;
            };
            let (Some(reply_to), router) = (msg.reply.clone(), self.clone()) else {
                continue;
            };
            tokio::spawn(async move {
                let answer = match serde_json::from_slice::<Forwarded>(&msg.payload) {
                    Ok(f) => match router.run_local(&f.op, handle, f.request).await {
                        Ok(v) => Answer::Ok(v),
                        Err(e) => Answer::Err(e),
                    },
                    Err(e) => Answer::Err(ApiError::bad_request(format!(
                        "forwarded request unreadable: {e}"
                    ))),
                };
                let body = serde_json::to_vec(&answer).unwrap_or_default();
                if let Err(e) = router.client.publish(reply_to, body.into()).await {
                    tracing::debug!(error = %e, "cannot answer a forwarded request");
                }
            });
        }
        let _ = sub.unsubscribe().await;
    }
}

/// The refusal of an operation that partitioned coordinators do not serve
/// yet (docs/PARTITIONS.md).
pub fn unsupported(op: &str, what: &str) -> ApiError {
    ApiError::new(
        "unsupported",
        format!("{op} {what} is not served when the coordinators are partitioned (coordinator.partitions > 1) yet; see docs/PARTITIONS.md"),
    )
}

/// Registers `O`, run by `local` on a scheduler: with one partition on
/// the leader's (a standby answers `standby`, as always); with several on
/// the owner of the workflow `key` names, here or forwarded. A request
/// without one is refused with several partitions.
pub fn by_workflow<O, F, Fut>(
    svc: &mut caucus_shared::service::Service,
    router: &Router,
    key: fn(&O::Request) -> Option<&str>,
    local: F,
) where
    O: Operation,
    F: Fn(SchedulerHandle, O::Request) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<O::Reply, ApiError>> + Send + 'static,
{
    by_workflow_or::<O, _, _, _, _>(svc, router, key, local, |_, _| {
        std::future::ready(Err(unsupported(O::NAME, "without a workflow_id")))
    });
}

/// [`by_workflow`], but a request without a workflow id is answered with
/// several partitions by `across` (which reaches the partitions through
/// the router: a list merged from all, or the workflow it resolves).
pub fn by_workflow_or<O, F, Fut, A, AFut>(
    svc: &mut caucus_shared::service::Service,
    router: &Router,
    key: fn(&O::Request) -> Option<&str>,
    local: F,
    across: A,
) where
    O: Operation,
    F: Fn(SchedulerHandle, O::Request) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<O::Reply, ApiError>> + Send + 'static,
    A: Fn(Router, O::Request) -> AFut + Clone + Send + Sync + 'static,
    AFut: std::future::Future<Output = Result<O::Reply, ApiError>> + Send + 'static,
{
    router.register::<O, _, _>(local.clone());
    let health = svc.context().health.clone();
    let router = router.clone();
    svc.op::<O, _, _>(move |req| {
        let (router, health, local, across) = (
            router.clone(),
            health.clone(),
            local.clone(),
            across.clone(),
        );
        async move {
            if router.schedulers().count() <= 1 {
                let handle = super::leader_only(router.schedulers(), &health)?;
                return local(handle, req).await;
            }
            let Some(wf) = key(&req) else {
                return across(router, req).await;
            };
            let p = router.partition_of(wf);
            router.call::<O>(p, &req).await
        }
    });
}
