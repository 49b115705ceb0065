//! A five-year discounted-cash-flow model of free cash flow to the firm.
//!
//! For year t = 1..=N: revenue_t = revenue_0 × (1 + g)^t, EBIT = revenue ×
//! margin, NOPAT = EBIT × (1 − tax), depreciation = revenue × dep%, capex =
//! depreciation × (capex/depreciation ratio), FCF = NOPAT + depreciation −
//! capex, discounted at (1 + WACC)^t. Terminal value = FCF_N × (1 + g_T) ÷
//! (WACC − g_T), discounted with year N. Equity = EV − debt + cash.

use serde::Serialize;

/// Assumptions and balance-sheet figures for one DCF.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DcfInputs {
    /// Latest annual revenue (millions).
    pub base_revenue: f64,
    /// Annual revenue growth over the explicit years.
    pub revenue_growth: f64,
    /// Operating margin (EBIT ÷ revenue).
    pub operating_margin: f64,
    /// Tax rate on EBIT.
    pub tax_rate: f64,
    /// Depreciation as a share of revenue.
    pub depreciation_pct: f64,
    /// Capex ÷ depreciation (1 = maintenance only, >1 = growth reinvestment).
    pub capex_to_depreciation: f64,
    /// Discount rate (WACC).
    pub discount_rate: f64,
    /// Perpetual growth after the explicit years.
    pub terminal_growth: f64,
    /// Number of explicit years.
    pub years: u32,
    /// Debt subtracted from enterprise value (millions).
    pub total_debt: f64,
    /// Cash added to enterprise value (millions).
    pub cash: f64,
    /// Shares outstanding (millions).
    pub shares_outstanding: f64,
}

/// One projected year.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DcfYear {
    /// 1-based year offset.
    pub year: u32,
    /// Projected revenue.
    pub revenue: f64,
    /// EBIT.
    pub ebit: f64,
    /// EBIT after tax.
    pub nopat: f64,
    /// Depreciation.
    pub depreciation: f64,
    /// Capex.
    pub capex: f64,
    /// Free cash flow to the firm.
    pub fcf: f64,
    /// 1 ÷ (1 + WACC)^year.
    pub discount_factor: f64,
    /// fcf × discount_factor.
    pub present_value: f64,
}

/// The model's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DcfResult {
    /// The explicit years.
    pub projections: Vec<DcfYear>,
    /// Sum of the explicit years' present values.
    pub pv_explicit: f64,
    /// Terminal value at the end of the last explicit year.
    pub terminal_value: f64,
    /// Its present value.
    pub pv_terminal: f64,
    /// pv_explicit + pv_terminal.
    pub enterprise_value: f64,
    /// enterprise_value − debt + cash.
    pub equity_value: f64,
    /// equity_value ÷ shares (may be negative: the model does not floor it).
    pub value_per_share: f64,
}

/// Assumptions the model cannot use.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DcfError {
    /// The Gordon terminal value needs WACC above terminal growth.
    #[error("discount rate {discount_rate} must exceed terminal growth {terminal_growth}")]
    DiscountNotAboveGrowth {
        /// WACC.
        discount_rate: f64,
        /// g_T.
        terminal_growth: f64,
    },
    /// An input that must be positive or finite is not.
    #[error("DCF input {field} = {value} is invalid: {why}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// Its value.
        value: f64,
        /// The rule it breaks.
        why: &'static str,
    },
}

/// Runs the model.
pub fn dcf(i: &DcfInputs) -> Result<DcfResult, DcfError> {
    let fields = [
        ("base_revenue", i.base_revenue),
        ("revenue_growth", i.revenue_growth),
        ("operating_margin", i.operating_margin),
        ("tax_rate", i.tax_rate),
        ("depreciation_pct", i.depreciation_pct),
        ("capex_to_depreciation", i.capex_to_depreciation),
        ("discount_rate", i.discount_rate),
        ("terminal_growth", i.terminal_growth),
        ("total_debt", i.total_debt),
        ("cash", i.cash),
        ("shares_outstanding", i.shares_outstanding),
    ];
    for (field, value) in fields {
        if !value.is_finite() {
            return Err(DcfError::Invalid {
                field,
                value,
                why: "not a finite number",
            });
        }
    }
    if i.shares_outstanding <= 0.0 {
        return Err(DcfError::Invalid {
            field: "shares_outstanding",
            value: i.shares_outstanding,
            why: "must be positive",
        });
    }
    if i.revenue_growth <= -1.0 || i.discount_rate <= -1.0 {
        return Err(DcfError::Invalid {
            field: "revenue_growth/discount_rate",
            value: i.revenue_growth.min(i.discount_rate),
            why: "must exceed -100%",
        });
    }
    if i.years == 0 {
        return Err(DcfError::Invalid {
            field: "years",
            value: 0.0,
            why: "must be at least 1",
        });
    }
    if i.discount_rate <= i.terminal_growth {
        return Err(DcfError::DiscountNotAboveGrowth {
            discount_rate: i.discount_rate,
            terminal_growth: i.terminal_growth,
        });
    }
    let mut projections = Vec::with_capacity(i.years as usize);
    let mut revenue = i.base_revenue;
    let mut discount_factor = 1.0;
    for year in 1..=i.years {
        revenue *= 1.0 + i.revenue_growth;
        discount_factor /= 1.0 + i.discount_rate;
        let ebit = revenue * i.operating_margin;
        let nopat = ebit * (1.0 - i.tax_rate);
        let depreciation = revenue * i.depreciation_pct;
        let capex = depreciation * i.capex_to_depreciation;
        let fcf = nopat + depreciation - capex;
        projections.push(DcfYear {
            year,
            revenue,
            ebit,
            nopat,
            depreciation,
            capex,
            fcf,
            discount_factor,
            present_value: fcf * discount_factor,
        });
    }
    let pv_explicit: f64 = projections.iter().map(|p| p.present_value).sum();
    let last = &projections[projections.len() - 1];
    let terminal_value =
        last.fcf * (1.0 + i.terminal_growth) / (i.discount_rate - i.terminal_growth);
    let pv_terminal = terminal_value * last.discount_factor;
    let enterprise_value = pv_explicit + pv_terminal;
    let equity_value = enterprise_value - i.total_debt + i.cash;
    Ok(DcfResult {
        projections,
        pv_explicit,
        terminal_value,
        pv_terminal,
        enterprise_value,
        equity_value,
        value_per_share: equity_value / i.shares_outstanding,
    })
}
