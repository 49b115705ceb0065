//! Report: one markdown document per item from every upstream stage's output.
//!
//! Needs the valuation output (`target_price`) among the inputs; the other
//! stages arrive through valuation's `upstream`. Stages without
//! `key_figures` (e.g. an external agent's) are shown by their top-level
//! numbers and strings.

use std::fmt::Write as _;

use serde::{Deserialize, Deserializer};
use serde_json::{json, Value};

use caucus_shared::outputs::{items, lenient};

use super::context::{Analysis, Ctx};
use super::format::{price, signed_pct};
use super::{known_agent_types, AnalystError};

/// Output fields every analyst adds; not worth repeating in a report.
const META_FIELDS: [&str; 9] = [
    "schema_version",
    "agent_type",
    "item",
    "name",
    "sector",
    "data_source",
    "key_figures",
    "findings",
    "upstream",
];

fn title_case(stage: &str) -> String {
    let mut chars = stage.chars();
    match chars.next() {
        Some(f) => f
            .to_uppercase()
            .chain(chars)
            .collect::<String>()
            .replace('_', " "),
        None => String::new(),
    }
}

/// Markdown table cells must not break the row.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A text, number or boolean, as text; any other JSON reads as `None`.
#[derive(Debug, Clone, Default)]
struct Scalar(Option<String>);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Scalar(scalar(&Value::deserialize(d)?)))
    }
}

/// An upstream stage's output as the report reads it: any agent's, so
/// every part is optional and odd entries read as empty.
#[derive(Debug, Default, Deserialize)]
struct StageView {
    /// `{label, value}` figures, when the stage lists them.
    #[serde(default, deserialize_with = "items")]
    key_figures: Option<Vec<Figure>>,
    /// Its findings.
    #[serde(default, deserialize_with = "items")]
    findings: Option<Vec<FindingView>>,
    /// Valuation: BUY, HOLD or SELL.
    #[serde(default, deserialize_with = "lenient")]
    rating: Option<String>,
    /// Screening: whether the company passed.
    #[serde(default, deserialize_with = "lenient")]
    passed: Option<bool>,
    /// Screening: its score.
    #[serde(default)]
    score: Scalar,
}

/// One key figure.
#[derive(Debug, Default, Deserialize)]
struct Figure {
    /// What it is.
    #[serde(default)]
    label: Scalar,
    /// Its value, formatted.
    #[serde(default)]
    value: Scalar,
}

/// One upstream finding.
#[derive(Debug, Default, Deserialize)]
struct FindingView {
    /// The statement.
    #[serde(default)]
    finding: Scalar,
    /// How sure the analyst is, 0..1.
    #[serde(default, deserialize_with = "lenient")]
    confidence: Option<f64>,
    /// Supporting figures.
    #[serde(default, deserialize_with = "lenient")]
    evidence: Option<Vec<Scalar>>,
    /// What downstream work should do about it.
    #[serde(default)]
    impact: Scalar,
}

/// `output` read as a [`StageView`] (not an object: nothing in it).
fn view(output: &Value) -> StageView {
    if output.is_object() {
        StageView::deserialize(output).unwrap_or_default()
    } else {
        StageView::default()
    }
}

