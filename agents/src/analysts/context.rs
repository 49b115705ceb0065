//! What an analyst sees of its task: the company, params and upstream outputs.

use std::collections::BTreeMap;

use caucus_shared::task::TaskDispatch;
use serde_json::{Map, Value};

use super::dataset::{Company, Dataset};
use super::{AnalystError, Finding};

/// Input keys that carry run-time overrides (or, `level_review`, the
/// coordinator's review of the previous level; `findings`, the findings
/// other agents and services addressed to this agent type) rather than a
/// stage's output.
pub const RESERVED_INPUTS: [&str; 4] = [
    "resolved_assumptions",
    "regime",
    "level_review",
    caucus_shared::inbound::INPUT_FINDINGS,
];

/// One analyst's result before the common fields are added.
#[derive(Debug, Default)]
pub(crate) struct Analysis {
    /// Analyst-specific fields of the output object.
    pub body: Map<String, Value>,
    /// Ordered `(label, value)` pairs for reports.
    pub key_figures: Vec<(String, String)>,
    /// Findings to publish.
    pub findings: Vec<Finding>,
    /// Challenge contents to publish on `caucus.debates.<id>.challenge`.
    pub challenges: Vec<Value>,
}

impl Analysis {
    pub fn set(&mut self, key: &str, v: Value) {
        self.body.insert(key.to_string(), v);
    }

    pub fn figure(&mut self, label: &str, value: impl Into<String>) {
        self.key_figures.push((label.to_string(), value.into()));
    }
}

/// Default gap (3 points) between the analysts' margins above which
/// valuation opens a margin debate.
pub const DEFAULT_MARGIN_DEBATE_GAP: f64 = 0.03;

/// Worker-level defaults the analysts read (stage params override them).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Margin gap above which valuation opens a debate (0 disables).
    pub margin_debate_gap: f64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            margin_debate_gap: DEFAULT_MARGIN_DEBATE_GAP,
        }
    }
}

pub(crate) struct Ctx<'a> {
    pub task: &'a TaskDispatch,
    pub settings: &'a Settings,
    pub data: &'a Dataset,
    pub company: &'a Company,
    /// Outputs of every stage upstream (direct inputs and what they carried).
    pub upstream: BTreeMap<String, Value>,
}

impl<'a> Ctx<'a> {
    pub fn new(
        task: &'a TaskDispatch,
        data: &'a Dataset,
        settings: &'a Settings,
    ) -> Result<Ctx<'a>, AnalystError> {
        let company = data.company(&task.item)?;
        if !(task.params.is_null() || task.params.is_object()) {
            return Err(AnalystError::bad_input("params must be a JSON object"));
        }
        Ok(Ctx {
            task,
            settings,
            data,
            company,
            upstream: collect_upstream(task),
        })
    }

    fn param(&self, name: &str) -> Option<&Value> {
        self.task.params.get(name).filter(|v| !v.is_null())
    }

    /// A numeric param, or `default` when absent.
    pub fn param_f64(&self, name: &str, default: f64) -> Result<f64, AnalystError> {
        match self.param(name) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .filter(|x| x.is_finite())
                .ok_or_else(|| AnalystError::bad_input(format!("params.{name} must be a number"))),
        }
    }

    /// A boolean param, or `default` when absent.
    pub fn param_bool(&self, name: &str, default: bool) -> Result<bool, AnalystError> {
        match self.param(name) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| {
                AnalystError::bad_input(format!("params.{name} must be true or false"))
            }),
        }
    }

    /// A param of any shape.
    pub fn param_value(&self, name: &str) -> Option<&Value> {
        self.param(name)
    }

    /// A raw input by key (including the reserved override keys).
    pub fn input(&self, name: &str) -> Option<&Value> {
        self.task.inputs.get(name).filter(|v| !v.is_null())
    }

    /// A number at `pointer` (JSON pointer) inside an upstream stage's output:
    /// `Ok(None)` when the stage or field is absent, an error when present but
    /// not a number (a broken upstream must not silently fall back).
    pub fn stage_f64(&self, stage: &str, pointer: &str) -> Result<Option<f64>, AnalystError> {
        let Some(v) = self.upstream.get(stage).and_then(|o| o.pointer(pointer)) else {
            return Ok(None);
        };
        if v.is_null() {
            return Ok(None);
        }
        v.as_f64()
            .filter(|x| x.is_finite())
            .map(Some)
            .ok_or_else(|| {
                AnalystError::bad_input(format!("input {stage}{pointer} must be a number, got {v}"))
            })
    }

    /// A resolved-assumption override (`inputs` win over `params`).
    pub fn resolved(&self, name: &str) -> Result<Option<f64>, AnalystError> {
        let v = self
            .input("resolved_assumptions")
            .and_then(|o| o.get(name))
            .or_else(|| self.param("resolved_assumptions").and_then(|o| o.get(name)));
        match v {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_f64()
                .filter(|x| x.is_finite())
                .map(Some)
                .ok_or_else(|| {
                    AnalystError::bad_input(format!(
                        "resolved_assumptions.{name} must be a number, got {v}"
                    ))
                }),
        }
    }
}

/// Direct inputs win over outputs they carried from further upstream.
fn collect_upstream(task: &TaskDispatch) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let stages = task
        .inputs
        .iter()
        .filter(|(k, _)| !RESERVED_INPUTS.contains(&k.as_str()));
    for (_, v) in stages.clone() {
        if let Some(nested) = v.get("upstream").and_then(Value::as_object) {
            for (k, nv) in nested {
                out.entry(k.clone()).or_insert_with(|| nv.clone());
            }
        }
    }
    for (k, v) in stages {
        let mut v = v.clone();
        if let Some(obj) = v.as_object_mut() {
            obj.remove("upstream");
        }
        out.insert(k.clone(), v);
    }
    out
}
