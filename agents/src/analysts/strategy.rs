//! Strategy: return-on-capital trend and a forward operating-margin view.
//!
//! ROIC = operating income × (1 − tax) ÷ invested capital, per year, with a
//! least-squares trend (slope per year and R²). The strategy analyst's margin
//! assumption extrapolates the margin trend one year past the latest margin,
//! weighted by how well a line fits (latest + slope × R²), so noisy margins
//! are not extrapolated. For companies whose margins move steadily this
//! differs from the financial analyst's trailing average by several points:
//! that disagreement is what the facilitator debates.

use serde_json::json;

use super::context::{Analysis, Ctx};
use super::dataset::Company;
use super::format::{pct, pts};
use super::metrics::{linear_fit, operating_margins, roic, round, LinearFit, DEFAULT_TAX_RATE};
use super::{AnalystError, Finding};

/// ROIC slope (per year) beyond which a trend counts as improving/declining.
const TREND_SLOPE: f64 = 0.005;
/// Fit quality needed to call a trend at all.
const TREND_R2: f64 = 0.5;

/// The strategy analyst's margin view.
#[derive(Debug, Clone, PartialEq)]
pub struct MarginView {
    /// Assumed forward operating margin (fraction).
    pub value: f64,
    /// Latest reported operating margin.
    pub latest: f64,
    /// Least-squares fit of the operating margins.
    pub fit: LinearFit,
}

/// Latest operating margin + trend slope × R², kept within −50 %..95 %.
pub fn margin_view(c: &Company) -> Result<MarginView, AnalystError> {
    let margins = operating_margins(c);
    let fit = linear_fit(&margins).ok_or_else(|| {
        AnalystError::permanent(
            "insufficient_data",
            format!("{}: need two years for a trend", c.ticker),
        )
    })?;
    let latest = margins[margins.len() - 1];
    Ok(MarginView {
        value: (latest + fit.slope * fit.r_squared).clamp(-0.5, 0.95),
        latest,
        fit,
    })
}

fn trend_label(fit: &LinearFit) -> &'static str {
    if fit.r_squared < TREND_R2 || fit.slope.abs() < TREND_SLOPE {
        "stable"
    } else if fit.slope > 0.0 {
        "improving"
    } else {
        "declining"
    }
}

pub(crate) fn analyse(ctx: &Ctx<'_>) -> Result<Analysis, AnalystError> {
    let c = ctx.company;
    let tax = ctx.param_f64("tax_rate", DEFAULT_TAX_RATE)?;
    let roics: Vec<f64> = c.years.iter().map(|y| roic(y, tax)).collect();
    let fit = linear_fit(&roics).ok_or_else(|| {
        AnalystError::permanent(
            "insufficient_data",
            format!("{}: need two years for a trend", c.ticker),
        )
    })?;
    let trend = trend_label(&fit);
    let view = margin_view(c)?;
    let fy = c.latest().fiscal_year;

    let mut a = Analysis::default();
    a.set(
        "roic_by_year",
        json!(c
            .years
            .iter()
            .zip(&roics)
            .map(|(y, r)| json!({"fiscal_year": y.fiscal_year, "roic": round(*r, 6)}))
            .collect::<Vec<_>>()),
    );
    a.set(
        "roic_trend",
        json!({"slope_per_year": round(fit.slope, 6), "r_squared": round(fit.r_squared, 4), "direction": trend}),
    );
    a.set(
        "operating_margin_trend",
        json!({"slope_per_year": round(view.fit.slope, 6), "r_squared": round(view.fit.r_squared, 4),
               "latest": round(view.latest, 6)}),
    );
    a.set(
        "operating_margin_assumption",
        json!({"value": round(view.value, 6), "method": "latest_plus_trend_x_r2", "fiscal_year": fy + 1}),
    );
    a.figure(&format!("ROIC FY{fy}"), pct(roics[roics.len() - 1]));
    a.figure(
        "ROIC trend",
        format!("{trend} ({}/yr, R² {:.2})", pts(fit.slope), fit.r_squared),
    );
    a.figure(
        "Operating margin trend",
        format!("{}/yr (R² {:.2})", pts(view.fit.slope), view.fit.r_squared),
    );
    a.figure(
        "Operating margin assumption",
        format!("{} (latest {} + trend)", pct(view.value), pct(view.latest)),
    );

    if trend != "stable" {
        a.findings.push(Finding {
            key: "roic_trend".to_string(),
            finding: format!("Return on capital {trend}"),
            confidence: round((0.4 + 0.5 * fit.r_squared).min(0.9), 2),
            evidence: vec![format!(
                "ROIC {} in FY{} → {} in FY{fy}, {}/yr (R² {:.2})",
                pct(roics[0]),
                c.years[0].fiscal_year,
                pct(roics[roics.len() - 1]),
                pts(fit.slope),
                fit.r_squared
            )],
            impact: "Weigh the durability of returns in the valuation rating".to_string(),
            metric: Some("roic_slope".to_string()),
            value: Some(round(fit.slope, 6)),
        });
    }
    a.findings.push(Finding {
        key: "operating_margin".to_string(),
        finding: format!(
            "Operating margin assumption {} (trend-based)",
            pct(view.value)
        ),
        confidence: round((0.5 + 0.4 * view.fit.r_squared).clamp(0.5, 0.9), 2),
        evidence: vec![format!(
            "FY{fy} operating margin {}, trend {}/yr with R² {:.2}",
            pct(view.latest),
            pts(view.fit.slope),
            view.fit.r_squared
        )],
        impact: "Valuation should use the forward margin rather than the trailing average"
            .to_string(),
        metric: Some("operating_margin".to_string()),
        value: Some(round(view.value, 6)),
    });
    Ok(a)
}
