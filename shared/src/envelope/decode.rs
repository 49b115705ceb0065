//! Decoding untrusted bytes: the typed error every consumer (and the DLQ)
//! reports, and the shared checks behind [`super::Envelope::decode`] and
//! [`decode_json`].

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{MessageType, SCHEMA_VERSION};

/// Why a body was rejected. [`DecodeError::code`] is stable and goes into the
/// `Caucus-Dlq-Code` header; the `Display` text goes into `Caucus-Dlq-Error`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DecodeError {
    /// The body exceeds the configured size limit.
    #[error("body is {size} bytes, over the limit of {limit} bytes")]
    Oversize {
        /// Body size in bytes.
        size: usize,
        /// The configured limit (`max_body_bytes`).
        limit: usize,
    },
    /// The body is not valid JSON.
    #[error("malformed JSON at line {line}, column {column}: {reason}")]
    NotJson {
        /// 1-based line of the error (0 when serde cannot tell).
        line: usize,
        /// 1-based column of the error (0 when serde cannot tell).
        column: usize,
        /// What the parser expected.
        reason: String,
    },
    /// The body is JSON but not an object.
    #[error("body must be a JSON object, found {found}")]
    NotObject {
        /// The JSON kind found (`array`, `string`, …).
        found: &'static str,
    },
    /// `message_type` names no known type.
    #[error("unknown message_type `{0}`; {hint}", hint = unknown_type_hint(.0))]
    UnknownMessageType(String),
    /// A required field is absent (dotted path for nested fields).
    #[error("missing required field `{0}`")]
    MissingField(String),
    /// A field is present but has the wrong type or value.
    #[error("invalid field `{field}`: {reason}")]
    InvalidField {
        /// Dotted path of the field.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `schema_version` is not one this build understands (only 1).
    #[error("unsupported schema_version {0}: this build understands schema_version {SCHEMA_VERSION} only")]
    UnsupportedSchemaVersion(u32),
    /// `content` does not fit its `message_type`.
    #[error("invalid content for message_type `{message_type}`: {reason}")]
    InvalidContent {
        /// The envelope's type.
        message_type: MessageType,
        /// What is wrong (field path and reason).
        reason: String,
    },
}

impl DecodeError {
    /// Stable machine code (`oversize`, `malformed_json`, `not_an_object`,
    /// `unknown_message_type`, `missing_field`, `invalid_field`,
    /// `unsupported_schema_version`, `invalid_content`).
    pub fn code(&self) -> &'static str {
        match self {
            DecodeError::Oversize { .. } => "oversize",
            DecodeError::NotJson { .. } => "malformed_json",
            DecodeError::NotObject { .. } => "not_an_object",
            DecodeError::UnknownMessageType(_) => "unknown_message_type",
            DecodeError::MissingField(_) => "missing_field",
            DecodeError::InvalidField { .. } => "invalid_field",
            DecodeError::UnsupportedSchemaVersion(_) => "unsupported_schema_version",
            DecodeError::InvalidContent { .. } => "invalid_content",
        }
    }
}

fn unknown_type_hint(name: &str) -> String {
    if let Some(t) = MessageType::suggest(name) {
        return format!("did you mean `{t}`?");
    }
    let few: Vec<&str> = MessageType::ALL[..6].iter().map(|t| t.as_str()).collect();
    format!(
        "valid types include {}, … ({} in all, see docs/PROTOCOL.md)",
        few.join(", "),
        MessageType::ALL.len()
    )
}

/// Decodes a JSON object body that is not an envelope (e.g.
/// [`crate::task::TaskDispatch`], [`crate::task::TaskEvent`]) with the same
/// checks and errors as [`super::Envelope::decode`]: size, JSON, object,
/// `schema_version` (if present), then the fields of `T`.
pub fn decode_json<T: DeserializeOwned>(bytes: &[u8], max_bytes: usize) -> Result<T, DecodeError> {
    let object = parse_object(bytes, max_bytes)?;
    check_schema_version(&object)?;
    from_value_at(&Value::Object(object)).map_err(FieldError::into_decode_error)
}

