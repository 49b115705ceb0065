//! Company fundamentals the built-in analysts read.
//!
//! The bundled file `agents/data/fundamentals.json` is **synthetic**: it was
//! produced by a deterministic generator to look plausible for the named
//! companies (scale, sector, margins) and is *not* real financial data. Its
//! top-level `_source` note says so and every report repeats it.
//!
//! Users can point the worker at their own figures with [`Dataset::from_path`]:
//!
//! - **JSON**: the bundled shape, `{"_source": "...", "companies": [{"ticker",
//!   "name", "sector", "price", "years": [{"fiscal_year", "revenue", ...}]}]}`.
//! - **CSV**: one row per ticker and fiscal year, with a header row naming the
//!   columns (any order, extra columns ignored): `ticker, name (optional),
//!   sector, price, fiscal_year, revenue, gross_profit, operating_income,
//!   net_income, capex, operating_cash_flow, depreciation, total_debt, cash,
//!   shares_outstanding, invested_capital`. `name`, `sector` and `price` must
//!   be the same on every row of a ticker. Fields may be double-quoted (`""`
//!   escapes a quote); a quoted field cannot span lines. Blank lines and lines
//!   starting with `#` are skipped.
//!
//! Money is in millions (any currency, used consistently), shares in millions,
//! price per share. Capex is a positive amount spent.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

/// The bundled synthetic data set, compiled into the binary.
pub const BUNDLED_JSON: &str = include_str!("../../data/fundamentals.json");

