//! Small statistics shared by the analysts: averages, CAGR, least squares.

use super::dataset::{Company, FiscalYear};

/// Corporate tax rate used for NOPAT and the DCF unless a stage overrides it.
pub const DEFAULT_TAX_RATE: f64 = 0.21;

/// Arithmetic mean; 0 for an empty slice.
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// Population standard deviation; 0 for fewer than two values.
pub fn stdev(xs: &[f64]) -> f64 {
    if xs.len() < 2 {
        return 0.0;
    }
    let m = mean(xs);
    (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / xs.len() as f64).sqrt()
}

/// Compound annual growth from `first` to `last` over `periods` years, or
/// `None` when it is undefined (non-positive ends, no elapsed time).
pub fn cagr(first: f64, last: f64, periods: f64) -> Option<f64> {
    (first > 0.0 && last > 0.0 && periods > 0.0).then(|| (last / first).powf(1.0 / periods) - 1.0)
}

/// Revenue CAGR from the first to the last fiscal year of a company.
pub fn revenue_cagr(c: &Company) -> Option<f64> {
    let (first, last) = (c.years.first()?, c.years.last()?);
    cagr(
        first.revenue,
        last.revenue,
        f64::from(last.fiscal_year - first.fiscal_year),
    )
}

/// A least-squares line through `(0, y0), (1, y1), …`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearFit {
    /// Change per step (per year).
    pub slope: f64,
    /// Fitted value at step 0.
    pub intercept: f64,
    /// Share of the variance the line explains, 0..1 (0 when the series is flat).
    pub r_squared: f64,
}

/// Fits a line through equally spaced points; `None` for fewer than two.
pub fn linear_fit(ys: &[f64]) -> Option<LinearFit> {
    let n = ys.len();
    if n < 2 {
        return None;
    }
    let xs: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let mx = mean(&xs);
    let my = mean(ys);
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    let sxy: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let slope = sxy / sxx;
    let intercept = my - slope * mx;
    let sst: f64 = ys.iter().map(|y| (y - my).powi(2)).sum();
    let ssr: f64 = xs
        .iter()
        .zip(ys)
        .map(|(x, y)| (y - (intercept + slope * x)).powi(2))
        .sum();
    // A flat series has nothing to explain: report no fit rather than 0/0.
    let r_squared = if sst <= f64::EPSILON {
        0.0
    } else {
        (1.0 - ssr / sst).clamp(0.0, 1.0)
    };
    Some(LinearFit {
        slope,
        intercept,
        r_squared,
    })
}

/// Operating margin of every fiscal year, oldest first.
pub fn operating_margins(c: &Company) -> Vec<f64> {
    c.years.iter().map(FiscalYear::operating_margin).collect()
}

/// Return on invested capital: after-tax operating income / invested capital.
pub fn roic(y: &FiscalYear, tax_rate: f64) -> f64 {
    y.operating_income * (1.0 - tax_rate) / y.invested_capital
}

/// Equity proxy from the balance-sheet figures we have: IC − debt + cash.
pub fn equity_proxy(y: &FiscalYear) -> f64 {
    y.invested_capital - y.total_debt + y.cash
}

/// Rounds to `digits` decimals (for tidy, stable JSON output).
pub fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_of_a_line_is_exact() {
        let f = linear_fit(&[1.0, 3.0, 5.0, 7.0]).unwrap();
        assert!((f.slope - 2.0).abs() < 1e-12);
        assert!((f.intercept - 1.0).abs() < 1e-12);
        assert!((f.r_squared - 1.0).abs() < 1e-12);
        assert_eq!(linear_fit(&[2.0, 2.0]).unwrap().r_squared, 0.0);
        assert!(linear_fit(&[1.0]).is_none());
    }

    #[test]
    fn cagr_doubles_in_one_period() {
        assert!((cagr(100.0, 200.0, 1.0).unwrap() - 1.0).abs() < 1e-12);
        assert!(cagr(0.0, 200.0, 1.0).is_none());
    }
}
