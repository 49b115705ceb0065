//! The CSV form of the fundamentals data set: one row per ticker and year,
//! read with the `csv` crate into [`Row`]s by header name. Header names
//! ignore case and surrounding blanks, cells surrounding blanks; blank
//! lines and lines starting with `#` are skipped; `name` is optional and
//! unknown columns are ignored.

use std::collections::BTreeMap;

use csv::{DeserializeErrorKind, ReaderBuilder, StringRecord, Trim};
use serde::Deserialize;

use super::company::{normalize_ticker, Company, DatasetError, FiscalYear};

/// Columns every file must have, in the order a missing one is named.
const REQUIRED: [&str; 15] = [
    "ticker",
    "sector",
    "price",
    "fiscal_year",
    "revenue",
    "gross_profit",
    "operating_income",
    "net_income",
    "capex",
    "operating_cash_flow",
    "depreciation",
    "total_debt",
    "cash",
    "shares_outstanding",
    "invested_capital",
];

/// One row: a company's figures for one fiscal year (currency amounts in
/// the file's unit, shares in units).
#[derive(Debug, Deserialize)]
struct Row {
    /// Ticker as written (normalised when read).
    ticker: String,
    /// Company name (optional column).
    #[serde(default)]
    name: String,
    /// Sector.
    sector: String,
    /// Share price.
    price: f64,
    /// Fiscal year, e.g. 2024.
    fiscal_year: i32,
    /// Revenue.
    revenue: f64,
    /// Gross profit.
    gross_profit: f64,
    /// Operating income.
    operating_income: f64,
    /// Net income.
    net_income: f64,
    /// Capital expenditure.
    capex: f64,
    /// Operating cash flow.
    operating_cash_flow: f64,
    /// Depreciation and amortisation.
    depreciation: f64,
    /// Total debt.
    total_debt: f64,
    /// Cash and equivalents.
    cash: f64,
    /// Shares outstanding.
    shares_outstanding: f64,
    /// Invested capital.
    invested_capital: f64,
}

impl Row {
    fn year(&self) -> FiscalYear {
        FiscalYear {
            fiscal_year: self.fiscal_year,
            revenue: self.revenue,
            gross_profit: self.gross_profit,
            operating_income: self.operating_income,
            net_income: self.net_income,
            capex: self.capex,
            operating_cash_flow: self.operating_cash_flow,
            depreciation: self.depreciation,
            total_debt: self.total_debt,
            cash: self.cash,
            shares_outstanding: self.shares_outstanding,
            invested_capital: self.invested_capital,
        }
    }
}

