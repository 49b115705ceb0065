//! Reading request and reply bodies as an operation's types, naming the
//! field that does not read.

use serde_json::Value;

use super::error::{ApiError, CODE_BAD_REPLY};
use super::Operation;

/// Reads `reply` as `O::Reply`; a mismatch is `bad_reply` naming the path.
pub fn decode_reply<O: Operation>(reply: Value) -> Result<O::Reply, ApiError> {
    serde_path_to_error::deserialize(reply).map_err(|e| {
        ApiError::new(
            CODE_BAD_REPLY,
            format!(
                "the {}.{} reply does not read: {} at `{}`",
                O::SERVICE,
                O::NAME,
                e.inner(),
                e.path()
            ),
        )
    })
}

/// Reads `body` as `O::Request` (an empty body as `{}`); a mismatch is
/// `bad_request` naming the field.
pub fn decode_request<O: Operation>(body: Value) -> Result<O::Request, ApiError> {
    let body = match body {
        Value::Null => Value::Object(Default::default()),
        b => b,
    };
    serde_path_to_error::deserialize(body).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            ApiError::bad_request(e.inner().to_string())
        } else {
            ApiError::bad_request(format!("{path}: {}", e.inner()))
        }
    })
}