fn figures(output: &Value) -> Vec<(String, String)> {
    if let Some(list) = view(output).key_figures {
        return list
            .into_iter()
            .filter_map(|f| Some((f.label.0?, f.value.0?)))
            .collect();
    }
    output
        .as_object()
        .map(|o| {
            o.iter()
                .filter(|(k, _)| !META_FIELDS.contains(&k.as_str()))
                .filter_map(|(k, v)| scalar(v).map(|s| (k.clone(), s)))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn analyse(ctx: &Ctx<'_>) -> Result<Analysis, AnalystError> {
    let c = ctx.company;
    let target = ctx
        .stage_f64("valuation", "/target_price")?
        .ok_or_else(|| {
            AnalystError::permanent(
                "missing_input",
                "report needs the valuation stage's output (target_price) among its inputs",
            )
        })?;
    let valuation = view(ctx.upstream.get("valuation").unwrap_or(&Value::Null));
    let rating = valuation.rating.as_deref().unwrap_or("n/a");
    let current = ctx
        .stage_f64("valuation", "/current_price")?
        .unwrap_or(c.price);
    let upside = match ctx.stage_f64("valuation", "/upside")? {
        Some(u) => u,
        None => target / current - 1.0,
    };

    let mut order: Vec<&str> = known_agent_types()
        .iter()
        .copied()
        .filter(|s| ctx.upstream.contains_key(*s))
        .collect();
    order.extend(
        ctx.upstream
            .keys()
            .map(String::as_str)
            .filter(|k| !known_agent_types().contains(k)),
    );

    let title = format!("{} ({}) — stock analysis", c.name, c.ticker);
    let mut md = String::new();
    // Writing to a String cannot fail; the results are ignored on purpose.
    let _ = writeln!(md, "# {title}\n");
    if ctx.data.is_synthetic() {
        let _ = writeln!(
            md,
            "> **Synthetic data.** The figures below come from a synthetic data set generated to be plausible; they are not real financial data.\n"
        );
    }
    let _ = writeln!(md, "> Data: {} ({})\n", ctx.data.note(), ctx.data.origin());
    let _ = writeln!(md, "## Summary\n\n| | |\n|---|---|");
    let _ = writeln!(md, "| Sector | {} |", cell(&c.sector));
    let _ = writeln!(md, "| Rating | **{}** |", cell(rating));
    let _ = writeln!(md, "| Target price | {} |", price(target));
    let _ = writeln!(md, "| Current price | {} |", price(current));
    let _ = writeln!(md, "| Upside | {} |", signed_pct(upside));
    if let Some(v) = ctx.upstream.get("screening").map(view) {
        if let Some(passed) = v.passed {
            let score = v.score.0.unwrap_or_default();
            let _ = writeln!(
                md,
                "| Screening | {} (score {score}) |",
                if passed { "passed" } else { "failed" }
            );
        }
    }
    md.push('\n');

    let mut findings = Vec::new();
    for stage in &order {
        let Some(output) = ctx.upstream.get(*stage) else {
            continue;
        };
        let _ = writeln!(md, "## {}\n", title_case(stage));
        let figs = figures(output);
        if figs.is_empty() {
            let _ = writeln!(md, "_No key figures reported._");
        }
        for (label, value) in figs {
            let _ = writeln!(md, "- {label}: {value}");
        }
        md.push('\n');
        for f in view(output).findings.into_iter().flatten() {
            findings.push((*stage, f));
        }
    }

    let _ = writeln!(md, "## Findings\n");
    if findings.is_empty() {
        let _ = writeln!(md, "No findings.\n");
    }
    for (stage, f) in &findings {
        let text = f.finding.0.clone().unwrap_or_default();
        let conf = f.confidence;
        let _ = write!(md, "- **{text}** ({stage}");
        if let Some(conf) = conf {
            let _ = write!(md, ", confidence {conf:.2}");
        }
        let _ = writeln!(md, ")");
        let evidence: Vec<String> = f
            .evidence
            .iter()
            .flatten()
            .filter_map(|e| e.0.clone())
            .collect();
        if !evidence.is_empty() {
            let _ = writeln!(md, "  - Evidence: {}", evidence.join("; "));
        }
        if let Some(impact) = &f.impact.0 {
            let _ = writeln!(md, "  - Impact: {impact}");
        }
    }
    md.push('\n');

    let _ = writeln!(md, "## Rating\n");
    let _ = writeln!(
        md,
        "**{rating}** with a target price of **{}** against a current price of {} ({} upside).\n",
        price(target),
        price(current),
        signed_pct(upside)
    );
    let _ = writeln!(
        md,
        "---\n_Generated by the caucus built-in analysts from {}. {}_",
        ctx.data.origin(),
        if ctx.data.is_synthetic() {
            "The data is synthetic: not real financial data, not investment advice."
        } else {
            "Figures are as supplied by the data set."
        }
    );

    let mut a = Analysis::default();
    a.set("title", json!(title));
    a.set("markdown", json!(md));
    a.set("rating", json!(rating));
    a.set("target_price", json!(target));
    a.set("current_price", json!(current));
    a.set("upside", json!(upside));
    a.set("stages", json!(order));
    a.figure("Rating", rating);
    a.figure("Target price", price(target));
    a.figure("Findings", findings.len().to_string());
    Ok(a)
}
