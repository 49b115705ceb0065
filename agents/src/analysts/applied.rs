//! Findings other agents and outside services addressed to valuation
//! (`inputs.findings`, see [`caucus_shared::inbound`]) that change its
//! projections.
//!
//! A finding concerns cash flow when its `finding` or `impact` text names
//! capex or cash flow ([`CASH_FLOW_TERMS`], case-insensitive). Each such
//! finding is read as a caution about future cash needs: it raises the
//! reinvestment ratio (capex ÷ depreciation) by the factor
//! `1 + CAPEX_STEP × confidence` (confidence from the finding, 0..=1;
//! [`DEFAULT_CONFIDENCE`] when it gives none), one after another in the
//! order received (oldest first), so more capex lowers free cash flow and the
//! target price. Every applied finding is listed as an
//! [`AppliedFinding`] naming the change; the worker turns the list into
//! the confirmations the senders asked for. Other findings are not applied
//! and not listed.

use serde::Deserialize;

use caucus_shared::inbound::{AppliedFinding, InputFinding};
use caucus_shared::outputs::lenient;

/// Words that make a finding one about cash flow or capex (matched
/// case-insensitively in its `finding` and `impact`).
pub const CASH_FLOW_TERMS: [&str; 5] = [
    "capex",
    "capital expenditure",
    "cash flow",
    "fcf",
    "free cash flow",
];

/// How much one finding of full confidence raises the reinvestment ratio
/// (15 %): factor = 1 + `CAPEX_STEP` × confidence.
pub const CAPEX_STEP: f64 = 0.15;

/// The confidence assumed for a finding that gives none (or one outside
/// 0..=1).
pub const DEFAULT_CONFIDENCE: f64 = 0.5;

/// The part of a finding's content read here besides its text and impact
/// (read leniently: the sender is any service).
#[derive(Debug, Default, Deserialize)]
struct FindingConfidence {
    /// How sure the sender is, 0..=1.
    #[serde(default, deserialize_with = "lenient")]
    confidence: Option<f64>,
}

/// The reinvestment ratio after the findings, and what changed it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CapexAdjustment {
    /// Capex ÷ depreciation to project with.
    pub ratio: f64,
    /// The findings applied, in order, each with the change it made.
    pub applied: Vec<AppliedFinding>,
}

/// True when the finding's text or impact names capex or cash flow.
pub(crate) fn concerns_cash_flow(f: &InputFinding) -> bool {
    let text = format!("{} {}", f.text(), f.impact().unwrap_or_default()).to_lowercase();
    CASH_FLOW_TERMS.iter().any(|t| text.contains(t))
}

/// The sender's confidence, or [`DEFAULT_CONFIDENCE`].
fn confidence(f: &InputFinding) -> f64 {
    FindingConfidence::deserialize(&f.content)
        .ok()
        .and_then(|c| c.confidence)
        .filter(|c| (0.0..=1.0).contains(c))
        .unwrap_or(DEFAULT_CONFIDENCE)
}

/// Applies the cash-flow findings among `findings` to `base_ratio`.
pub(crate) fn adjust_capex(findings: &[InputFinding], base_ratio: f64) -> CapexAdjustment {
    let mut ratio = base_ratio;
    let mut applied = Vec::new();
    for f in findings.iter().filter(|f| concerns_cash_flow(f)) {
        let conf = confidence(f);
        let was = ratio;
        ratio *= 1.0 + CAPEX_STEP * conf;
        let what = if f.text().is_empty() {
            f.impact().unwrap_or(&f.id)
        } else {
            f.text()
        };
        applied.push(AppliedFinding {
            finding_id: f.id.clone(),
            how: format!(
                "raised capex to {ratio:.2}× depreciation (was {was:.2}×) per {}: {what}, confidence {conf:.2}",
                f.from_agent
            ),
        });
    }
    CapexAdjustment { ratio, applied }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caucus_shared::envelope::Priority;
    use serde_json::{json, Value};

    fn finding(id: &str, content: Value) -> InputFinding {
        InputFinding {
            id: id.into(),
            from_agent: "financial_analyst".into(),
            to_agent: "valuation_agent".into(),
            priority: Priority::High,
            requires_response: true,
            content,
            stored_at: "2026-01-01T00:00:00Z".parse().unwrap(),
        }
    }

    #[test]
    fn cash_flow_terms_match_text_or_impact_in_any_case() {
        let seed = finding(
            "a",
            json!({"finding": "Abnormal capex increase", "impact": "Adjust FCF projections"}),
        );
        assert!(concerns_cash_flow(&seed));
        let by_impact = finding(
            "b",
            json!({"finding": "Plant expansion", "impact": "Lower Free Cash Flow"}),
        );
        assert!(concerns_cash_flow(&by_impact));
        let upper = finding("c", json!({"finding": "CAPITAL EXPENDITURE doubled"}));
        assert!(concerns_cash_flow(&upper));
        let other = finding(
            "d",
            json!({"finding": "New CEO appointed", "impact": "Watch guidance"}),
        );
        assert!(!concerns_cash_flow(&other));
    }

    #[test]
    fn factor_scales_with_confidence_and_says_so() {
        let f = finding(
            "f1",
            json!({"finding": "Abnormal capex increase", "confidence": 0.85}),
        );
        let adj = adjust_capex(&[f], 1.0);
        assert!((adj.ratio - 1.1275).abs() < 1e-12);
        assert_eq!(adj.applied.len(), 1);
        assert_eq!(adj.applied[0].finding_id, "f1");
        assert_eq!(
            adj.applied[0].how,
            "raised capex to 1.13× depreciation (was 1.00×) per financial_analyst: Abnormal capex increase, confidence 0.85"
        );
    }

    #[test]
    fn unrelated_findings_are_not_applied_and_odd_confidence_defaults() {
        let fs = [
            finding("x", json!({"finding": "New CEO appointed"})),
            finding("y", json!({"finding": "FCF at risk", "confidence": "high"})),
        ];
        let adj = adjust_capex(&fs, 2.0);
        assert_eq!(adj.applied.len(), 1);
        assert_eq!(adj.applied[0].finding_id, "y");
        assert!((adj.ratio - 2.0 * (1.0 + CAPEX_STEP * DEFAULT_CONFIDENCE)).abs() < 1e-12);
        assert!(adjust_capex(&fs[..1], 2.0).applied.is_empty());
        assert_eq!(adjust_capex(&fs[..1], 2.0).ratio, 2.0);
    }
}
