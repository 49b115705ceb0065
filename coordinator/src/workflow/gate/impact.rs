//! A stage's `params.impact`: how a debate's resolution reaches its tasks
//! (docs/DEBATES.md §5). Read leniently, like every stage param the
//! pipeline author writes: a field of the wrong type counts as absent.

use serde::Deserialize;
use serde_json::Value;

use caucus_shared::outputs::lenient;

/// The `impact` params of a stage.
#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ImpactParams {
    /// Assumptions (metrics) the stage's tasks use; absent or empty: any.
    #[serde(default, deserialize_with = "lenient")]
    pub inputs: Option<Vec<Value>>,
    /// JSON pointer to the assumption value a task's output says it used.
    #[serde(default, deserialize_with = "lenient")]
    pub used: Option<String>,
    /// JSON pointer to the task's result (for re-run actuals).
    #[serde(default, deserialize_with = "lenient")]
    pub result: Option<String>,
}

impl ImpactParams {
    /// The `impact` of stage params `params`, when declared (as an object).
    pub fn of(params: &Value) -> Option<ImpactParams> {
        params
            .get("impact")
            .filter(|v| v.is_object())
            .map(|v| ImpactParams::deserialize(v).unwrap_or_default())
    }

    /// Whether tasks of the stage use assumption `metric`.
    pub fn uses(&self, metric: &str) -> bool {
        self.inputs
            .as_ref()
            .is_none_or(|a| a.is_empty() || a.iter().any(|x| x == metric))
    }
}
