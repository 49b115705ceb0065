//! API operations `coordinator.pause`, `coordinator.resume`,
//! `coordinator.batch_pause`, `coordinator.batch_resume` and
//! `coordinator.batch_status`: hand the typed request to the scheduler,
//! answer with its typed reply.

use caucus_shared::api::coordinator::control::{
    BatchPause, BatchResume, BatchStatus, BatchStatusReply, Pause, PauseReply, Resume, ResumeReply,
};
use caucus_shared::api::Operation;
use caucus_shared::nats::ApiError;

use super::commands::{ask, Command, SchedulerHandle};
use super::control::{ControlOp, ControlReply};
use super::route::by_item;

/// Runs `op` on the leader's scheduler; `reply_of` picks `O`'s reply out
/// of the scheduler's answer.
pub async fn call<O: Operation>(
    op: ControlOp,
    reply_of: fn(ControlReply) -> Option<O::Reply>,
    scheduler: impl FnOnce() -> Result<SchedulerHandle, ApiError>,
) -> Result<O::Reply, ApiError> {
    let scheduler = scheduler()?;
    let reply = ask(&scheduler, |reply| Command::Control { op, reply }).await??;
    // Each operation has one kind of answer; another is a bug here.
    reply_of(reply).ok_or_else(|| {
        ApiError::internal(format!(
            "the scheduler answered {} with another reply",
            O::NAME
        ))
    })
}

/// Registers `O`, whose request `to_op` turns into a control operation,
/// answered by the scheduler that owns the workflow `key` names (the
/// leader's with one partition).
fn route<O: Operation>(
    svc: &mut caucus_shared::service::Service,
    router: &super::route::Router,
    key: fn(&O::Request) -> Option<&str>,
    to_op: fn(O::Request) -> ControlOp,
    reply_of: fn(ControlReply) -> Option<O::Reply>,
) {
    super::route::by_workflow::<O, _, _>(svc, router, key, move |h, req| async move {
        call::<O>(to_op(req), reply_of, || Ok(h)).await
    });
}

fn pause_reply(r: ControlReply) -> Option<PauseReply> {
    match r {
        ControlReply::Pause(p) => Some(p),
        _ => None,
    }
}

fn resume_reply(r: ControlReply) -> Option<ResumeReply> {
    match r {
        ControlReply::Resume(p) => Some(p),
        _ => None,
    }
}

fn batch_reply(r: ControlReply) -> Option<BatchStatusReply> {
    match r {
        ControlReply::Batch(b) => Some(b),
        _ => None,
    }
}

/// Registers the pause, resume and batch operations (the leader answers).
/// With several partitions a pause or resume by item runs on the owner of
/// the item's latest workflow (`route::by_item`); a batch spans them, and
/// batches are not served there yet (docs/PARTITIONS.md).
pub fn routes(svc: &mut caucus_shared::service::Service, router: &super::route::Router) {
    by_item::register(router);
    super::route::by_workflow_or::<Pause, _, _, _, _>(
        svc,
        router,
        |r| r.workflow_id.as_deref(),
        |h, req| async move { call::<Pause>(ControlOp::Pause(req), pause_reply, || Ok(h)).await },
        |router, req| async move { by_item::pause(&router, req).await },
    );
    super::route::by_workflow_or::<Resume, _, _, _, _>(
        svc,
        router,
        |r| r.workflow_id.as_deref(),
        |h, req| async move { call::<Resume>(ControlOp::Resume(req), resume_reply, || Ok(h)).await },
        |router, req| async move { by_item::resume(&router, req).await },
    );
    route::<BatchPause>(svc, router, |_| None, ControlOp::BatchPause, batch_reply);
    route::<BatchResume>(svc, router, |_| None, ControlOp::BatchResume, batch_reply);
    route::<BatchStatus>(svc, router, |_| None, ControlOp::BatchStatus, batch_reply);
}
