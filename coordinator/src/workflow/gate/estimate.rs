//! An impact report's estimates of re-run results, and the actual results.

use serde::{Deserialize, Serialize};

use super::super::{TaskRunState, WorkflowRecord};
use super::impact::ImpactParams;

/// An impact report's estimate of what a re-run task will produce, and
/// what it did produce: `gate show` and the workflow record show how far
/// off the estimate was.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RerunEstimate {
    /// The task key (the impact report's `analysis_id`).
    pub task: String,
    /// What it produces, e.g. `target_price`.
    pub output_metric: String,
    /// Its result before the re-run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<f64>,
    /// The estimated result.
    pub estimate: f64,
    /// How it was estimated, e.g. `linear sensitivity`.
    pub estimate_method: String,
    /// The re-run's result (its stage's `params.impact.result`), rounded
    /// to 2 decimals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual: Option<f64>,
    /// `actual − estimate`, rounded to 2 decimals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<f64>,
}

/// `v` rounded to 2 decimals.
fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

impl WorkflowRecord {
    /// Fills in the actual result of each estimate of the running (last)
    /// re-run whose task completed again: its output at its stage's
    /// `params.impact.result` pointer.
    pub(super) fn record_actuals(&mut self) {
        let Some(r) = self.reruns.last() else {
            return;
        };
        let actuals: Vec<(usize, f64)> = r
            .estimates
            .iter()
            .enumerate()
            .filter(|(_, e)| e.actual.is_none())
            .filter_map(|(i, e)| {
                let t = self.tasks.get(&e.task)?;
                if t.state != TaskRunState::Completed {
                    return None;
                }
                let stage = self.stages.iter().find(|s| s.name == t.stage)?;
                let pointer = ImpactParams::of(&stage.params)?.result?;
                let v = t.output.as_ref()?.pointer(&pointer)?;
                caucus_shared::messages::assumption_value(v).map(|v| (i, v))
            })
            .collect();
        if actuals.is_empty() {
            return;
        }
        let r = self.reruns.last_mut().expect("checked above");
        for (i, v) in actuals {
            let e = &mut r.estimates[i];
            e.actual = Some(round2(v));
            e.error = Some(round2(v - e.estimate));
        }
    }
}
