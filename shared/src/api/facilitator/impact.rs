//! What a gate override does downstream: the analyses it may touch, the
//! estimated impact on each and the re-run plan.

use serde::{Deserialize, Serialize};

/// Kind of downstream analysis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnalysisKind {
    /// A valuation model (DCF): result is a price.
    Valuation,
    /// A sensitivity analysis around the valuation's base case.
    Sensitivity,
    /// Risk assessment scoring.
    RiskAssessment,
    /// Anything else that only uses the assumption as context.
    Other,
}

/// A downstream analysis that may have used the provisional assumption.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// Its id, e.g. `dcf_valuation`.
    pub analysis_id: String,
    /// Its kind.
    pub kind: AnalysisKind,
    /// What it produces: `target_price`, `confidence_score`, `rating`, `risk_score`.
    pub output_metric: String,
    /// Its current result, when numeric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_result: Option<f64>,
    /// Minutes a re-run takes.
    #[serde(default)]
    pub rerun_minutes: f64,
    /// Assumptions it uses directly (empty with no `depends_on`: it uses the
    /// changed assumption).
    #[serde(default)]
    pub inputs: Vec<String>,
    /// Analyses whose output it uses.
    #[serde(default)]
    pub depends_on: Vec<String>,
}

/// The overridden assumption.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssumptionChange {
    /// The metric, e.g. `operating_margin`.
    pub metric: String,
    /// The provisional value.
    pub old_value: f64,
    /// The value the human chose.
    pub new_value: f64,
}

impl AssumptionChange {
    /// `(new − old) / |old|` (the absolute change when old is 0).
    pub fn relative(&self) -> f64 {
        let d = self.new_value - self.old_value;
        if self.old_value.abs() > f64::EPSILON {
            d / self.old_value.abs()
        } else {
            d
        }
    }
}

/// Estimated impact on one analysis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Impact {
    /// The analysis.
    pub analysis_id: String,
    /// Its kind.
    pub kind: AnalysisKind,
    /// Its output metric.
    pub output_metric: String,
    /// Current result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub old_value: Option<f64>,
    /// Estimated result after the override, rounded to 2 decimals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimated_new_value: Option<f64>,
    /// How `estimated_new_value` was made ([`LINEAR_SENSITIVITY`]); none
    /// without an estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_method: Option<String>,
    /// Size of the change (a fraction for prices, points for scores).
    pub delta: f64,
    /// True when the change crosses the re-run threshold.
    pub requires_rerun: bool,
    /// Confidence in the linear estimate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimate_confidence: Option<f64>,
    /// Minutes a re-run takes.
    pub rerun_minutes: f64,
    /// What to do, in words.
    pub action: String,
}

/// All impacts of one override.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImpactReport {
    /// The change.
    pub changed_assumption: AssumptionChange,
    /// Analyses affected.
    pub affected_count: usize,
    /// One per affected analysis.
    pub impacts: Vec<Impact>,
    /// Minutes to re-run everything that must be re-run.
    pub total_rerun_minutes: f64,
    /// Analyses that must be re-run.
    pub high_impact_count: usize,
}

/// Serial or parallel re-runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// One after another.
    Serial,
    /// Side by side on several workers.
    Parallel,
}

/// The re-run plan (seed: `RerunScheduler.plan_reruns`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerunPlan {
    /// Re-runs needed, largest impact first.
    pub required_reruns: Vec<Impact>,
    /// Analyses that only need their figures updated.
    pub optional_updates: Vec<Impact>,
    /// How the re-runs execute.
    pub execution_strategy: Strategy,
    /// Minutes of re-run work.
    pub estimated_minutes: f64,
    /// True when anything must be re-run before the results stand.
    pub blocking: bool,
}
