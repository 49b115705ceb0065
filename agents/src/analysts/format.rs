//! Human-readable figures for key figures, evidence and reports.

/// `0.2912` → `29.1%`.
pub fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// `0.235` → `+23.5%`.
pub fn signed_pct(x: f64) -> String {
    format!("{:+.1}%", x * 100.0)
}

/// A fraction difference in percentage points: `0.032` → `+3.2 pts`.
pub fn pts(x: f64) -> String {
    format!("{:+.1} pts", x * 100.0)
}

/// `2.134` → `2.1×`.
pub fn times(x: f64) -> String {
    format!("{x:.1}×")
}

/// Millions with thousands separators: `12345.6` → `$12,346M`.
pub fn money_m(x: f64) -> String {
    let sign = if x < 0.0 { "-" } else { "" };
    format!("{sign}${}M", group(x.abs().round() as u64))
}

/// A per-share price: `123.456` → `$123.46`.
pub fn price(x: f64) -> String {
    let sign = if x < 0.0 { "-" } else { "" };
    let cents = (x.abs() * 100.0).round() as u64;
    format!("{sign}${}.{:02}", group(cents / 100), cents % 100)
}

fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(pct(0.2912), "29.1%");
        assert_eq!(signed_pct(-0.05), "-5.0%");
        assert_eq!(pts(0.032), "+3.2 pts");
        assert_eq!(money_m(1234567.4), "$1,234,567M");
        assert_eq!(money_m(-999.0), "-$999M");
        assert_eq!(price(1234.5), "$1,234.50");
        assert_eq!(price(0.004), "$0.00");
    }
}
