//! One control operation handed to a scheduler and its typed reply picked
//! out of the answer: shared by the API operations (`control_api`) and the
//! partition routes that forward batch parts (`route::batches`).

use caucus_shared::api::Operation;
use caucus_shared::nats::ApiError;

use super::commands::{ask, Command, SchedulerHandle};
use super::control::{ControlOp, ControlReply};

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