/// Origin label of the bundled data set.
pub const BUNDLED_ORIGIN: &str = "bundled:agents/data/fundamentals.json";

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

    fn values(&self) -> [(&'static str, f64); 11] {
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

/// A set of companies, looked up by ticker.
#[derive(Debug, Clone, PartialEq)]
pub struct Dataset {
    origin: String,
    note: String,
    companies: BTreeMap<String, Company>,
}

#[derive(Deserialize)]
struct JsonFile {
    #[serde(rename = "_source", default)]
    source: Option<String>,
    companies: Vec<Company>,
}

/// Upper-cased, trimmed ticker: the key companies are stored under.
pub fn normalize_ticker(ticker: &str) -> String {
    ticker.trim().to_ascii_uppercase()
}

impl Dataset {
    /// The bundled synthetic data set, parsed once per process.
    pub fn bundled() -> Result<&'static Dataset, DatasetError> {
        static BUNDLED: OnceLock<Result<Dataset, DatasetError>> = OnceLock::new();
        BUNDLED
            .get_or_init(|| Dataset::from_json_str(BUNDLED_JSON, BUNDLED_ORIGIN))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Loads a `.json` (bundled shape) or `.csv` (one row per ticker-year) file.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Dataset, DatasetError> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        let parse: fn(&str, &str) -> Result<Dataset, DatasetError> = match ext.as_deref() {
            Some("json") => Dataset::from_json_str,
            Some("csv") => Dataset::from_csv_str,
            _ => return Err(DatasetError::UnsupportedFormat { origin }),
        };
        let text = std::fs::read_to_string(path).map_err(|e| DatasetError::Read {
            path: origin.clone(),
            reason: e.to_string(),
        })?;
        parse(&text, &origin)
    }

    /// Parses the JSON shape; `origin` names the source in errors and reports.
    pub fn from_json_str(text: &str, origin: &str) -> Result<Dataset, DatasetError> {
        let file: JsonFile = serde_json::from_str(text).map_err(|e| DatasetError::Json {
            origin: origin.to_string(),
            reason: e.to_string(),
        })?;
        let note = file
            .source
            .unwrap_or_else(|| format!("user-supplied data from {origin}"));
        Dataset::build(origin, note, file.companies)
    }

    /// Parses the CSV shape (see the module docs for the columns).
    pub fn from_csv_str(text: &str, origin: &str) -> Result<Dataset, DatasetError> {
        let companies = super::csv::parse_companies(text, origin)?;
        Dataset::build(origin, format!("user-supplied CSV {origin}"), companies)
    }

    fn build(origin: &str, note: String, companies: Vec<Company>) -> Result<Dataset, DatasetError> {
        let mut map = BTreeMap::new();
        for mut company in companies {
            company.ticker = normalize_ticker(&company.ticker);
            if company.name.trim().is_empty() {
                company.name = company.ticker.clone();
            }
            company.years.sort_by_key(|y| y.fiscal_year);
            validate(origin, &company)?;
            let ticker = company.ticker.clone();
            if map.insert(ticker.clone(), company).is_some() {
                return Err(invalid(origin, &ticker, "ticker appears more than once"));
            }
        }
        if map.is_empty() {
            return Err(DatasetError::Json {
                origin: origin.to_string(),
                reason: "no companies".to_string(),
            });
        }
        Ok(Dataset {
            origin: origin.to_string(),
            note,
            companies: map,
        })
    }

    /// The company for `ticker` (case-insensitive), or [`DatasetError::UnknownTicker`].
    pub fn company(&self, ticker: &str) -> Result<&Company, DatasetError> {
        let key = normalize_ticker(ticker);
        self.companies
            .get(&key)
            .ok_or_else(|| DatasetError::UnknownTicker {
                ticker: key,
                origin: self.origin.clone(),
            })
    }

    /// All tickers, sorted.
    pub fn tickers(&self) -> Vec<&str> {
        self.companies.keys().map(String::as_str).collect()
    }

    /// Where the data came from (a path or the bundled label).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The data set's own description of its figures (the JSON `_source`).
    pub fn note(&self) -> &str {
        &self.note
    }

    /// True when the data set describes itself as synthetic.
    pub fn is_synthetic(&self) -> bool {
        self.note.to_ascii_lowercase().contains("synthetic")
    }
}

fn invalid(origin: &str, ticker: &str, reason: impl Into<String>) -> DatasetError {
    DatasetError::Invalid {
        origin: origin.to_string(),
        ticker: ticker.to_string(),
        reason: reason.into(),
    }
}

fn validate(origin: &str, c: &Company) -> Result<(), DatasetError> {
    let t = &c.ticker;
    if t.is_empty() || t.chars().any(char::is_whitespace) {
        return Err(invalid(
            origin,
            t,
            "ticker is empty or contains white space",
        ));
    }
    if c.sector.trim().is_empty() {
        return Err(invalid(origin, t, "sector is empty"));
    }
    if !(c.price.is_finite() && c.price > 0.0) {
        return Err(invalid(
            origin,
            t,
            format!("price {} is not positive", c.price),
        ));
    }
    if c.years.len() < MIN_YEARS {
        return Err(invalid(
            origin,
            t,
            format!(
                "has {} fiscal year(s), needs at least {MIN_YEARS}",
                c.years.len()
            ),
        ));
    }
    for pair in c.years.windows(2) {
        if pair[0].fiscal_year == pair[1].fiscal_year {
            return Err(invalid(
                origin,
                t,
                format!("fiscal year {} appears twice", pair[0].fiscal_year),
            ));
        }
    }
    for y in &c.years {
        for (field, v) in y.values() {
            if !v.is_finite() {
                return Err(invalid(
                    origin,
                    t,
                    format!("FY{} {field} is not a number", y.fiscal_year),
                ));
            }
        }
        let positive = [
            ("revenue", y.revenue),
            ("shares_outstanding", y.shares_outstanding),
            ("invested_capital", y.invested_capital),
        ];
        for (field, v) in positive {
            if v <= 0.0 {
                return Err(invalid(
                    origin,
                    t,
                    format!("FY{} {field} {v} must be positive", y.fiscal_year),
                ));
            }
        }
        let non_negative = [
            ("capex", y.capex),
            ("depreciation", y.depreciation),
            ("total_debt", y.total_debt),
            ("cash", y.cash),
        ];
        for (field, v) in non_negative {
            if v < 0.0 {
                return Err(invalid(
                    origin,
                    t,
                    format!("FY{} {field} {v} is negative", y.fiscal_year),
                ));
            }
        }
    }
    Ok(())
}
