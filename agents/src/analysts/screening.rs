//! Screening: hard filters plus a 0–100 attractiveness score.
//!
//! Filters (params, defaults): `min_revenue` (1,000 M), `require_positive_fcf`
//! (true, latest year), `max_debt_to_equity` (2.0, debt ÷ equity proxy where
//! equity ≈ invested capital − debt + cash), `min_score` (40). The score adds
//! five 0–20 components: size, operating margin, FCF margin, revenue growth
//! and leverage, plus the regime's sector favourability change.

use serde_json::json;

use super::context::{Analysis, Ctx};
use super::format::{money_m, pct};
use super::metrics::{equity_proxy, revenue_cagr, round};
use super::regime::Regime;
use super::AnalystError;

/// Linear 0..=20 points between `lo` (0 points) and `hi` (20 points).
fn points(x: f64, lo: f64, hi: f64) -> f64 {
    (20.0 * (x - lo) / (hi - lo)).clamp(0.0, 20.0)
}

pub(crate) fn analyse(ctx: &Ctx<'_>) -> Result<Analysis, AnalystError> {
    let min_revenue = ctx.param_f64("min_revenue", 1_000.0)?;
    let require_fcf = ctx.param_bool("require_positive_fcf", true)?;
    let max_de = ctx.param_f64("max_debt_to_equity", 2.0)?;
    let min_score = ctx.param_f64("min_score", 40.0)?;
    let regime = Regime::from_task(ctx.input("regime"), ctx.param_value("regime"))?;

    let c = ctx.company;
    let y = c.latest();
    let fcf = y.free_cash_flow();
    let equity = equity_proxy(y);
    let de = (equity > 0.0).then(|| y.total_debt / equity);
    let growth = revenue_cagr(c).unwrap_or(0.0);
    let op_margin = y.operating_margin();
    let fcf_margin = fcf / y.revenue;

    let mut filters = Vec::new();
    let mut reasons = Vec::new();
    let mut check = |name: &str,
                     passed: bool,
                     value: serde_json::Value,
                     threshold: serde_json::Value,
                     why: String| {
        reasons.push(format!("{}: {why}", if passed { "pass" } else { "FAIL" }));
        filters
            .push(json!({"name": name, "passed": passed, "value": value, "threshold": threshold}));
        passed
    };
    let mut passed = check(
        "min_revenue",
        y.revenue >= min_revenue,
        json!(y.revenue),
        json!(min_revenue),
        format!(
            "FY{} revenue {} vs minimum {}",
            y.fiscal_year,
            money_m(y.revenue),
            money_m(min_revenue)
        ),
    );
    if require_fcf {
        passed &= check(
            "positive_fcf",
            fcf > 0.0,
            json!(round(fcf, 2)),
            json!(0.0),
            format!("FY{} free cash flow {}", y.fiscal_year, money_m(fcf)),
        );
    }
    passed &= match de {
        Some(de) => check(
            "max_debt_to_equity",
            de <= max_de,
            json!(round(de, 4)),
            json!(max_de),
            format!("debt/equity proxy {de:.2} vs maximum {max_de:.2}"),
        ),
        None => check(
            "max_debt_to_equity",
            false,
            serde_json::Value::Null,
            json!(max_de),
            format!("equity proxy {} is not positive", money_m(equity)),
        ),
    };

    let size = points(y.revenue.log10(), 3.0, 5.0); // 1 bn → 0, 100 bn → 20
    let profitability = points(op_margin, 0.0, 0.30);
    let cash = points(fcf_margin, 0.0, 0.25);
    let growth_pts = points(growth, -0.05, 0.20);
    let leverage = de.map_or(0.0, |de| 20.0 - points(de, 0.0, 2.0));
    let favorability = regime.favorability(&c.sector);
    let score =
        (size + profitability + cash + growth_pts + leverage + favorability).clamp(0.0, 100.0);
    let score = round(score, 1);
    let score_ok = score >= min_score;
    reasons.push(format!(
        "{}: score {score:.1} vs minimum {min_score:.1}",
        if score_ok { "pass" } else { "FAIL" }
    ));
    passed &= score_ok;

    let mut a = Analysis::default();
    a.set("passed", json!(passed));
    a.set("score", json!(score));
    a.set(
        "score_components",
        json!({
            "size": round(size, 2), "operating_margin": round(profitability, 2),
            "fcf_margin": round(cash, 2), "revenue_growth": round(growth_pts, 2),
            "leverage": round(leverage, 2), "regime_favorability": round(favorability, 2),
        }),
    );
    a.set("filters", json!(filters));
    a.set("reasons", json!(reasons));
    a.set("fiscal_year", json!(y.fiscal_year));
    a.set("debt_to_equity", json!(de.map(|d| round(d, 4))));
    if let Some(name) = &regime.name {
        a.set("regime", json!(name));
    }
    a.figure("Result", if passed { "passed" } else { "failed" });
    a.figure("Score", format!("{score:.1} / 100"));
    a.figure(&format!("Revenue FY{}", y.fiscal_year), money_m(y.revenue));
    a.figure(&format!("Free cash flow FY{}", y.fiscal_year), money_m(fcf));
    a.figure(
        "Debt/equity proxy",
        de.map_or_else(|| "n/a (equity ≤ 0)".to_string(), |d| format!("{d:.2}")),
    );
    a.figure("Operating margin", pct(op_margin));
    Ok(a)
}