/// `text` with comment and blank lines emptied, so the reader skips them
/// and line numbers stay those of the file.
fn without_comments(text: &str) -> String {
    text.lines()
        .map(|l| {
            let t = l.trim();
            if t.is_empty() || t.starts_with('#') {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why `record` does not read as a [`Row`], in the file's words.
fn row_error(e: &csv::Error, headers: &StringRecord, record: &StringRecord) -> String {
    let Some(de) = (match e.kind() {
        csv::ErrorKind::Deserialize { err, .. } => Some(err),
        _ => None,
    }) else {
        return e.to_string();
    };
    let Some(i) = de.field().map(|i| i as usize) else {
        return de.to_string();
    };
    let column = headers.get(i).unwrap_or("?");
    let raw = record.get(i).unwrap_or("");
    match de.kind() {
        DeserializeErrorKind::ParseInt(_) if column == "fiscal_year" => {
            format!("column fiscal_year: {raw:?} is not a year")
        }
        DeserializeErrorKind::ParseInt(_) | DeserializeErrorKind::ParseFloat(_) => {
            format!("column {column}: {raw:?} is not a number")
        }
        _ => format!("column {column}: {de}"),
    }
}

/// Parses the whole file into companies (not yet validated).
pub(crate) fn parse_companies(text: &str, origin: &str) -> Result<Vec<Company>, DatasetError> {
    let err = |line: u64, reason: String| DatasetError::Csv {
        origin: origin.to_string(),
        line: line as usize,
        reason,
    };
    let text = without_comments(text);
    let mut reader = ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(Trim::All)
        .from_reader(text.as_bytes());
    // A record's position is where the reader started looking for it, before
    // the blank lines it skipped (which its line count leaves out too): the
    // line is that of its first character.
    let newlines: Vec<usize> = text.match_indices('\n').map(|(i, _)| i).collect();
    let line_at = |p: Option<&csv::Position>| {
        let start = p.map_or(0, |p| p.byte() as usize).min(text.len());
        let first = text[start..]
            .find(|c| c != '\n' && c != '\r')
            .map_or(text.len(), |i| start + i);
        newlines.partition_point(|n| *n < first) as u64 + 1
    };
    let line_of = |r: &StringRecord| line_at(r.position());
    let mut records = reader.records();
    let header = match records.next() {
        None => return Err(err(1, "empty file: expected a header row".to_string())),
        Some(r) => r.map_err(|e| err(line_at(e.position()), e.to_string()))?,
    };
    let headers: StringRecord = header.iter().map(str::to_ascii_lowercase).collect();
    if let Some(name) = REQUIRED.iter().find(|n| !headers.iter().any(|h| h == **n)) {
        return Err(err(line_of(&header), format!("missing column {name:?}")));
    }

    let mut companies: BTreeMap<String, Company> = BTreeMap::new();
    for record in records {
        let mut record = record.map_err(|e| err(line_at(e.position()), e.to_string()))?;
        let line = line_of(&record);
        // A short row reads its missing cells as blank, as before.
        while record.len() < headers.len() {
            record.push_field("");
        }
        let row: Row = record
            .deserialize(Some(&headers))
            .map_err(|e| err(line, row_error(&e, &headers, &record)))?;
        let ticker = normalize_ticker(&row.ticker);
        if ticker.is_empty() {
            return Err(err(line, "empty ticker".to_string()));
        }
        let year = row.year();
        match companies.get_mut(&ticker) {
            Some(c) => {
                if c.sector != row.sector || c.price != row.price || c.name != row.name {
                    return Err(err(
                        line,
                        format!("{ticker}: name, sector and price must be the same on every row"),
                    ));
                }
                c.years.push(year);
            }
            None => {
                companies.insert(
                    ticker.clone(),
                    Company {
                        ticker,
                        name: row.name,
                        sector: row.sector,
                        price: row.price,
                        years: vec![year],
                    },
                );
            }
        }
    }
    Ok(companies.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::parse_companies;

    const HEADER: &str = "Ticker , name,sector,price,fiscal_year,revenue,gross_profit,operating_income,net_income,capex,operating_cash_flow,depreciation,total_debt,cash,shares_outstanding,invested_capital,extra";

    #[test]
    fn reads_quoted_fields_by_header_name() {
        let text = format!(
            "# comment\n\n{HEADER}\n  # another\nAAPL,\"Apple, Inc. \"\"say hi\"\"\",Tech,3,2024,1,1,1,1,1,1,1,1,1,1,1,x\n"
        );
        let c = parse_companies(&text, "t").unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].name, r#"Apple, Inc. "say hi""#);
        assert_eq!((c[0].ticker.as_str(), c[0].price), ("AAPL", 3.0));
    }

    #[test]
    fn errors_name_the_line_and_the_column() {
        let short = format!("{HEADER}\n\nAAPL,A,Tech,3,2024,1,1\n");
        let e = parse_companies(&short, "t").unwrap_err().to_string();
        assert!(
            e.contains("line 3") && e.contains("column operating_income"),
            "{e}"
        );
        let year = format!("{HEADER}\nAAPL,A,Tech,3,FY24,1,1,1,1,1,1,1,1,1,1,1\n");
        let e = parse_companies(&year, "t").unwrap_err().to_string();
        assert!(e.contains("\"FY24\" is not a year"), "{e}");
        let e = parse_companies("# only\n", "t").unwrap_err().to_string();
        assert!(e.contains("line 1: empty file"), "{e}");
    }
}
