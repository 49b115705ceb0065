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

/// A gate's level-5 action on a provisional decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum GateAction {
    /// Accept the conservative default as final.
    Confirm {
        /// Who reviewed.
        reviewer: String,
    },
    /// Apply another position; the rationale is required.
    Override {
        /// Who reviewed.
        reviewer: String,
        /// A side whose position applies (or give `position`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        side: Option<Side>,
        /// The position that applies.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        position: Option<Position>,
        /// Why.
        rationale: String,
    },
    /// Close this debate and open a new one with more context.
    Redebate {
        /// Who reviewed.
        reviewer: String,
        /// Context the new debate should consider.
        context: String,
    },
}
