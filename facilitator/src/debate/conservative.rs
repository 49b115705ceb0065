//! Level 4: the conservative default (seed: lowest price target, highest
//! risk assessment, most conservative assumption, most skeptical view; a
//! decision tree when positions are not directly comparable).
//!
//! Decision rule, in order:
//! 1. **Same numeric metric** (or only one side names the metric): the
//!    metric's direction decides. Metrics naming risk, discount rate, WACC,
//!    beta, volatility, default, cost of capital, leverage, downside,
//!    drawdown or loss are conservative when *higher*; metrics naming a
//!    price, target, value, margin, growth, revenue, earnings, EPS, upside,
//!    multiple, return, cash flow, sales, ROI or ROE are conservative when
//!    *lower*. Equal values agree: the challenged position stands.
//! 2. **Both are ratings** (strong sell … strong buy): the more bearish one.
//! 3. **Otherwise not comparable** (different metrics, unknown direction,
//!    text): the most skeptical view, which is not to rely on the disputed
//!    finding, so the challenger's position applies; when the challenger
//!    stated none, the finding is withheld pending review.

use caucus_shared::messages::Position;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::side::Side;

/// The conservative default and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConservativeChoice {
    /// Whose position it is (none when the finding is withheld).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub side: Option<Side>,
    /// The position applied provisionally.
    pub position: Position,
    /// Which branch of the decision rule chose it, e.g. `lowest:target_price`.
    pub rule: String,
    /// The rationale in words.
    pub rationale: String,
    /// Positions considered but not applied.
    pub alternatives: Vec<Position>,
}

/// Direction in which a metric is conservative.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Lower is more cautious (price targets, margins, growth).
    Lower,
    /// Higher is more cautious (risk, discount rates).
    Higher,
}

const HIGHER: &[&str] = &[
    "risk",
    "discount",
    "wacc",
    "beta",
    "volatility",
    "default",
    "cost_of",
    "leverage",
    "downside",
    "drawdown",
    "loss",
];
const LOWER: &[&str] = &[
    "price",
    "target",
    "value",
    "margin",
    "growth",
    "revenue",
    "earnings",
    "eps",
    "upside",
    "multiple",
    "return",
    "cash_flow",
    "fcf",
    "sales",
    "roi",
    "roe",
];

/// The conservative direction of `metric`, if known.
pub fn direction(metric: &str) -> Option<Direction> {
    let m = metric.to_ascii_lowercase().replace([' ', '-'], "_");
    if HIGHER.iter().any(|k| m.contains(k)) {
        Some(Direction::Higher)
    } else if LOWER.iter().any(|k| m.contains(k)) {
        Some(Direction::Lower)
    } else {
        None
    }
}

/// A position's value as a number: JSON numbers, or strings such as
/// `"25%"`, `"$85"`, `"1,200"`.
pub fn numeric(value: Option<&Value>) -> Option<f64> {
    match value? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => {
            let cleaned: String = s
                .chars()
                .filter(|c| !matches!(c, '%' | '$' | ',' | ' ' | '€' | '£'))
                .collect();
            cleaned.parse::<f64>().ok().filter(|v| v.is_finite())
        }
        _ => None,
    }
}

/// Position on the bearish → bullish rating scale.
pub fn rating_rank(value: Option<&Value>) -> Option<u8> {
    let s = value?
        .as_str()?
        .to_ascii_lowercase()
        .replace([' ', '-'], "_");
    Some(match s.as_str() {
        "strong_sell" => 0,
        "sell" => 1,
        "underperform" | "underweight" | "reduce" => 2,
        "hold" | "neutral" | "market_perform" | "equal_weight" => 3,
        "outperform" | "overweight" | "accumulate" => 4,
        "buy" => 5,
        "strong_buy" => 6,
        _ => return None,
    })
}

fn pick(
    side: Side,
    chosen: &Position,
    other: &Position,
    rule: String,
    rationale: String,
) -> ConservativeChoice {
    ConservativeChoice {
        side: Some(side),
        position: chosen.clone(),
        rule,
        rationale,
        alternatives: vec![other.clone()],
    }
}

