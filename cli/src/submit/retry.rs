//! One `submit` request, sent again while the failure is one a retry
//! with the same idempotency key can mend.

use std::time::Duration;

use backon::Retryable;

use caucus_shared::api::coordinator::submit::{Submit, SubmitReply, SubmitRequest};
use caucus_shared::api::{CODE_NO_RESPONDERS, CODE_TIMEOUT};
use caucus_shared::nats::ApiError;

use crate::Client;

/// Longest wait for one `submit` answer (100,000 items take seconds).
const SUBMIT_TIMEOUT: Duration = Duration::from_secs(120);
/// Attempts of one submit that times out or meets a coordinator stepping
/// down; safe because every attempt carries the same idempotency key.
const SUBMIT_ATTEMPTS: u64 = 5;
/// The pause before retry `n` is `n` times this.
const SUBMIT_BACKOFF_STEP: Duration = Duration::from_millis(500);

/// Codes after which the same request may succeed: the coordinator did
/// not answer, stepped down, or stored part of the submission.
fn worth_retrying(e: &ApiError) -> bool {
    [
        CODE_TIMEOUT,
        "unavailable",
        "store_failed",
        CODE_NO_RESPONDERS,
    ]
    .contains(&e.code.as_str())
}

/// Sends `request` to `coordinator.submit`, again with the same body (and
/// so the same idempotency key) after a time-out or a coordinator that
/// stepped down or failed to store part of it.
pub(super) async fn submit_retrying(
    client: &Client,
    request: &SubmitRequest,
) -> anyhow::Result<SubmitReply> {
    let api = client.api().waiting(SUBMIT_TIMEOUT);
    // Linear: 0.5 s, 1 s, 1.5 s, 2 s between the attempts.
    let pauses = (1..SUBMIT_ATTEMPTS).map(|n| SUBMIT_BACKOFF_STEP * n as u32);
    let mut retry = 0;
    let send = || api.call::<Submit>(request);
    send.retry(pauses)
        .when(worth_retrying)
        .notify(|e: &ApiError, _| {
            retry += 1;
            eprintln!(
                "submit: {} ({}); retrying with the same idempotency key ({retry}/{})",
                e.message,
                e.code,
                SUBMIT_ATTEMPTS - 1
            );
        })
        .await
        .map_err(|e| anyhow::anyhow!("coordinator.submit: {} ({})", e.message, e.code))
}
