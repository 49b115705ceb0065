//! Market-regime adjustments (from a macro broadcast) applied per sector.
//!
//! A regime arrives as `inputs.regime` (set at run time, wins) or
//! `params.regime` (from the pipeline spec). Accepted shapes:
//!
//! - a number: a flat discount-rate adjustment for every sector (`0.01` = +1 pt);
//! - an object with any of `name` / `new_regime`, `discount_rate_adjustment`
//!   (flat), `discount_rate_changes` (`{sector: delta}`) and
//!   `sector_favorability_changes` (`{sector: score points}`), either at the
//!   top level or under `implications` (the macro broadcast's `content` as-is).

use std::collections::BTreeMap;

use caucus_shared::task::TaskDispatch;
use serde_json::{json, Value};

use super::AnalystError;

/// Parsed regime adjustments; the default changes nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Regime {
    /// Regime label, e.g. `BEAR_HIGH_RATES`.
    pub name: Option<String>,
    /// Added to every sector's discount rate.
    pub flat_adjustment: f64,
    /// Added to the named sector's discount rate (lower-cased sector keys).
    pub discount_rate_changes: BTreeMap<String, f64>,
    /// Added to the named sector's screening score (lower-cased sector keys).
    pub sector_favorability_changes: BTreeMap<String, f64>,
}

impl Regime {
    /// Reads the regime from a task's inputs or params (inputs win).
    pub fn from_task(
        inputs_regime: Option<&Value>,
        params_regime: Option<&Value>,
    ) -> Result<Regime, AnalystError> {
        match inputs_regime.or(params_regime) {
            None | Some(Value::Null) => Ok(Regime::default()),
            Some(v) => Regime::parse(v),
        }
    }

    /// Parses one regime value (see the module docs for the shapes).
    pub fn parse(v: &Value) -> Result<Regime, AnalystError> {
        if let Some(x) = v.as_f64() {
            return Ok(Regime {
                flat_adjustment: x,
                ..Regime::default()
            });
        }
        let Some(obj) = v.as_object() else {
            return Err(AnalystError::bad_input(
                "regime must be a number or an object",
            ));
        };
        let scope = obj.get("implications").unwrap_or(v);
        let name = ["new_regime", "name"]
            .iter()
            .find_map(|k| obj.get(*k).and_then(Value::as_str))
            .map(str::to_string);
        let flat = match obj
            .get("discount_rate_adjustment")
            .or_else(|| scope.get("discount_rate_adjustment"))
        {
            None | Some(Value::Null) => 0.0,
            Some(x) => x.as_f64().ok_or_else(|| {
                AnalystError::bad_input("regime.discount_rate_adjustment must be a number")
            })?,
        };
        Ok(Regime {
            name,
            flat_adjustment: flat,
            discount_rate_changes: sector_map(scope, "discount_rate_changes")?,
            sector_favorability_changes: sector_map(scope, "sector_favorability_changes")?,
        })
    }

    /// Total discount-rate adjustment for a sector.
    pub fn discount_adjustment(&self, sector: &str) -> f64 {
        self.flat_adjustment
            + self
                .discount_rate_changes
                .get(&sector.to_ascii_lowercase())
                .copied()
                .unwrap_or(0.0)
    }

    /// Screening score adjustment for a sector.
    pub fn favorability(&self, sector: &str) -> f64 {
        self.sector_favorability_changes
            .get(&sector.to_ascii_lowercase())
            .copied()
            .unwrap_or(0.0)
    }
}

/// What an analyst notes about the regime it ran under (`None` when the
/// task carries no regime, or one that does not parse: the analysts that
/// apply it report that error themselves).
pub fn note(task: &TaskDispatch, sector: &str) -> Option<Value> {
    let raw = task
        .inputs
        .get("regime")
        .filter(|v| !v.is_null())
        .or_else(|| task.params.get("regime").filter(|v| !v.is_null()))?;
    let r = Regime::parse(raw).ok()?;
    let source = if task.inputs.get("regime").is_some_and(|v| !v.is_null()) {
        raw.get("source")
            .and_then(Value::as_str)
            .unwrap_or("inputs.regime")
            .to_string()
    } else {
        "params.regime".to_string()
    };
    Some(json!({
        "name": r.name,
        "source": source,
        "discount_rate_adjustment": r.discount_adjustment(sector),
        "sector_favorability_change": r.favorability(sector),
    }))
}

fn sector_map(scope: &Value, key: &str) -> Result<BTreeMap<String, f64>, AnalystError> {
    let Some(v) = scope.get(key) else {
        return Ok(BTreeMap::new());
    };
    let Some(obj) = v.as_object() else {
        return Err(AnalystError::bad_input(format!(
            "regime.{key} must be an object of sector → number"
        )));
    };
    obj.iter()
        .map(|(sector, x)| {
            x.as_f64()
                .map(|x| (sector.to_ascii_lowercase(), x))
                .ok_or_else(|| {
                    AnalystError::bad_input(format!("regime.{key}.{sector} must be a number"))
                })
        })
        .collect()
}
