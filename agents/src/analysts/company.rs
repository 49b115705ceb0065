//! The companies and fiscal years the built-in analysts read, and why a
//! data set cannot be used: the model both loaders ([`super::dataset`] for
//! JSON, [`super::csv`] for CSV) build.

use serde::{Deserialize, Serialize};

/// Fewest fiscal years a company needs: trends and averages need two points.
pub const MIN_YEARS: usize = 2;

/// Why a data set could not be loaded or queried.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DatasetError {
    /// The file could not be read.
    #[error("cannot read data set {path}: {reason}")]
    Read {
        /// The path given.
        path: String,
        /// The I/O error text.
        reason: String,
    },
    /// The file name does not end in `.json` or `.csv`.
    #[error("data set {origin}: unsupported file type (expected a .json or .csv file)")]
    UnsupportedFormat {
        /// The path given.
        origin: String,
    },
    /// JSON that does not parse or has the wrong shape.
    #[error("data set {origin} is not valid fundamentals JSON: {reason}")]
    Json {
        /// Where the data came from.
        origin: String,
        /// The parser's message.
        reason: String,
    },
    /// A CSV line that cannot be used.
    #[error("data set {origin}, line {line}: {reason}")]
    Csv {
        /// Where the data came from.
        origin: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// Figures that parse but make no sense (negative revenue, one year, …).
    #[error("data set {origin}, ticker {ticker}: {reason}")]
    Invalid {
        /// Where the data came from.
        origin: String,
        /// The company concerned.
        ticker: String,
        /// What is wrong.
        reason: String,
    },
    /// The ticker is not in the data set (retrying will not help).
    #[error("ticker {ticker:?} is not in data set {origin}")]
    UnknownTicker {
        /// The ticker asked for (normalised).
        ticker: String,
        /// Where the data came from.
        origin: String,
    },
}

/// One fiscal year of a company's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FiscalYear {
    /// Fiscal year, e.g. 2024.
    pub fiscal_year: i32,
    /// Revenue (millions).
    pub revenue: f64,
    /// Gross profit (millions).
    pub gross_profit: f64,
    /// Operating income / EBIT (millions).
    pub operating_income: f64,
    /// Net income (millions).
    pub net_income: f64,
    /// Capital expenditure, positive = spent (millions).
    pub capex: f64,
    /// Operating cash flow (millions).
    pub operating_cash_flow: f64,
    /// Depreciation and amortisation (millions).
    pub depreciation: f64,
    /// Total debt at year end (millions).
    pub total_debt: f64,
    /// Cash and equivalents at year end (millions).
    pub cash: f64,
    /// Diluted shares outstanding (millions).
    pub shares_outstanding: f64,
    /// Invested capital = equity + debt − cash (millions).
    pub invested_capital: f64,
}

impl FiscalYear {
    /// Free cash flow: operating cash flow less capex.
    pub fn free_cash_flow(&self) -> f64 {
        self.operating_cash_flow - self.capex
    }

    /// Operating margin as a fraction of revenue.
    pub fn operating_margin(&self) -> f64 {
        self.operating_income / self.revenue
    }

    pub(crate) fn values(&self) -> [(&'static str, f64); 11] {
        [
            ("revenue", self.revenue),
            ("gross_profit", self.gross_profit),
            ("operating_income", self.operating_income),
            ("net_income", self.net_income),
            ("capex", self.capex),
            ("operating_cash_flow", self.operating_cash_flow),
            ("depreciation", self.depreciation),
            ("total_debt", self.total_debt),
            ("cash", self.cash),
            ("shares_outstanding", self.shares_outstanding),
            ("invested_capital", self.invested_capital),
        ]
    }
}

/// A company and its fiscal years (sorted, oldest first).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Company {
    /// Ticker, upper case (e.g. `BRK.B`).
    pub ticker: String,
    /// Company name (the ticker when not given).
    #[serde(default)]
    pub name: String,
    /// Sector, e.g. `Technology` (selects the base discount rate).
    pub sector: String,
    /// Current share price.
    pub price: f64,
    /// Fiscal years, oldest first.
    pub years: Vec<FiscalYear>,
}

impl Company {
    /// The most recent fiscal year. Only for companies taken from a
    /// [`Dataset`], whose validation guarantees at least [`MIN_YEARS`] years.
    pub(crate) fn latest(&self) -> &FiscalYear {
        &self.years[self.years.len() - 1]
    }

    /// The last `n` fiscal years (fewer if the company has fewer).
    pub fn trailing(&self, n: usize) -> &[FiscalYear] {
        &self.years[self.years.len().saturating_sub(n)..]
    }
}

/// Upper-cased, trimmed ticker: the key companies are stored under.
pub fn normalize_ticker(ticker: &str) -> String {
    ticker.trim().to_ascii_uppercase()
}
