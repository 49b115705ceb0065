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

use serde::Deserialize;

pub use super::company::{normalize_ticker, Company, DatasetError, FiscalYear, MIN_YEARS};

/// The bundled synthetic data set, compiled into the binary.
pub const BUNDLED_JSON: &str = include_str!("../../data/fundamentals.json");

/// Origin label of the bundled data set.
pub const BUNDLED_ORIGIN: &str = "bundled:agents/data/fundamentals.json";

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
