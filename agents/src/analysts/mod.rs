//! Built-in analysts for the `stock-analysis` pipeline.
//!
//! Each analyst does real, deterministic analysis (no clock, no randomness)
//! of one ticker from a [`Dataset`] of company fundamentals. The bundled data
//! set is **synthetic** (generated to be plausible, not real financial data);
//! users can load their own JSON or CSV with [`Dataset::from_path`].
//!
//! | agent type | does |
//! |---|---|
//! | `screening` | filters (min revenue, positive FCF, debt/equity proxy) and a 0–100 score |
//! | `business` | revenue CAGR, margin stability, moat proxy score |
//! | `financial` | margins and FCF per year, capex anomaly findings, operating-margin assumption = trailing 3-year average |
//! | `strategy` | ROIC per year with a least-squares trend, operating-margin assumption = latest + trend × R² |
//! | `valuation` | 5-year DCF → target price, upside, rating, margin sensitivity |
//! | `report` | a markdown report of every upstream stage |
//!
//! Every output object carries `schema_version`, `agent_type`, `item`,
//! `name`, `sector`, `data_source`, `key_figures` (`[{label, value}]`),
//! `findings` and `upstream` (the outputs of all stages before it, keyed by
//! stage name, so `report` can show the whole chain although it depends on
//! `valuation` only). Input keys `resolved_assumptions` and `regime` are
//! run-time overrides, and `findings` the findings other agents and outside
//! services addressed to the agent type (valuation applies those about cash
//! flow, see `applied`), not stage outputs.

mod applied;
mod business;
pub mod company;
mod context;
mod csv;
pub mod dataset;
pub mod dcf;
mod financial;
pub mod format;
pub mod margin_debate;
pub mod metrics;
pub mod regime;
mod report;
mod screening;
mod strategy;
mod valuation;

use caucus_shared::task::{ErrorClass, TaskDispatch, TaskError};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

pub use dataset::{Company, Dataset, DatasetError, FiscalYear};

pub use context::Settings;
use context::{Analysis, Ctx};

/// Version of the analysts' output objects.
pub const OUTPUT_SCHEMA_VERSION: u32 = 1;

const AGENT_TYPES: [&str; 6] = [
    "screening",
    "business",
    "financial",
    "strategy",
    "valuation",
    "report",
];

/// The agent types [`run`] understands, in pipeline order.
pub fn known_agent_types() -> &'static [&'static str] {
    &AGENT_TYPES
}

/// Something an analyst noticed that other agents should hear about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Topic key without the item, e.g. `capex_anomaly`, `operating_margin`.
    pub key: String,
    /// One-line statement, e.g. `Abnormal capex increase`.
    pub finding: String,
    /// How sure the analyst is, 0..1.
    pub confidence: f64,
    /// Figures that support it.
    pub evidence: Vec<String>,
    /// What downstream work should do about it.
    pub impact: String,
    /// Metric the finding asserts a value for (e.g. `operating_margin`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// The asserted value (fractions for margins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
}

/// What an analyst returns: the task output and its findings.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalystOutput {
    /// The JSON output of the task (also lists the findings under `findings`).
    pub output: Value,
    /// Findings to publish on `caucus.findings.<key>`.
    pub findings: Vec<Finding>,
    /// Challenge contents (seed format) to publish on
    /// `caucus.debates.<debate_id>.challenge`.
    pub challenges: Vec<Value>,
}

/// Why an analyst could not produce an output.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{error_type}: {message}")]
pub struct AnalystError {
    /// True when retrying cannot help (unknown ticker, bad input).
    pub permanent: bool,
    /// Short machine-readable kind, e.g. `unknown_ticker`.
    pub error_type: String,
    /// Human-readable detail.
    pub message: String,
}

impl AnalystError {
    /// A permanent error of the given kind.
    pub fn permanent(error_type: &str, message: impl Into<String>) -> AnalystError {
        AnalystError {
            permanent: true,
            error_type: error_type.to_string(),
            message: message.into(),
        }
    }

    /// Input or params that cannot be used.
    pub fn bad_input(message: impl Into<String>) -> AnalystError {
        AnalystError::permanent("bad_input", message)
    }

    /// The wire form, naming the data set as the data source.
    pub fn to_task_error(&self, data_source: Option<&str>) -> TaskError {
        TaskError {
            class: if self.permanent {
                ErrorClass::Permanent
            } else {
                ErrorClass::Transient
            },
            error_type: self.error_type.clone(),
            message: self.message.clone(),
            data_source: data_source.map(str::to_string),
        }
    }
}

impl From<DatasetError> for AnalystError {
    fn from(e: DatasetError) -> AnalystError {
        let kind = match e {
            DatasetError::UnknownTicker { .. } => "unknown_ticker",
            _ => "dataset_error",
        };
        // Every data set error is about the data, not the moment: retrying
        // the same task against the same data cannot succeed.
        AnalystError::permanent(kind, e.to_string())
    }
}

/// Runs the built-in analyst `agent_type` on `task.item` with the default
/// [`Settings`].
pub fn run(
    agent_type: &str,
    task: &TaskDispatch,
    data: &Dataset,
) -> Result<AnalystOutput, AnalystError> {
    run_with(agent_type, task, data, &Settings::default())
}

/// Runs the built-in analyst `agent_type` on `task.item`.
pub fn run_with(
    agent_type: &str,
    task: &TaskDispatch,
    data: &Dataset,
    settings: &Settings,
) -> Result<AnalystOutput, AnalystError> {
    let analyse: fn(&Ctx<'_>) -> Result<Analysis, AnalystError> = match agent_type {
        "screening" => screening::analyse,
        "business" => business::analyse,
        "financial" => financial::analyse,
        "strategy" => strategy::analyse,
        "valuation" => valuation::analyse,
        "report" => report::analyse,
        other => {
            return Err(AnalystError::permanent(
                "unknown_agent_type",
                format!(
                    "no built-in analyst for agent type {other:?} (known: {})",
                    AGENT_TYPES.join(", ")
                ),
            ))
        }
    };
    let ctx = Ctx::new(task, data, settings)?;
    let analysis = analyse(&ctx)?;
    Ok(assemble(agent_type, &ctx, analysis))
}

fn assemble(agent_type: &str, ctx: &Ctx<'_>, a: Analysis) -> AnalystOutput {
    let mut out = serde_json::Map::new();
    out.insert("schema_version".into(), json!(OUTPUT_SCHEMA_VERSION));
    out.insert("agent_type".into(), json!(agent_type));
    out.insert("item".into(), json!(ctx.company.ticker));
    out.insert("name".into(), json!(ctx.company.name));
    out.insert("sector".into(), json!(ctx.company.sector));
    out.insert("data_source".into(), json!(ctx.data.origin()));
    out.extend(a.body);
    // Seed 001 response protocol: every analyst notes the market regime it
    // worked under (screening and valuation also apply it).
    if let Some(note) = regime::note(ctx.task, &ctx.company.sector) {
        out.insert("market_regime".into(), note);
    }
    let figures: Vec<Value> = a
        .key_figures
        .iter()
        .map(|(label, value)| json!({"label": label, "value": value}))
        .collect();
    out.insert("key_figures".into(), Value::Array(figures));
    out.insert("findings".into(), json!(a.findings));
    out.insert("upstream".into(), json!(ctx.upstream));
    AnalystOutput {
        output: Value::Object(out),
        findings: a.findings,
        challenges: a.challenges,
    }
}
