//! The control API's error reply and its common codes.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// The request body was not JSON or not what the operation expects.
pub const CODE_BAD_REQUEST: &str = "bad_request";
/// The service has no such operation.
pub const CODE_UNKNOWN_OPERATION: &str = "unknown_operation";
/// Something the handler did not expect went wrong.
pub const CODE_INTERNAL: &str = "internal";
/// A named thing does not exist.
pub const CODE_NOT_FOUND: &str = "not_found";
/// No instance of the service is running.
pub const CODE_NO_RESPONDERS: &str = "no_responders";
/// The service did not answer in time.
pub const CODE_TIMEOUT: &str = "timeout";
/// The reply was not JSON.
pub const CODE_BAD_REPLY: &str = "bad_reply";
/// The reply would be larger than the server's `max_payload`: the
/// request must ask for less.
pub const CODE_REPLY_TOO_LARGE: &str = "reply_too_large";

/// An error reply: `{"error": {"code", "message"}}` on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ApiError {
    /// Machine-readable code such as `bad_request`.
    pub code: String,
    /// What went wrong, specifically.
    pub message: String,
}

impl ApiError {
    /// An error with any code.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError {
            code: code.into(),
            message: message.into(),
        }
    }

    /// [`CODE_BAD_REQUEST`].
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(CODE_BAD_REQUEST, message)
    }

    /// [`CODE_NOT_FOUND`].
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(CODE_NOT_FOUND, message)
    }

    /// [`CODE_INTERNAL`].
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(CODE_INTERNAL, message)
    }

    /// The wire form.
    pub fn to_reply(&self) -> Value {
        json!({ "error": { "code": self.code, "message": self.message } })
    }

    /// Reads an error reply; `None` when `reply` is not one.
    pub fn from_reply(reply: &Value) -> Option<ApiError> {
        let e = reply.as_object()?.get("error")?;
        Some(ApiError {
            code: e.get("code")?.as_str()?.to_string(),
            message: e
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        })
    }
}

impl From<serde_json::Error> for ApiError {
    fn from(e: serde_json::Error) -> Self {
        ApiError::bad_request(e.to_string())
    }
}
