//! Valuation: a 5-year DCF → target price, upside, rating and sensitivity.
//!
//! Assumptions, first found wins:
//! - operating margin: `resolved_assumptions.operating_margin` (inputs, then
//!   params; set when a debate resolved it) → the financial stage's
//!   `operating_margin_assumption.value` → the trailing 3-year average
//!   computed from the data set;
//! - revenue growth: `resolved_assumptions.revenue_growth` → the business
//!   stage's `revenue_cagr` → the CAGR from the data set; clamped to
//!   `growth_floor`..`growth_cap` (−10 %..20 %);
//! - discount rate: `resolved_assumptions.discount_rate` (absolute) → the
//!   sector base rate (`params.discount_rates.<sector>`, else the built-in
//!   table, else `params.default_discount_rate` = 9 %) plus the regime's
//!   adjustment for the sector (see [`super::regime`]).
//!
//! When the financial and strategy margins differ by more than
//! `params.margin_debate_gap` (default: the worker's `margin_debate_gap`,
//! 3 points), valuation opens the margin debate (see [`super::margin_debate`]:
//! strategy challenges financial), uses the lower margin meanwhile and marks
//! its output `provisional` with the debate id (`debate_ids`,
//! `margin_debate`). A resolved margin never opens a debate.
//!
//! Reinvestment comes from the data set's last three years: depreciation as a
//! share of revenue and capex ÷ depreciation; findings about capex or cash
//! flow addressed to valuation (`inputs.findings`) raise capex ÷
//! depreciation (see [`super::applied`]) and are listed in the output's
//! `applied_findings` (always present, empty when none applied) and its key
//! figures. Tax 21 %, terminal growth 2.5 %
//! (params `tax_rate`, `terminal_growth`). Rating: BUY at upside ≥ 15 %
//! (`buy_upside`), SELL at ≤ −10 % (`sell_downside`), else HOLD.

use serde::Deserialize;
use serde_json::{json, Value};

use caucus_shared::outputs::{decode, items, lenient};

use super::context::{Analysis, Ctx};
use super::dcf::{dcf, DcfError, DcfInputs};
use super::format::{pct, price, pts, signed_pct};
use super::metrics::{revenue_cagr, round, DEFAULT_TAX_RATE};
use super::regime::Regime;
use super::{applied, financial, margin_debate, AnalystError, Finding};

/// Base discount rates (WACC) per sector before any regime adjustment.
pub const SECTOR_BASE_RATES: [(&str, f64); 11] = [
    ("Communication Services", 0.085),
    ("Consumer Discretionary", 0.085),
    ("Consumer Staples", 0.070),
    ("Energy", 0.090),
    ("Financials", 0.095),
    ("Healthcare", 0.080),
    ("Industrials", 0.085),
    ("Materials", 0.085),
    ("Real Estate", 0.075),
    ("Technology", 0.090),
    ("Utilities", 0.065),
];

/// Explicit forecast years.
pub const FORECAST_YEARS: u32 = 5;

fn sector_base_rate(ctx: &Ctx<'_>, sector: &str) -> Result<(f64, &'static str), AnalystError> {
    if let Some(map) = ctx.param_value("discount_rates") {
        let hit = map.as_object().and_then(|m| {
            m.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(sector))
                .map(|(_, v)| v)
        });
        if let Some(v) = hit {
            let rate = v.as_f64().ok_or_else(|| {
                AnalystError::bad_input(format!("params.discount_rates.{sector} must be a number"))
            })?;
            return Ok((rate, "params.discount_rates"));
        }
    }
    if let Some((_, rate)) = SECTOR_BASE_RATES
        .iter()
        .find(|(s, _)| s.eq_ignore_ascii_case(sector))
    {
        return Ok((*rate, "sector table"));
    }
    Ok((ctx.param_f64("default_discount_rate", 0.09)?, "default"))
}

/// The findings an upstream analyst's output lists (any agent's: read
/// leniently).
#[derive(Debug, Default, Deserialize)]
struct UpstreamFindings {
    /// Its findings; entries of another shape read as empty.
    #[serde(default, deserialize_with = "items")]
    findings: Option<Vec<UpstreamFinding>>,
}

