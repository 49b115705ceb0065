//! Financial statements: margins, free cash flow, capex anomalies, and the
//! financial analyst's operating-margin assumption (trailing 3-year average).
//!
//! A capex anomaly is a year whose capex exceeds `capex_anomaly_ratio`
//! (param, default 1.5) times the average of the three years before it.

use serde_json::json;

use super::context::{Analysis, Ctx};
use super::dataset::Company;
use super::format::{money_m, pct, times};
use super::metrics::{mean, round, stdev};
use super::{AnalystError, Finding};

/// Years averaged for the margin assumption and the capex baseline.
pub const TRAILING_YEARS: usize = 3;

/// The financial analyst's margin view: the trailing 3-year average.
#[derive(Debug, Clone, PartialEq)]
pub struct MarginAssumption {
    /// The assumed operating margin (fraction).
    pub value: f64,
    /// Fiscal years averaged.
    pub years: Vec<i32>,
    /// Spread of those years' margins (population std dev).
    pub stdev: f64,
}

/// Trailing average of the last three operating margins (fewer if fewer years).
pub fn margin_assumption(c: &Company) -> MarginAssumption {
    let trailing = c.trailing(TRAILING_YEARS);
    let margins: Vec<f64> = trailing.iter().map(|y| y.operating_margin()).collect();
    MarginAssumption {
        value: mean(&margins),
        years: trailing.iter().map(|y| y.fiscal_year).collect(),
        stdev: stdev(&margins),
    }
}

/// A year whose capex jumped above the recent baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct CapexAnomaly {
    /// The year of the jump.
    pub fiscal_year: i32,
    /// Capex that year.
    pub capex: f64,
    /// Average capex of the three years before.
    pub prior_average: f64,
    /// `capex / prior_average`.
    pub ratio: f64,
}

/// Years (with three prior years) whose capex exceeds `threshold` × the prior average.
pub fn capex_anomalies(c: &Company, threshold: f64) -> Vec<CapexAnomaly> {
    c.years
        .windows(TRAILING_YEARS + 1)
        .filter_map(|w| {
            let y = &w[TRAILING_YEARS];
            let prior = mean(
                &w[..TRAILING_YEARS]
                    .iter()
                    .map(|p| p.capex)
                    .collect::<Vec<_>>(),
            );
            let ratio = y.capex / prior;
            (prior > 0.0 && ratio > threshold).then_some(CapexAnomaly {
                fiscal_year: y.fiscal_year,
                capex: y.capex,
                prior_average: prior,
                ratio,
            })
        })
        .collect()
}

fn anomaly_finding(c: &Company, a: &CapexAnomaly) -> Finding {
    let y = c.years.iter().find(|y| y.fiscal_year == a.fiscal_year);
    let mut evidence = vec![format!(
        "FY{} capex {:.1}× 3-yr average ({} vs {})",
        a.fiscal_year,
        a.ratio,
        money_m(a.capex),
        money_m(a.prior_average)
    )];
    if let Some(y) = y {
        if y.depreciation > 0.0 {
            evidence.push(format!(
                "FY{} capex/depreciation {}",
                a.fiscal_year,
                times(y.capex / y.depreciation)
            ));
        }
        evidence.push(format!(
            "FY{} free cash flow {} on operating cash flow {}",
            a.fiscal_year,
            money_m(y.free_cash_flow()),
            money_m(y.operating_cash_flow)
        ));
    }
    Finding {
        key: "capex_anomaly".to_string(),
        finding: "Abnormal capex increase".to_string(),
        // 1.5× is barely anomalous; by 2.3× it is unmistakable.
        confidence: round((0.55 + 0.5 * (a.ratio - 1.5)).clamp(0.55, 0.95), 2),
        evidence,
        impact: "Adjust FCF projections: the reinvestment rate includes this spike".to_string(),
        metric: Some("capex_to_prior_average".to_string()),
        value: Some(round(a.ratio, 4)),
    }
}

