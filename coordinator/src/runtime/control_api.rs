//! API operations `coordinator.pause`, `coordinator.resume`,
//! `coordinator.batch_pause`, `coordinator.batch_resume` and
//! `coordinator.batch_status`: parse, hand to the scheduler, answer.

use serde::de::DeserializeOwned;
use serde_json::Value;

use caucus_shared::nats::ApiError;

use super::commands::{ask, Command, SchedulerHandle};
use super::control::{BatchStatusArgs, ControlOp};

/// The operations this module answers.
pub const OPERATIONS: [&str; 5] = [
    "pause",
    "resume",
    "batch_pause",
    "batch_resume",
    "batch_status",
];

fn parse<T: DeserializeOwned>(op: &str, v: Value) -> Result<T, ApiError> {
    let v = if v.is_null() {
        Value::Object(Default::default())
    } else {
        v
    };
    serde_json::from_value(v).map_err(|e| ApiError::bad_request(format!("{op}: {e}")))
}

/// Parses `body` for `op`.
pub fn op_of(op: &str, body: Value) -> Result<ControlOp, ApiError> {
    Ok(match op {
        "pause" => ControlOp::Pause(parse(op, body)?),
        "resume" => ControlOp::Resume(parse(op, body)?),
        "batch_pause" => ControlOp::BatchPause(parse(op, body)?),
        "batch_resume" => ControlOp::BatchResume(parse(op, body)?),
        "batch_status" => ControlOp::BatchStatus(parse::<BatchStatusArgs>(op, body)?),
        other => {
            return Err(ApiError::new(
                "unknown_operation",
                format!("no control operation `{other}`"),
            ))
        }
    })
}

/// Runs `op` on the leader's scheduler.
pub async fn call(
    op: &str,
    body: Value,
    scheduler: impl FnOnce() -> Result<SchedulerHandle, ApiError>,
) -> Result<Value, ApiError> {
    let op = op_of(op, body)?;
    let scheduler = scheduler()?;
    ask(&scheduler, |reply| Command::Control { op, reply }).await?
}

/// Registers the pause, resume and batch operations (the leader answers).
pub fn routes(svc: &mut caucus_shared::service::Service, slot: super::SharedScheduler) {
    let health = svc.context().health.clone();
    for op in OPERATIONS {
        let slot = slot.clone();
        let health = health.clone();
        svc.route(op, move |body| {
            let slot = slot.clone();
            let health = health.clone();
            async move { call(op, body, || super::leader_only(&slot, &health)).await }
        });
    }
}