/// The part of an upstream finding valuation reads.
#[derive(Debug, Default, Deserialize)]
struct UpstreamFinding {
    /// Topic key, e.g. `operating_margin`.
    #[serde(default, deserialize_with = "lenient")]
    key: Option<String>,
    /// How sure the analyst is, 0..1.
    #[serde(default, deserialize_with = "lenient")]
    confidence: Option<f64>,
}

/// The confidence of a stage's `operating_margin` finding, if it gave one.
fn margin_confidence(ctx: &Ctx<'_>, stage: &str) -> Option<f64> {
    let up: UpstreamFindings = decode(ctx.upstream.get(stage)?).ok()?;
    up.findings?
        .into_iter()
        .find(|f| f.key.as_deref() == Some(margin_debate::METRIC))?
        .confidence
        .filter(|c| (0.0..=1.0).contains(c))
}

fn invalid(e: DcfError) -> AnalystError {
    AnalystError::permanent("invalid_assumption", e.to_string())
}

pub(crate) fn analyse(ctx: &Ctx<'_>) -> Result<Analysis, AnalystError> {
    let c = ctx.company;
    let latest = c.latest();

    let (margin, margin_source) = match ctx.resolved("operating_margin")? {
        Some(m) => (m, "resolved_assumptions"),
        None => match ctx.stage_f64("financial", "/operating_margin_assumption/value")? {
            Some(m) => (m, "financial"),
            None => (
                financial::margin_assumption(c).value,
                "dataset (trailing 3-yr average)",
            ),
        },
    };
    let strategy_margin = ctx.stage_f64("strategy", "/operating_margin_assumption/value")?;
    let financial_margin = ctx.stage_f64("financial", "/operating_margin_assumption/value")?;
    let debate_gap = ctx.param_f64("margin_debate_gap", ctx.settings.margin_debate_gap)?;
    if debate_gap < 0.0 {
        return Err(AnalystError::bad_input(
            "params.margin_debate_gap must be >= 0 (0 disables the margin debate)",
        ));
    }
    // A resolved margin is settled; otherwise a gap above the threshold is
    // debated, and meanwhile the lower (conservative) margin is used.
    let debated = match (margin_source, financial_margin, strategy_margin) {
        ("resolved_assumptions", _, _) => None,
        (_, Some(f), Some(s)) if debate_gap > 0.0 && (s - f).abs() > debate_gap => Some((f, s)),
        _ => None,
    };
    let (margin, margin_source) = match debated {
        Some((f, s)) if s < f => (s, "strategy"),
        Some((f, _)) => (f, "financial"),
        None => (margin, margin_source),
    };

    let (raw_growth, growth_source) = match ctx.resolved("revenue_growth")? {
        Some(g) => (g, "resolved_assumptions"),
        None => match ctx.stage_f64("business", "/revenue_cagr")? {
            Some(g) => (g, "business"),
            None => (
                revenue_cagr(c).ok_or_else(|| {
                    AnalystError::permanent(
                        "insufficient_data",
                        format!("{}: revenue CAGR undefined", c.ticker),
                    )
                })?,
                "dataset (revenue CAGR)",
            ),
        },
    };
    let floor = ctx.param_f64("growth_floor", -0.10)?;
    let cap = ctx.param_f64("growth_cap", 0.20)?;
    if floor > cap {
        return Err(AnalystError::bad_input(
            "params.growth_floor exceeds params.growth_cap",
        ));
    }
    let growth = raw_growth.clamp(floor, cap);

    let trailing = c.trailing(financial::TRAILING_YEARS);
    let revenue: f64 = trailing.iter().map(|y| y.revenue).sum();
    let depreciation: f64 = trailing.iter().map(|y| y.depreciation).sum();
    let capex: f64 = trailing.iter().map(|y| y.capex).sum();
    if depreciation <= 0.0 {
        return Err(AnalystError::permanent(
            "insufficient_data",
            format!(
                "{}: no depreciation in the last {} years, reinvestment undefined",
                c.ticker,
                trailing.len()
            ),
        ));
    }

    // Findings addressed to valuation that concern cash flow raise the
    // reinvestment ratio (see `applied`).
    let base_capex_ratio = capex / depreciation;
    let findings_in = caucus_shared::inbound::input_findings(&ctx.task.inputs);
    let capex_adj = applied::adjust_capex(&findings_in, base_capex_ratio);

    let regime = Regime::from_task(ctx.input("regime"), ctx.param_value("regime"))?;
    let (base_rate, base_source) = sector_base_rate(ctx, &c.sector)?;
    let adjustment = regime.discount_adjustment(&c.sector);
    let (discount_rate, rate_source) = match ctx.resolved("discount_rate")? {
        Some(r) => (r, "resolved_assumptions"),
        None => (base_rate + adjustment, base_source),
    };

    let inputs = DcfInputs {
        base_revenue: latest.revenue,
        revenue_growth: growth,
        operating_margin: margin,
        tax_rate: ctx.param_f64("tax_rate", DEFAULT_TAX_RATE)?,
        depreciation_pct: depreciation / revenue,
        capex_to_depreciation: capex_adj.ratio,
        discount_rate,
        terminal_growth: ctx.param_f64("terminal_growth", 0.025)?,
        years: FORECAST_YEARS,
        total_debt: latest.total_debt,
        cash: latest.cash,
        shares_outstanding: latest.shares_outstanding,
    };
    let model = dcf(&inputs).map_err(invalid)?;
    // A share price cannot go below zero; the model's raw value is kept too.
    let value = model.value_per_share.max(0.0);
    let target = round(value, 2);
    let upside = target / c.price - 1.0;
    let buy = ctx.param_f64("buy_upside", 0.15)?;
    let sell = ctx.param_f64("sell_downside", -0.10)?;
    let rating = if upside >= buy {
        "BUY"
    } else if upside <= sell {
        "SELL"
    } else {
        "HOLD"
    };

    let bumped = |f: &dyn Fn(&mut DcfInputs)| -> Result<f64, AnalystError> {
        let mut i = inputs.clone();
        f(&mut i);
        Ok(dcf(&i).map_err(invalid)?.value_per_share.max(0.0) - value)
    };
    let per_margin_point = bumped(&|i| i.operating_margin += 0.01)?;
    let per_discount_point = bumped(&|i| i.discount_rate += 0.01)?;

    let other_margin = if margin_source == "financial" {
        strategy_margin
    } else {
        financial_margin.or(strategy_margin)
    };
    let disagreement = match debated {
        Some((f, s)) => Some((s - f).abs()),
        None => other_margin.map(|o| (o - margin).abs()),
    };
    let regime_name = regime.name.clone();
    let debate = debated.map(|(f, s)| {
        let view = |stage: &str, value: f64| margin_debate::View {
            value,
            confidence: margin_confidence(ctx, stage),
        };
        let challenge = margin_debate::challenge(&margin_debate::ChallengeInput {
            workflow_id: &ctx.task.workflow_id,
            company: c,
            financial: view("financial", f),
            strategy: view("strategy", s),
            threshold: debate_gap,
            regime: regime_name.clone(),
            synthetic: ctx.data.is_synthetic(),
        });
        let summary = json!({
            "debate_id": margin_debate::debate_id(&ctx.task.workflow_id),
            "metric": margin_debate::METRIC,
            "financial_operating_margin": round(f, 6),
            "strategy_operating_margin": round(s, 6),
            "gap": round((s - f).abs(), 6),
            "threshold": debate_gap,
            "margin_used": round(f.min(s), 6),
            "rule": "the lower (conservative) margin is used until the debate resolves",
        });
        let id = margin_debate::debate_id(&ctx.task.workflow_id);
        (challenge, summary, id)
    });

    let mut a = Analysis::default();
    match debate {
        Some((challenge, summary, id)) => {
            a.set("provisional", json!(true));
            a.set("debate_ids", json!([id]));
            a.set("margin_debate", summary);
            a.challenges.push(challenge);
        }
        None => {
            a.set("provisional", json!(false));
            a.set("debate_ids", json!([]));
        }
    }
    a.set("target_price", json!(target));
    a.set("current_price", json!(c.price));
    a.set("upside", json!(round(upside, 6)));
    a.set("rating", json!(rating));
    a.set("value_per_share", json!(round(model.value_per_share, 4)));
    a.set("operating_margin_used", json!(round(margin, 6)));
    a.set("discount_rate", json!(round(discount_rate, 6)));
    a.set(
        "assumptions",
        json!({
            "operating_margin": round(margin, 6),
            "operating_margin_source": margin_source,
            "financial_operating_margin": financial_margin.map(|m| round(m, 6)),
            "strategy_operating_margin": strategy_margin.map(|m| round(m, 6)),
            "margin_disagreement": disagreement.map(|d| round(d, 6)),
            "revenue_growth": round(growth, 6),
            "revenue_growth_unclamped": round(raw_growth, 6),
            "revenue_growth_source": growth_source,
            "tax_rate": inputs.tax_rate,
            "terminal_growth": inputs.terminal_growth,
            "depreciation_pct": round(inputs.depreciation_pct, 6),
            "capex_to_depreciation": round(inputs.capex_to_depreciation, 6),
            "capex_to_depreciation_dataset": round(base_capex_ratio, 6),
            "discount_rate": round(discount_rate, 6),
            "discount_rate_source": rate_source,
            "discount_rate_base": base_rate,
            "regime_adjustment": round(adjustment, 6),
            "regime": regime.name,
            "forecast_years": FORECAST_YEARS,
        }),
    );
    let projections: Vec<Value> = model
        .projections
        .iter()
        .map(|p| {
            json!({
                "year": p.year, "fiscal_year": latest.fiscal_year + p.year as i32,
                "revenue": round(p.revenue, 2), "ebit": round(p.ebit, 2), "nopat": round(p.nopat, 2),
                "depreciation": round(p.depreciation, 2), "capex": round(p.capex, 2),
                "fcf": round(p.fcf, 2), "discount_factor": round(p.discount_factor, 6),
                "present_value": round(p.present_value, 2),
            })
        })
        .collect();
    a.set(
        "dcf",
        json!({
            "projections": projections,
            "pv_explicit": round(model.pv_explicit, 2),
            "terminal_value": round(model.terminal_value, 2),
            "pv_terminal": round(model.pv_terminal, 2),
            "enterprise_value": round(model.enterprise_value, 2),
            "net_debt": round(latest.total_debt - latest.cash, 2),
            "equity_value": round(model.equity_value, 2),
            "shares_outstanding": latest.shares_outstanding,
        }),
    );
    a.set(
        "sensitivity",
        json!({
            "per_margin_point": round(per_margin_point, 2),
            "per_margin_point_pct": (value > 0.0).then(|| round(per_margin_point / value, 6)),
            "per_discount_point": round(per_discount_point, 2),
        }),
    );

    a.figure("Rating", rating);
    a.figure("Target price", price(target));
    a.figure("Current price", price(c.price));
    a.figure("Upside", signed_pct(upside));
    a.figure(
        "Operating margin used",
        format!("{} ({margin_source})", pct(margin)),
    );
    if let Some(d) = disagreement {
        a.figure(
            "Margin disagreement (financial vs strategy)",
            format!("{:.1} pts", d * 100.0),
        );
    }
    if let Some(id) = a.body.get("margin_debate").and_then(|d| d.get("debate_id")) {
        a.figure(
            "Margin debate",
            format!(
                "{} (provisional: lower margin used)",
                id.as_str().unwrap_or_default()
            ),
        );
    }
    a.figure(
        "Revenue growth",
        format!("{} ({growth_source})", signed_pct(growth)),
    );
    let regime_note = match &regime.name {
        Some(n) => format!(" incl. {} for {n}", pts(adjustment)),
        None if adjustment != 0.0 => format!(" incl. regime {}", pts(adjustment)),
        None => String::new(),
    };
    a.figure(
        "Discount rate (WACC)",
        format!("{}{regime_note}", pct(discount_rate)),
    );
    a.figure(
        "Sensitivity",
        format!("{} per +1 pt margin", price(per_margin_point)),
    );
    for f in &capex_adj.applied {
        a.figure("Finding applied", f.how.clone());
    }
    a.set("applied_findings", json!(capex_adj.applied));

    let confidence = (0.75 - 2.0 * disagreement.unwrap_or(0.0)).clamp(0.4, 0.75);
    a.findings.push(Finding {
        key: "valuation".to_string(),
        finding: format!(
            "DCF target price {}: {rating} ({} upside)",
            price(target),
            signed_pct(upside)
        ),
        confidence: round(confidence, 2),
        evidence: vec![
            format!("Operating margin {} from {margin_source}", pct(margin)),
            format!(
                "WACC {}, terminal growth {}",
                pct(discount_rate),
                pct(inputs.terminal_growth)
            ),
            format!("{} per +1 pt of operating margin", price(per_margin_point)),
        ],
        impact: "Report rating and target price".to_string(),
        metric: Some("target_price".to_string()),
        value: Some(target),
    });
    Ok(a)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use caucus_shared::inbound::{AppliedFinding, INPUT_FINDINGS};
    use caucus_shared::task::TaskDispatch;
    use serde_json::{json, Value};

    use crate::analysts::{run, Dataset};

    fn valuation_task(inputs: BTreeMap<String, Value>) -> TaskDispatch {
        serde_json::from_value(json!({
            "task_id": "wf-AAPL/valuation", "workflow_id": "wf-AAPL",
            "item": "AAPL", "pipeline": "stock-analysis", "stage": "valuation",
            "agent_type": "valuation", "attempt": 1, "inputs": inputs,
            "dispatched_at": "2025-11-16T10:30:00Z"
        }))
        .unwrap()
    }

    fn with_findings(findings: Value) -> BTreeMap<String, Value> {
        BTreeMap::from([(INPUT_FINDINGS.to_string(), findings)])
    }

    fn finding(id: &str, text: &str, impact: &str) -> Value {
        json!({
            "id": id, "from_agent": "financial_analyst", "to_agent": "valuation_agent",
            "priority": "high", "requires_response": true,
            "content": {"finding": text, "confidence": 0.85, "evidence": ["10-K p.47"], "impact": impact},
            "stored_at": "2026-11-25T10:00:00Z"
        })
    }

    fn applied(out: &Value) -> Vec<AppliedFinding> {
        serde_json::from_value(out["applied_findings"].clone()).unwrap()
    }

    #[test]
    fn a_capex_finding_lowers_the_target_price_and_is_listed() {
        let data = Dataset::bundled().unwrap();
        let base = run("valuation", &valuation_task(BTreeMap::new()), data).unwrap();
        let seed = finding(
            "f-capex",
            "Abnormal capex increase",
            "Adjust FCF projections",
        );
        let with = run(
            "valuation",
            &valuation_task(with_findings(json!([seed]))),
            data,
        )
        .unwrap();
        let price = |o: &Value| o["target_price"].as_f64().unwrap();
        assert!(
            price(&with.output) < price(&base.output),
            "more capex means less free cash flow: {} vs {}",
            price(&with.output),
            price(&base.output)
        );
        assert!(applied(&base.output).is_empty());
        let list = applied(&with.output);
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].finding_id, "f-capex");
        assert!(
            list[0].how.starts_with("raised capex to ")
                && list[0]
                    .how
                    .ends_with("per financial_analyst: Abnormal capex increase, confidence 0.85"),
            "{}",
            list[0].how
        );
        let ratio = |o: &Value| o["assumptions"]["capex_to_depreciation"].as_f64().unwrap();
        let dataset_ratio = with.output["assumptions"]["capex_to_depreciation_dataset"]
            .as_f64()
            .unwrap();
        assert!((ratio(&with.output) - dataset_ratio * 1.1275).abs() < 1e-5);
        assert_eq!(ratio(&base.output), dataset_ratio);
        let figures = with.output["key_figures"].as_array().unwrap();
        assert!(figures
            .iter()
            .any(|f| f["label"] == "Finding applied" && f["value"] == json!(list[0].how)));
        // The findings input is not mistaken for an upstream stage.
        assert!(with.output["upstream"].get(INPUT_FINDINGS).is_none());
    }

    #[test]
    fn an_unrelated_finding_changes_nothing() {
        let data = Dataset::bundled().unwrap();
        let base = run("valuation", &valuation_task(BTreeMap::new()), data).unwrap();
        let other = finding("f-ceo", "New CEO appointed", "Watch guidance");
        let with = run(
            "valuation",
            &valuation_task(with_findings(json!([other]))),
            data,
        )
        .unwrap();
        assert_eq!(with.output["target_price"], base.output["target_price"]);
        assert!(applied(&with.output).is_empty());
    }
}
