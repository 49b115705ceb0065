//! `coordinator.plan`: the dry-run schedule.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use caucus_shared::nats::api::ApiError;

use super::api::{check_items, parse};
use super::pipelines::resolve;
use crate::planner;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanRequest {
    items: Vec<String>,
    #[serde(default)]
    pipeline: Value,
    #[serde(default)]
    capacities: BTreeMap<String, u32>,
}

/// Registers `plan` (any instance answers: it only computes).
pub fn route(svc: &mut caucus_shared::service::Service) {
    svc.route("plan", |body| async move { plan(body) });
}

/// `coordinator.plan`: a dry run, no state touched.
pub fn plan(body: Value) -> Result<Value, ApiError> {
    let req: PlanRequest = parse(body)?;
    check_items(&req.items)?;
    let spec = resolve(&req.pipeline)?;
    let plan = planner::plan(&req.items, &spec, &req.capacities)
        .map_err(|e| ApiError::new("invalid_pipeline", e.to_string()))?;
    let mut v = serde_json::to_value(&plan).map_err(|e| ApiError::internal(e.to_string()))?;
    if let Value::Object(m) = &mut v {
        m.insert(
            "gantt".into(),
            Value::String(planner::gantt::render(&plan, 60)),
        );
        m.insert("pipeline".into(), Value::String(spec.name.clone()));
    }
    Ok(v)
}
