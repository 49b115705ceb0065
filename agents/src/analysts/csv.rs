//! The CSV form of the fundamentals data set: one row per ticker and year.
//!
//! A deliberately small reader (no dependency) for the documented columns.

use std::collections::BTreeMap;

use super::company::{normalize_ticker, Company, DatasetError, FiscalYear};

/// Columns that carry numbers for one fiscal year, in [`FiscalYear`] order.
const YEAR_COLUMNS: [&str; 11] = [
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

/// Columns every file must have (`name` is optional).
const REQUIRED: [&str; 4] = ["ticker", "sector", "price", "fiscal_year"];

struct Row {
    line: usize,
    fields: Vec<String>,
}

/// Parses the whole file into companies (not yet validated).
pub(crate) fn parse_companies(text: &str, origin: &str) -> Result<Vec<Company>, DatasetError> {
    let err = |line: usize, reason: String| DatasetError::Csv {
        origin: origin.to_string(),
        line,
        reason,
    };
    let mut rows = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let fields = split_line(raw).map_err(|r| err(i + 1, r))?;
        rows.push(Row {
            line: i + 1,
            fields,
        });
    }
    let mut rows = rows.into_iter();
    let header = rows
        .next()
        .ok_or_else(|| err(1, "empty file: expected a header row".to_string()))?;
    let index: BTreeMap<String, usize> = header
        .fields
        .iter()
        .enumerate()
        .map(|(i, h)| (h.trim().to_ascii_lowercase(), i))
        .collect();
    let col = |name: &str| -> Result<usize, DatasetError> {
        index
            .get(name)
            .copied()
            .ok_or_else(|| err(header.line, format!("missing column {name:?}")))
    };
    for name in REQUIRED.iter().chain(YEAR_COLUMNS.iter()) {
        col(name)?;
    }
    let name_col = index.get("name").copied();

    let mut companies: BTreeMap<String, Company> = BTreeMap::new();
    for row in rows {
        let cell = |c: usize| row.fields.get(c).map(|s| s.trim()).unwrap_or("");
        let number = |name: &str| -> Result<f64, DatasetError> {
            let raw = cell(col(name)?);
            raw.parse::<f64>()
                .map_err(|_| err(row.line, format!("column {name}: {raw:?} is not a number")))
        };
        let ticker = normalize_ticker(cell(col("ticker")?));
        if ticker.is_empty() {
            return Err(err(row.line, "empty ticker".to_string()));
        }
        let fy = cell(col("fiscal_year")?);
        let fiscal_year = fy.parse::<i32>().map_err(|_| {
            err(
                row.line,
                format!("column fiscal_year: {fy:?} is not a year"),
            )
        })?;
        let v: Vec<f64> = YEAR_COLUMNS
            .iter()
            .map(|c| number(c))
            .collect::<Result<_, _>>()?;
        let year = FiscalYear {
            fiscal_year,
            revenue: v[0],
            gross_profit: v[1],
            operating_income: v[2],
            net_income: v[3],
            capex: v[4],
            operating_cash_flow: v[5],
            depreciation: v[6],
            total_debt: v[7],
            cash: v[8],
            shares_outstanding: v[9],
            invested_capital: v[10],
        };
        let sector = cell(col("sector")?).to_string();
        let price = number("price")?;
        let name = name_col.map(|c| cell(c).to_string()).unwrap_or_default();
        match companies.get_mut(&ticker) {
            Some(c) => {
                if c.sector != sector || c.price != price || c.name != name {
                    return Err(err(
                        row.line,
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
                        name,
                        sector,
                        price,
                        years: vec![year],
                    },
                );
            }
        }
    }
    Ok(companies.into_values().collect())
}

/// Splits one line on commas, honouring double quotes (`""` = a quote).
fn split_line(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut in_quotes = false;
    let mut chars = line.chars().peekable();
    while let Some(ch) = chars.next() {
        match (ch, in_quotes) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            ('"', true) => in_quotes = false,
            ('"', false) if cur.trim().is_empty() => {
                cur.clear();
                in_quotes = true;
            }
            (',', false) => fields.push(std::mem::take(&mut cur)),
            _ => cur.push(ch),
        }
    }
    if in_quotes {
        return Err("unterminated quoted field".to_string());
    }
    fields.push(cur);
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::split_line;

    #[test]
    fn splits_quoted_fields() {
        assert_eq!(
            split_line(r#"AAPL,"Apple, Inc.","say ""hi""",3"#).unwrap(),
            vec!["AAPL", "Apple, Inc.", r#"say "hi""#, "3"]
        );
        assert!(split_line(r#"a,"b"#).is_err());
    }
}
