//! Business quality: growth, margin stability and a moat proxy.
//!
//! Moat proxy score (0–100) = margin level (0–40, 40 % margin = full) +
//! margin stability (0–30, a 0-pt standard deviation = full, 8 pts = none) +
//! average ROIC (0–30, 30 % = full). ≥ 70 `wide`, ≥ 45 `narrow`, else `none`.

use serde_json::json;

use super::context::{Analysis, Ctx};
use super::format::{pct, signed_pct};
use super::metrics::{mean, operating_margins, revenue_cagr, roic, round, stdev, DEFAULT_TAX_RATE};
use super::AnalystError;

pub(crate) fn analyse(ctx: &Ctx<'_>) -> Result<Analysis, AnalystError> {
    let c = ctx.company;
    let tax = ctx.param_f64("tax_rate", DEFAULT_TAX_RATE)?;
    let cagr = revenue_cagr(c).ok_or_else(|| {
        AnalystError::permanent(
            "insufficient_data",
            format!("{}: revenue CAGR undefined", c.ticker),
        )
    })?;
    let growth: Vec<_> = c
        .years
        .windows(2)
        .map(|w| json!({"fiscal_year": w[1].fiscal_year, "growth": round(w[1].revenue / w[0].revenue - 1.0, 6)}))
        .collect();
    let margins = operating_margins(c);
    let margin_mean = mean(&margins);
    let margin_sd = stdev(&margins);
    let roics: Vec<f64> = c.years.iter().map(|y| roic(y, tax)).collect();
    let roic_mean = mean(&roics);

    let level = (margin_mean / 0.40 * 40.0).clamp(0.0, 40.0);
    let stability = (30.0 * (1.0 - margin_sd / 0.08)).clamp(0.0, 30.0);
    let returns = (roic_mean / 0.30 * 30.0).clamp(0.0, 30.0);
    let moat = round(level + stability + returns, 1);
    let label = if moat >= 70.0 {
        "wide"
    } else if moat >= 45.0 {
        "narrow"
    } else {
        "none"
    };

    let first = c.years[0].fiscal_year;
    let last = c.latest().fiscal_year;
    let mut a = Analysis::default();
    a.set("revenue_cagr", json!(round(cagr, 6)));
    a.set("cagr_years", json!([first, last]));
    a.set("revenue_growth_by_year", json!(growth));
    a.set("operating_margin_mean", json!(round(margin_mean, 6)));
    a.set("operating_margin_stdev", json!(round(margin_sd, 6)));
    a.set("roic_mean", json!(round(roic_mean, 6)));
    a.set("moat_score", json!(moat));
    a.set(
        "moat_components",
        json!({"margin_level": round(level, 2), "margin_stability": round(stability, 2), "returns": round(returns, 2)}),
    );
    a.set("moat", json!(label));
    a.figure(
        &format!("Revenue CAGR FY{first}–FY{last}"),
        signed_pct(cagr),
    );
    a.figure("Operating margin (mean)", pct(margin_mean));
    a.figure(
        "Margin stability (std dev)",
        format!("{:.1} pts", margin_sd * 100.0),
    );
    a.figure("ROIC (mean)", pct(roic_mean));
    a.figure("Moat proxy", format!("{moat:.1} / 100 ({label})"));
    Ok(a)
}
