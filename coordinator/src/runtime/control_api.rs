//! API operations `coordinator.pause`, `coordinator.resume`,
//! `coordinator.batch_pause`, `coordinator.batch_resume` and
//! `coordinator.batch_status`: hand the typed request to the scheduler,
//! answer with its typed reply.

use serde_json::Value;

use caucus_shared::api::client::decode_reply;
use caucus_shared::api::coordinator::control::{
    BatchPause, BatchResume, BatchStatus, Pause, Resume,
};
use caucus_shared::api::Operation;
use caucus_shared::nats::ApiError;

use super::commands::{ask, Command, SchedulerHandle};
use super::control::ControlOp;

/// Runs `op` on the leader's scheduler and reads its answer as `O`'s reply.
pub async fn call<O: Operation>(
    op: ControlOp,
    scheduler: impl FnOnce() -> Result<SchedulerHandle, ApiError>,
) -> Result<O::Reply, ApiError> {
    let scheduler = scheduler()?;
    let reply: Value = ask(&scheduler, |reply| Command::Control { op, reply }).await??;
    // The scheduler builds the reply; one that does not read as the
    // operation's type is a bug here, not the caller's.
    decode_reply::<O>(reply).map_err(|e| ApiError::internal(e.message))
}

/// Registers `O`, whose request `to_op` turns into a control operation.
fn route<O: Operation>(
    svc: &mut caucus_shared::service::Service,
    slot: &super::SharedScheduler,
    to_op: fn(O::Request) -> ControlOp,
) {
    let health = svc.context().health.clone();
    let slot = slot.clone();
    svc.op::<O, _, _>(move |req| {
        let slot = slot.clone();
        let health = health.clone();
        async move { call::<O>(to_op(req), || super::leader_only(&slot, &health)).await }
    });
}

/// Registers the pause, resume and batch operations (the leader answers).
pub fn routes(svc: &mut caucus_shared::service::Service, slot: super::SharedScheduler) {
    route::<Pause>(svc, &slot, ControlOp::Pause);
    route::<Resume>(svc, &slot, ControlOp::Resume);
    route::<BatchPause>(svc, &slot, ControlOp::BatchPause);
    route::<BatchResume>(svc, &slot, ControlOp::BatchResume);
    route::<BatchStatus>(svc, &slot, ControlOp::BatchStatus);
}
