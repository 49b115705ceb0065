//! The gate operations of the coordinator's API (`gates`, `gate`,
//! `gate_decide`, `gate_review`, `rerun`; types in
//! `caucus_shared::api::coordinator::gates`). What needs the facilitator
//! (open debates, provisional decisions, a level-5 review and its impact
//! report) is asked here, outside the scheduler loop, so a slow
//! facilitator never stalls dispatch.

use std::future::Future;
use std::time::Duration;

use async_nats::Client;
use serde::de::DeserializeOwned;
use serde_json::Value;

use caucus_shared::api::coordinator::gates::{Gate, GateDecide, GateReview, Gates, Rerun};
use caucus_shared::api::facilitator::{Provisional, ProvisionalReply, ProvisionalRequest};
use caucus_shared::api::{ApiClient, Operation};
use caucus_shared::nats::api::{ApiError, CODE_NO_RESPONDERS};
use caucus_shared::service::Service;
use caucus_shared::subjects::Subjects;

use super::commands::{ask, Command, SchedulerHandle};
use super::gates::GateOp;
use crate::workflow::WorkflowRecord;

mod auto;
mod decide;
mod findings;
mod listing;
mod newest;
mod package;
pub mod page;
mod review;

pub use auto::auto_decide;
pub use package::MAX_PACKAGE_FINDINGS;
pub use review::{analyses_of, rerun_groups};

/// What the gate operations need besides the scheduler.
#[derive(Clone)]
pub struct GateApi {
    /// NATS connection (facilitator requests, findings).
    pub client: Client,
    /// Subjects.
    pub subjects: Subjects,
    /// Timeout of each facilitator request.
    pub timeout: Duration,
    /// How far back a decision package reads the item's findings
    /// (`coordinator.findings_lookback`); `None` reads the whole history.
    pub findings_lookback: Option<Duration>,
}

/// Sends `op` to the scheduler and waits for its answer (the reply's JSON).
pub async fn call(handle: &SchedulerHandle, op: GateOp) -> Result<Value, ApiError> {
    ask(handle, |reply| Command::Gate { op, reply }).await?
}

/// Sends `op` to the scheduler and reads its answer as `T`.
pub async fn call_as<T: DeserializeOwned>(
    handle: &SchedulerHandle,
    op: GateOp,
) -> Result<T, ApiError> {
    let v = call(handle, op).await?;
    serde_json::from_value(v).map_err(|e| ApiError::internal(format!("gate reply: {e}")))
}

impl GateApi {
    /// Calls the facilitator's operation `O`.
    async fn facilitator<O: Operation>(&self, request: &O::Request) -> Result<O::Reply, ApiError> {
        self.facilitator_as::<O>(None, request).await
    }

    /// Calls the facilitator's operation `O` as `identity` when there is
    /// one: a mutating call then goes to `….as.<identity>`, so the
    /// facilitator records the person this coordinator acted for, not
    /// `operator` (with `security.require_identity` it would otherwise
    /// overwrite the name on a bare call).
    async fn facilitator_as<O: Operation>(
        &self,
        identity: Option<&str>,
        request: &O::Request,
    ) -> Result<O::Reply, ApiError> {
        let client = ApiClient::new(self.client.clone(), self.subjects.clone(), self.timeout);
        let client = match identity {
            Some(id) => client.with_identity(id),
            None => client,
        };
        client.call::<O>(request).await
    }

    /// The workflow's record, as the scheduler holds it.
    async fn record(
        &self,
        handle: &SchedulerHandle,
        workflow_id: &str,
    ) -> Result<WorkflowRecord, ApiError> {
        let op = GateOp::Get {
            workflow_id: workflow_id.to_string(),
        };
        call_as(handle, op).await
    }

    /// Provisional decisions of a workflow still awaiting review, from the
    /// facilitator. `Ok(None)` when no facilitator runs.
    async fn provisional(&self, workflow_id: &str) -> Result<Option<ProvisionalReply>, ApiError> {
        let request = ProvisionalRequest {
            workflow_id: Some(workflow_id.to_string()),
            item: None,
        };
        match self.facilitator::<Provisional>(&request).await {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.code == CODE_NO_RESPONDERS => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Registers `O`, answered by the scheduler that owns the workflow `key`
/// names (the leader's with one partition): `handler` gets the gate API,
/// the scheduler and the decoded request.
fn routed<O, F, Fut>(
    svc: &mut Service,
    router: &super::route::Router,
    api: &GateApi,
    key: fn(&O::Request) -> Option<&str>,
    handler: F,
) where
    O: Operation,
    F: Fn(GateApi, SchedulerHandle, O::Request) -> Fut + Copy + Send + Sync + 'static,
    Fut: Future<Output = Result<O::Reply, ApiError>> + Send + 'static,
{
    let api = api.clone();
    super::route::by_workflow::<O, _, _>(svc, router, key, move |h, r| handler(api.clone(), h, r));
}

/// Registers `gates`, `gate`, `gate_decide`, `gate_review` and `rerun`
/// (the workflow's scheduler answers).
pub fn routes(svc: &mut Service, router: &super::route::Router) {
    let ctx = svc.context().clone();
    let api = GateApi {
        client: ctx.nats.clone(),
        subjects: ctx.subjects.clone(),
        timeout: ctx.config.nats.request_timeout,
        findings_lookback: Some(ctx.config.coordinator.findings_lookback),
    };
    // Without a workflow_id, several partitions' lists are merged.
    let list = api.clone();
    super::route::by_workflow_or::<Gates, _, _, _, _>(
        svc,
        router,
        |r| r.workflow_id.as_deref(),
        move |h, r| {
            let api = list.clone();
            async move { api.list(h, r).await }
        },
        |router, r| async move { super::route::gates::gates(&router, r).await },
    );
    routed::<Gate, _, _>(
        svc,
        router,
        &api,
        |r| Some(&r.workflow_id),
        |api, h, r| async move { api.package(h, r).await },
    );
    routed::<GateDecide, _, _>(
        svc,
        router,
        &api,
        |r| Some(&r.workflow_id),
        |api, h, r| async move { api.decide(h, r).await },
    );
    routed::<GateReview, _, _>(
        svc,
        router,
        &api,
        |r| Some(&r.workflow_id),
        |api, h, r| async move { api.review(h, r).await },
    );
    routed::<Rerun, _, _>(
        svc,
        router,
        &api,
        |r| Some(&r.workflow_id),
        |api, h, r| async move { api.rerun(h, r).await },
    );
}