pub(crate) fn analyse(ctx: &Ctx<'_>) -> Result<Analysis, AnalystError> {
    let c = ctx.company;
    let threshold = ctx.param_f64("capex_anomaly_ratio", 1.5)?;
    if threshold <= 0.0 {
        return Err(AnalystError::bad_input(
            "params.capex_anomaly_ratio must be positive",
        ));
    }
    let per_year: Vec<_> = c
        .years
        .iter()
        .map(|y| {
            json!({
                "fiscal_year": y.fiscal_year,
                "gross_margin": round(y.gross_profit / y.revenue, 6),
                "operating_margin": round(y.operating_margin(), 6),
                "net_margin": round(y.net_income / y.revenue, 6),
                "free_cash_flow": round(y.free_cash_flow(), 2),
                "fcf_margin": round(y.free_cash_flow() / y.revenue, 6),
                "capex": y.capex,
                "capex_to_depreciation": (y.depreciation > 0.0).then(|| round(y.capex / y.depreciation, 4)),
            })
        })
        .collect();
    let anomalies = capex_anomalies(c, threshold);
    let margin = margin_assumption(c);
    let latest = c.latest();

    let mut a = Analysis::default();
    a.set("years", json!(per_year));
    a.set(
        "capex_anomalies",
        json!(anomalies
            .iter()
            .map(|x| json!({"fiscal_year": x.fiscal_year, "capex": x.capex,
                "prior_3yr_average": round(x.prior_average, 2), "ratio": round(x.ratio, 4)}))
            .collect::<Vec<_>>()),
    );
    a.set(
        "operating_margin_assumption",
        json!({"value": round(margin.value, 6), "method": "trailing_3yr_average", "years": margin.years}),
    );
    a.set(
        "latest",
        json!({
            "fiscal_year": latest.fiscal_year, "revenue": latest.revenue,
            "total_debt": latest.total_debt, "cash": latest.cash,
            "net_debt": latest.total_debt - latest.cash,
            "shares_outstanding": latest.shares_outstanding, "price": c.price,
        }),
    );

    let fy = latest.fiscal_year;
    a.figure(
        &format!("Gross margin FY{fy}"),
        pct(latest.gross_profit / latest.revenue),
    );
    a.figure(
        &format!("Operating margin FY{fy}"),
        pct(latest.operating_margin()),
    );
    a.figure(
        &format!("Net margin FY{fy}"),
        pct(latest.net_income / latest.revenue),
    );
    a.figure(
        &format!("Free cash flow FY{fy}"),
        money_m(latest.free_cash_flow()),
    );
    a.figure(
        "Operating margin assumption",
        format!("{} (trailing 3-yr average)", pct(margin.value)),
    );
    a.figure(
        "Capex anomalies",
        if anomalies.is_empty() {
            "none".to_string()
        } else {
            anomalies
                .iter()
                .map(|x| format!("FY{} ({})", x.fiscal_year, times(x.ratio)))
                .collect::<Vec<_>>()
                .join(", ")
        },
    );

    a.findings = anomalies.iter().map(|x| anomaly_finding(c, x)).collect();
    let first = margin.years.first().copied().unwrap_or(fy);
    a.findings.push(Finding {
        key: "operating_margin".to_string(),
        finding: format!(
            "Operating margin assumption {} (trailing 3-yr average)",
            pct(margin.value)
        ),
        // Steady margins make the average a better guide.
        confidence: round((0.9 - 2.0 * margin.stdev).clamp(0.5, 0.9), 2),
        evidence: vec![format!(
            "FY{first}–FY{fy} operating margins average {} (std dev {:.1} pts)",
            pct(margin.value),
            margin.stdev * 100.0
        )],
        impact: "Valuation uses this margin unless a debate resolves otherwise".to_string(),
        metric: Some("operating_margin".to_string()),
        value: Some(round(margin.value, 6)),
    });
    Ok(a)
}