/// [`decode_json`] with a fast path for hot-path bodies (task dispatches
/// and events): a body that deserialises straight into `T` only has its
/// version checked (`version` reads it; an absent field defaults to 1);
/// anything else goes through [`decode_json`] for its specific error.
pub fn decode_versioned<T: DeserializeOwned>(
    bytes: &[u8],
    max_bytes: usize,
    version: impl Fn(&T) -> u32,
) -> Result<T, DecodeError> {
    if bytes.len() <= max_bytes {
        if let Ok(t) = serde_json::from_slice::<T>(bytes) {
            return match version(&t) {
                SCHEMA_VERSION => Ok(t),
                v => Err(DecodeError::UnsupportedSchemaVersion(v)),
            };
        }
    }
    decode_json(bytes, max_bytes)
}

/// Size, JSON and object checks shared by every decoder.
pub(crate) fn parse_object(
    bytes: &[u8],
    max_bytes: usize,
) -> Result<Map<String, Value>, DecodeError> {
    if bytes.len() > max_bytes {
        return Err(DecodeError::Oversize {
            size: bytes.len(),
            limit: max_bytes,
        });
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| DecodeError::NotJson {
        line: e.line(),
        column: e.column(),
        reason: strip_position(&e.to_string()),
    })?;
    match value {
        Value::Object(map) => Ok(map),
        other => Err(DecodeError::NotObject {
            found: json_kind(&other),
        }),
    }
}

/// An absent `schema_version` means 1; anything but 1 is refused before the
/// rest is read, because a newer version may change any field.
pub(crate) fn check_schema_version(object: &Map<String, Value>) -> Result<(), DecodeError> {
    match object.get("schema_version") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(v) if v == u64::from(SCHEMA_VERSION) => Ok(()),
            Some(v) => Err(DecodeError::UnsupportedSchemaVersion(
                u32::try_from(v).unwrap_or(u32::MAX),
            )),
            None => Err(DecodeError::InvalidField {
                field: "schema_version".into(),
                reason: format!("expected a positive integer, found {n}"),
            }),
        },
        Some(other) => Err(DecodeError::InvalidField {
            field: "schema_version".into(),
            reason: format!("expected a positive integer, found {}", json_kind(other)),
        }),
    }
}

/// A serde failure with the path of the field it happened at.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldError {
    /// Dotted path (`content.confidence`); empty at the root.
    pub field: String,
    /// True when the field is missing rather than wrong.
    pub missing: bool,
    /// serde's explanation.
    pub reason: String,
}

impl FieldError {
    /// Maps to `MissingField` / `InvalidField`.
    pub fn into_decode_error(self) -> DecodeError {
        if self.missing {
            DecodeError::MissingField(self.field)
        } else {
            DecodeError::InvalidField {
                field: self.field,
                reason: self.reason,
            }
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.missing, self.field.is_empty()) {
            (true, _) => write!(f, "missing required field `{}`", self.field),
            (false, true) => f.write_str(&self.reason),
            (false, false) => write!(f, "field `{}`: {}", self.field, self.reason),
        }
    }
}

/// Deserialises `T` from a JSON value, keeping the failing field's path.
pub(crate) fn from_value_at<T: DeserializeOwned>(value: &Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        let reason = strip_position(&e.inner().to_string());
        // serde reports a missing field on its parent; name the field itself.
        if let Some(name) = reason
            .strip_prefix("missing field `")
            .and_then(|r| r.strip_suffix('`'))
        {
            let field = if path.is_empty() {
                name.to_string()
            } else {
                format!("{path}.{name}")
            };
            return FieldError {
                field,
                missing: true,
                reason,
            };
        }
        FieldError {
            field: path,
            missing: false,
            reason,
        }
    })
}

/// The JSON kind of a value, for messages.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// serde_json appends " at line L column C"; the error carries those apart.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// Dead letters of envelopes carry [`DecodeError::code`] as their reason code.
impl crate::nats::dlq::DlqReason for DecodeError {
    fn code(&self) -> &str {
        DecodeError::code(self)
    }
}
