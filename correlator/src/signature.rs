//! Error signatures: `hash(agent_type, error_type, data_source, normalised message)`.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::normalize::{normalize, SemanticPattern};

/// The identity of a kind of failure; equal signatures are the same failure.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Signature {
    /// Hex of the first 16 bytes of SHA-256 over
    /// `agent_type|error_type|data_source|normalised` (32 hex characters).
    pub hash: String,
    /// Agent type, trimmed and lowercased.
    pub agent_type: String,
    /// Error type, trimmed and lowercased.
    pub error_type: String,
    /// Data source, trimmed and lowercased (empty when none).
    pub data_source: String,
    /// The message with ids, timestamps and numbers stripped.
    pub normalized_message: String,
    /// The recognised cause, if any; when present it replaces the text in the hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<SemanticPattern>,
}

impl Signature {
    /// The message part that went into the hash: the pattern name, else the text.
    pub fn hashed_message(&self) -> &str {
        match self.pattern {
            Some(p) => p.as_str(),
            None => &self.normalized_message,
        }
    }
}

impl std::fmt::Display for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.hash)
    }
}

/// The signature of a failure whose failing item is unknown.
pub fn signature(
    agent_type: &str,
    error_type: &str,
    data_source: &str,
    message: &str,
) -> Signature {
    signature_for_item(agent_type, error_type, data_source, message, None)
}

/// The signature of a failure of `item`: the item's own ticker inside the
/// message is masked so that the same failure of different items collides.
pub fn signature_for_item(
    agent_type: &str,
    error_type: &str,
    data_source: &str,
    message: &str,
    item: Option<&str>,
) -> Signature {
    let normalized = normalize(message, item);
    let agent_type = canonical(agent_type);
    let error_type = canonical(error_type);
    let data_source = canonical(data_source);
    let mut hasher = Sha256::new();
    for (i, part) in [
        agent_type.as_str(),
        error_type.as_str(),
        data_source.as_str(),
        normalized.signature_text(),
    ]
    .into_iter()
    .enumerate()
    {
        if i > 0 {
            hasher.update(b"|");
        }
        hasher.update(part.as_bytes());
    }
    let digest = hasher.finalize();
    Signature {
        hash: hex::encode(&digest[..16]),
        agent_type,
        error_type,
        data_source,
        normalized_message: normalized.text,
        pattern: normalized.pattern,
    }
}

fn canonical(field: &str) -> String {
    field.trim().to_lowercase()
}