/// Chooses the conservative default between the two positions of a debate
/// over `disputed_finding`.
pub fn choose(
    disputed_finding: &str,
    challenger: Option<&Position>,
    challenged: Option<&Position>,
) -> ConservativeChoice {
    let (a, b) = match (challenger, challenged) {
        (Some(a), Some(b)) => (a, b),
        (Some(a), None) => {
            return ConservativeChoice {
                side: Some(Side::Challenger),
                position: a.clone(),
                rule: "skeptical:challenger_position".into(),
                rationale: format!(
                    "the disputed finding `{disputed_finding}` has no comparable stated position; the skeptical view is the challenger's"
                ),
                alternatives: Vec::new(),
            }
        }
        (None, b) => {
            let withheld = Position {
                statement: format!("not relied upon pending review: {disputed_finding}"),
                metric: b.and_then(|p| p.metric.clone()),
                value: None,
                confidence: None,
                evidence: Vec::new(),
            };
            return ConservativeChoice {
                side: None,
                position: withheld,
                rule: "skeptical:withhold_finding".into(),
                rationale: format!(
                    "the challenger stated no alternative; the most skeptical view is not to rely on `{disputed_finding}` until review"
                ),
                alternatives: b.into_iter().cloned().collect(),
            };
        }
    };
    let metric = match (&a.metric, &b.metric) {
        (Some(x), Some(y)) if x.eq_ignore_ascii_case(y) => Some(x.clone()),
        (Some(x), None) | (None, Some(x)) => Some(x.clone()),
        _ => None,
    };
    if let (Some(m), Some(va), Some(vb)) = (
        &metric,
        numeric(a.value.as_ref()),
        numeric(b.value.as_ref()),
    ) {
        if let Some(dir) = direction(m) {
            if va == vb {
                return pick(
                    Side::Challenged,
                    b,
                    a,
                    format!("equal:{m}"),
                    format!("both positions put {m} at {vb}; the challenged position stands"),
                );
            }
            let challenger_wins = match dir {
                Direction::Lower => va < vb,
                Direction::Higher => va > vb,
            };
            let (side, chosen, other, cv, ov) = if challenger_wins {
                (Side::Challenger, a, b, va, vb)
            } else {
                (Side::Challenged, b, a, vb, va)
            };
            let (rule, word) = match dir {
                Direction::Lower => (format!("lowest:{m}"), "lower"),
                Direction::Higher => (format!("highest:{m}"), "higher"),
            };
            return pick(
                side,
                chosen,
                other,
                rule,
                format!(
                    "{m}: {cv} is the more conservative value ({word} is more cautious) than {ov}; the {} position applies",
                    side.as_str()
                ),
            );
        }
    }
    if let (Some(ra), Some(rb)) = (rating_rank(a.value.as_ref()), rating_rank(b.value.as_ref())) {
        let side = if ra < rb {
            Side::Challenger
        } else {
            Side::Challenged
        };
        let (chosen, other) = if ra < rb { (a, b) } else { (b, a) };
        return pick(
            side,
            chosen,
            other,
            "most_bearish_rating".into(),
            format!(
                "rating {} is more bearish than {}",
                chosen
                    .value
                    .as_ref()
                    .map_or(String::new(), Value::to_string),
                other.value.as_ref().map_or(String::new(), Value::to_string)
            ),
        );
    }
    pick(
        Side::Challenger,
        a,
        b,
        "skeptical:challenger_position".into(),
        format!(
            "positions are not directly comparable ({} vs {}); the most skeptical view does not rely on the disputed finding `{disputed_finding}`, so the challenger's position applies",
            a.metric.as_deref().unwrap_or("no metric"),
            b.metric.as_deref().unwrap_or("no metric")
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pos(statement: &str, metric: Option<&str>, value: Value) -> Position {
        Position {
            statement: statement.into(),
            metric: metric.map(str::to_string),
            value: (!value.is_null()).then_some(value),
            confidence: None,
            evidence: vec![],
        }
    }

    #[test]
    fn lowest_margin_and_price_target() {
        let fin = pos(
            "25% operating margin",
            Some("operating_margin"),
            json!(0.25),
        );
        let strat = pos(
            "30% operating margin",
            Some("operating_margin"),
            json!(0.30),
        );
        let c = choose("margin", Some(&strat), Some(&fin));
        assert_eq!(c.side, Some(Side::Challenged));
        assert_eq!(c.position, fin);
        assert_eq!(c.rule, "lowest:operating_margin");
        assert_eq!(c.alternatives, vec![strat]);
        let low = pos("$80", Some("target_price"), json!("$80"));
        let high = pos("$95", None, json!(95));
        assert_eq!(
            choose("tp", Some(&low), Some(&high)).side,
            Some(Side::Challenger)
        );
    }

    #[test]
    fn highest_risk() {
        let a = pos("risk 0.4", Some("risk_score"), json!(0.4));
        let b = pos("risk 0.6", Some("risk_score"), json!(0.6));
        let c = choose("risk", Some(&a), Some(&b));
        assert_eq!(c.side, Some(Side::Challenged));
        assert_eq!(c.rule, "highest:risk_score");
        assert_eq!(direction("WACC"), Some(Direction::Higher));
    }

    #[test]
    fn most_bearish_rating() {
        let a = pos("buy", Some("rating"), json!("Buy"));
        let b = pos("hold", Some("rating"), json!("hold"));
        let c = choose("rating", Some(&a), Some(&b));
        assert_eq!(c.side, Some(Side::Challenged));
        assert_eq!(c.rule, "most_bearish_rating");
    }

    #[test]
    fn incomparable_positions_take_the_skeptical_view() {
        let a = pos(
            "ROI declining despite claims",
            Some("roi_trend"),
            json!("declining"),
        );
        let b = pos(
            "Management effective",
            Some("management_quality"),
            json!("strong"),
        );
        let c = choose("Management effectiveness", Some(&a), Some(&b));
        assert_eq!(c.side, Some(Side::Challenger));
        assert_eq!(c.rule, "skeptical:challenger_position");
        let w = choose("Management effectiveness", None, Some(&b));
        assert_eq!(w.side, None);
        assert_eq!(w.rule, "skeptical:withhold_finding");
        assert!(w.position.statement.contains("Management effectiveness"));
    }

    #[test]
    fn numbers_parse_leniently() {
        assert_eq!(numeric(Some(&json!("25%"))), Some(25.0));
        assert_eq!(numeric(Some(&json!("$1,200"))), Some(1200.0));
        assert_eq!(numeric(Some(&json!("n/a"))), None);
    }
}
