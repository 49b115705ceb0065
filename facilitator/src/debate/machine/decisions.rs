//! What people send the machine: a level-3 decision, a level-5 gate action.

use caucus_shared::messages::Position;
use serde::{Deserialize, Serialize};

use crate::side::Side;

/// A person's level-3 decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HumanDecision {
    /// Who decided.
    pub expert: String,
    /// The side whose position wins (or give `position`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side: Option<Side>,
    /// A position of the expert's own (wins over `side`'s position).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<Position>,
    /// Why.
    #[serde(default)]
    pub rationale: String,
    /// The expert cannot take the debate: apply the conservative default.
    #[serde(default)]
    pub unavailable: bool,
}

pub use caucus_shared::api::facilitator::GateAction;
