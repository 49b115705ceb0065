//! API operations `coordinator.pause`, `coordinator.resume`,
//! `coordinator.batch_pause`, `coordinator.batch_resume` and
//! `coordinator.batch_status`: hand the typed request to the scheduler,
//! answer with its typed reply.

use caucus_shared::api::coordinator::control::{
    BatchPause, BatchResume, BatchStatus, Pause, Resume,
};

use super::control::{ControlOp, ControlReply};
use super::control_call::call;
use super::route::{batches, by_item};

/// Registers the pause, resume and batch operations (the leader answers).
/// With several partitions a pause or resume by item runs on the owner of
/// the item's latest workflow (`route::by_item`), and a batch is split
/// into one part per partition and merged back (`route::batches`).
pub fn routes(svc: &mut caucus_shared::service::Service, router: &super::route::Router) {
    by_item::register(router);
    batches::register(router);
    super::route::by_workflow_or::<Pause, _, _, _, _>(
        svc,
        router,
        |r| r.workflow_id.as_deref(),
        |h, req| async move {
            call::<Pause>(ControlOp::Pause(req), ControlReply::into_pause, || Ok(h)).await
        },
        |router, req| async move { by_item::pause(&router, req).await },
    );
    super::route::by_workflow_or::<Resume, _, _, _, _>(
        svc,
        router,
        |r| r.workflow_id.as_deref(),
        |h, req| async move {
            call::<Resume>(ControlOp::Resume(req), ControlReply::into_resume, || Ok(h)).await
        },
        |router, req| async move { by_item::resume(&router, req).await },
    );
    // A batch names no one workflow: with several partitions every
    // request goes `across`.
    super::route::by_workflow_or::<BatchPause, _, _, _, _>(
        svc,
        router,
        |_| None,
        |h, req| async move {
            call::<BatchPause>(ControlOp::BatchPause(req), ControlReply::into_batch, || {
                Ok(h)
            })
            .await
        },
        |router, req| async move { batches::pause(&router, req).await },
    );
    super::route::by_workflow_or::<BatchResume, _, _, _, _>(
        svc,
        router,
        |_| None,
        |h, req| async move {
            call::<BatchResume>(
                ControlOp::BatchResume(req),
                ControlReply::into_batch,
                || Ok(h),
            )
            .await
        },
        |router, req| async move { batches::resume(&router, req).await },
    );
    super::route::by_workflow_or::<BatchStatus, _, _, _, _>(
        svc,
        router,
        |_| None,
        |h, req| async move {
            call::<BatchStatus>(
                ControlOp::BatchStatus(req),
                ControlReply::into_batch,
                || Ok(h),
            )
            .await
        },
        |router, req| async move { batches::status(&router, req).await },
    );
}
