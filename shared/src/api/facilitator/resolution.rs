//! Resolution records: what every resolved debate documents (seed 001,
//! "Documentation Requirements"): final position, evidence considered,
//! level and method, confidence, impact on the analysis, override-window
//! status; for provisional resolutions also the conservative rationale,
//! alternatives, review deadline and downstream dependencies.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::impact::{ImpactReport, RerunPlan};
use super::scores::L2Assessment;
use super::side::Side;
use crate::messages::{DebateResolution, Position, ResolutionMethod};

/// Whether a person can still override the resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverrideStatus {
    /// Binding from the start (levels 1–3).
    NotApplicable,
    /// Provisional: open until the next gate.
    Open,
    /// Closed by a gate review.
    Closed,
}

/// The override window of a resolution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverrideWindow {
    /// Its status.
    pub status: OverrideStatus,
    /// When it closes (the next gate, or the fallback window) while open;
    /// when it closed once closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closes_at: Option<DateTime<Utc>>,
}

/// What a provisional resolution additionally records (seed: "Provisional
/// Decision Tracking").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProvisionalDetails {
    /// Why the conservative position was chosen.
    pub conservative_rationale: String,
    /// The branch of the decision rule, e.g. `lowest:operating_margin`.
    pub rule: String,
    /// Positions considered but not applied.
    pub alternatives: Vec<Position>,
    /// Review deadline: the next gate (or the fallback window).
    pub review_deadline: DateTime<Utc>,
    /// Analyses that will use the provisional assumption.
    pub downstream_dependencies: Vec<String>,
    /// Why the debate ended up provisional (`human_timeout`, `expert_queue_full`, …).
    pub trigger: String,
}

/// The documented outcome of a debate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolutionRecord {
    /// The debate.
    pub debate_id: String,
    /// Level at which it was resolved, 1..=5.
    pub level: u8,
    /// How.
    pub method: ResolutionMethod,
    /// Human-readable label, e.g. `facilitator-resolved`,
    /// `provisional - conservative default`.
    pub label: String,
    /// True when it cannot be overridden any more (levels 1–3 and 5).
    pub binding: bool,
    /// True until a gate confirms or overrides it.
    pub provisional: bool,
    /// The agreed or applied position (none for a re-debate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_position: Option<Position>,
    /// Whose position it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winning_side: Option<Side>,
    /// The agent whose position it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub winner: Option<String>,
    /// Every piece of evidence put forward in the debate.
    pub evidence_considered: Vec<String>,
    /// Why this resolution, in words.
    pub rationale: String,
    /// Confidence in the resolution, 0..=1.
    pub confidence: f64,
    /// Impact on the analysis.
    pub impact: String,
    /// Override window.
    pub override_window: OverrideWindow,
    /// Provisional resolutions only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisional_details: Option<ProvisionalDetails>,
    /// Level 2 reasoning: scores with intervals, regime, trend, override
    /// rates, context match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credibility: Option<L2Assessment>,
    /// Downstream impact of a gate override (level 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impact_report: Option<OverrideImpact>,
    /// The person who decided (levels 3 and 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// The snapshot the debate argued from.
    pub snapshot_id: String,
    /// When.
    pub resolved_at: DateTime<Utc>,
}

impl ResolutionRecord {
    /// The wire message published on `caucus.debates.<id>.resolution`; the
    /// whole record travels in `details`.
    pub fn to_wire(&self) -> DebateResolution {
        DebateResolution {
            debate_id: self.debate_id.clone(),
            level: self.level,
            method: self.method,
            position: self.final_position.clone(),
            winner: self.winner.clone(),
            provisional: self.provisional,
            rationale: Some(self.rationale.clone()),
            evidence_considered: self.evidence_considered.clone(),
            alternatives: self
                .provisional_details
                .as_ref()
                .map(|p| p.alternatives.clone())
                .unwrap_or_default(),
            confidence: Some(self.confidence.clamp(0.0, 1.0)),
            details: serde_json::to_value(self).ok(),
            snapshot_id: Some(self.snapshot_id.clone()),
        }
    }
}

/// The impact of an override, stored with the final resolution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OverrideImpact {
    /// Per-analysis estimates.
    pub report: ImpactReport,
    /// Re-runs to do.
    pub plan: RerunPlan,
}

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
