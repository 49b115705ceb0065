//! `alert`: urgent attention, including the macro analyst's broadcasts.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::validate::opt_unit_interval;
use super::{MessageContent, ValidationError};
use crate::envelope::MessageType;

/// Free-form alert content. The named fields are those of the seed's macro
/// broadcast; anything else is kept in `extra` and written back unchanged.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Alert {
    /// Kind of event, e.g. `regime_change`, `fed_announcement`, `threshold_breach`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// Regime before a regime change, e.g. `BULL_LOW_RATES`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_regime: Option<String>,
    /// Regime after a regime change, e.g. `BEAR_HIGH_RATES`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_regime: Option<String>,
    /// Confidence in the event, 0..=1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// What changes for the agents (any JSON, e.g. sector score deltas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implications: Option<Value>,
    /// What agents should do about it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recommended_actions: Vec<String>,
    /// Every other field, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl MessageContent for Alert {
    const MESSAGE_TYPE: MessageType = MessageType::Alert;

    fn validate(&self) -> Result<(), ValidationError> {
        opt_unit_interval("confidence", self.confidence)
    }
}
