//! `http:URL`: POST the task JSON; a 2xx body is the result. Time-outs,
//! connection errors, 429 and 5xx are transient; other statuses permanent.

use caucus_shared::task::{TaskDispatch, TaskError};

use super::{error_from_body, permanent, split_findings, transient, HandlerOutput};

pub(super) async fn run(
    client: &reqwest::Client,
    url: &str,
    task: &TaskDispatch,
) -> Result<HandlerOutput, TaskError> {
    let body = serde_json::to_vec(task).map_err(|e| permanent("encode", e.to_string()))?;
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| {
            let kind = if e.is_timeout() {
                "timeout"
            } else {
                "connection_error"
            };
            transient(kind, format!("POST {url}: {e}"))
        })?;
    let status = resp.status();
    let bytes = resp.bytes().await.map_err(|e| {
        transient(
            "connection_error",
            format!("reading the reply of {url}: {e}"),
        )
    })?;
    if status.is_success() {
        let v: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
            permanent(
                "bad_output",
                format!("{url} answered {status} with a body that is not JSON: {e}"),
            )
        })?;
        return Ok(split_findings(v));
    }
    if let Some(e) = error_from_body(&bytes) {
        return Err(e);
    }
    let text = String::from_utf8_lossy(&bytes);
    let msg = format!(
        "{url} answered {status}: {}",
        text.chars().take(500).collect::<String>()
    );
    Err(if status.as_u16() == 429 || status.is_server_error() {
        transient("http_status", msg)
    } else {
        permanent("http_status", msg)
    })
}
