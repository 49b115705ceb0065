//! `coordinator.plan`: the dry-run schedule.

use caucus_shared::api::coordinator::plan::{PlanOp, PlanReply, PlanRequest};
use caucus_shared::nats::api::ApiError;

use super::api::check_items;
use super::pipelines::resolve;
use crate::planner;

/// Width of the reply's Gantt chart, in columns.
const GANTT_WIDTH: usize = 60;

/// Registers `plan` (any instance answers: it only computes).
pub fn route(svc: &mut caucus_shared::service::Service) {
    svc.op::<PlanOp, _, _>(|req| async move { plan(req) });
}

/// `coordinator.plan`: a dry run, no state touched.
pub fn plan(req: PlanRequest) -> Result<PlanReply, ApiError> {
    check_items(&req.items)?;
    let spec = resolve(&req.pipeline)?;
    let plan = planner::plan(&req.items, &spec, &req.capacities)
        .map_err(|e| ApiError::new("invalid_pipeline", e.to_string()))?;
    let gantt = planner::gantt::render(&plan, GANTT_WIDTH);
    Ok(PlanReply { plan, gantt })
}
