//! What the discovery gate counts per stream: the domains of a stream's
//! sources, or why the stream has none.

use serde_json::Value;

use caucus_shared::outputs;
use caucus_shared::outputs::research::DiscoveryOutput;

/// What one discovery stream produced.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamResult {
    /// Stream number (1-based).
    pub stream: u32,
    /// The domains of its sources, or why it failed.
    pub outcome: Result<Vec<String>, StreamFailed>,
}

/// Why a discovery stream has no sources to count.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct StreamFailed(
    /// The failed task's error type (`discovery_failed`, `phase_timeout`…),
    /// or why its output could not be read.
    pub String,
);

impl From<&str> for StreamFailed {
    fn from(why: &str) -> Self {
        StreamFailed(why.to_string())
    }
}

/// Why a stream does not count as successful.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamShortfall {
    /// Its task failed.
    #[error("failed: {0}")]
    Failed(StreamFailed),
    /// It found fewer sources than the gate asks per stream.
    #[error("{found} sources < {min}")]
    TooFewSources {
        /// Sources found.
        found: usize,
        /// Sources required.
        min: u32,
    },
}

/// The domains of a discovery output's sources (`unknown` for a source
/// without one), or why the output cannot be read.
pub fn stream_domains(output: &Value) -> Result<Vec<String>, StreamFailed> {
    outputs::decode::<DiscoveryOutput>(output)
        .map(|o| o.domains())
        .map_err(|e| StreamFailed(format!("output: {e}")))
}
