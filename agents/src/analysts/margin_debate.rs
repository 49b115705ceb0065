//! The built-in margin debate: the financial analyst's operating-margin
//! assumption (trailing 3-year average) against the strategy analyst's
//! (latest + trend × R²).
//!
//! * [`challenge`]: the seed-format challenge valuation publishes when the
//!   two differ by more than the configured gap (strategy challenges
//!   financial, priority `valuation`).
//! * [`evidence`]: what a challenged built-in analyst answers with: its
//!   computation, year by year.
//! * [`verdict`]: the challenger's deterministic rule. Over the evidence's
//!   yearly margins, the trend is *fading* when the latest yearly change is
//!   smaller in size than the average yearly change. A fading trend favours
//!   the trailing average (financial's method), a holding or accelerating
//!   one favours extrapolation (strategy's). The challenger accepts exactly
//!   when the evidence favours the challenged agent's method; otherwise it
//!   rejects and the facilitator escalates to level 2.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use caucus_shared::messages::Position;
use caucus_shared::outputs::{decode, lenient, to_value};

use super::dataset::Company;
use super::format::{pct, pts};
use super::metrics::{operating_margins, round};
use super::{financial, strategy, AnalystError};

/// The disputed metric.
pub const METRIC: &str = "operating_margin";
/// Agent type of the trailing-average view.
pub const FINANCIAL: &str = "financial";
/// Agent type of the trend view.
pub const STRATEGY: &str = "strategy";
/// Analyses that use the disputed margin.
pub const DOWNSTREAM: [&str; 2] = ["valuation", "report"];
/// Default gap (3 points) above which valuation opens the debate.
pub use super::context::DEFAULT_MARGIN_DEBATE_GAP as DEFAULT_GAP;
/// Seconds before the debate escalates (the seed's typical hour).
pub const ESCALATION_TIMER_S: u64 = 3600;

/// The deterministic debate id of a workflow's margin debate: a redelivered
/// or re-run valuation task names the same debate, so it opens once.
pub fn debate_id(workflow_id: &str) -> String {
    let clean: String = workflow_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(120)
        .collect();
    format!("margin-{clean}")
}

/// One side's margin view as valuation read it from the stage outputs.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    /// The assumed margin (fraction).
    pub value: f64,
    /// The analyst's confidence in it, when its finding gave one.
    pub confidence: Option<f64>,
}

/// What valuation knows when it opens the debate.
#[derive(Debug, Clone)]
pub struct ChallengeInput<'a> {
    /// The workflow.
    pub workflow_id: &'a str,
    /// The company.
    pub company: &'a Company,
    /// Financial's view (the challenged finding).
    pub financial: View,
    /// Strategy's view (the challenger's position).
    pub strategy: View,
    /// The gap that triggered it.
    pub threshold: f64,
    /// The current market regime, if any.
    pub regime: Option<String>,
    /// Both positions come from a synthetic data set (the bundled one):
    /// the facilitator then keeps the outcome out of the track records.
    pub synthetic: bool,
}

fn position(agent: &str, v: &View, company: &Company) -> Position {
    let statement = match agent {
        FINANCIAL => format!("{} operating margin (trailing 3-yr average)", pct(v.value)),
        _ => format!("{} operating margin (latest + trend × R²)", pct(v.value)),
    };
    Position {
        statement,
        metric: Some(METRIC.into()),
        value: Some(round(v.value, 6).into()),
        confidence: v.confidence,
        evidence: vec![format!(
            "{} {} operating-margin assumption for {}",
            agent,
            pct(v.value),
            company.ticker
        )],
    }
}

/// What the disputed figure is about.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChallengeContext {
    /// The company's sector.
    pub sector: String,
    /// Always [`METRIC`].
    pub metric: String,
    /// The fiscal year the margin is for (`FY2025`).
    pub horizon: String,
}

/// The margin debate's challenge content: the seed's Challenge Format plus
/// the facilitator's extensions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MarginChallenge {
    /// Same as `debate_id`.
    pub challenge_id: String,
    /// [`debate_id`] of the workflow.
    pub debate_id: String,
    /// [`STRATEGY`].
    pub challenger: String,
    /// [`FINANCIAL`].
    pub challenged: String,
    /// Financial's assumption, in words.
    pub disputed_finding: String,
    /// Why strategy disputes it, with the gap and the threshold.
    pub challenge_basis: String,
    /// What the challenged agent must show.
    pub required_evidence: Vec<String>,
    /// Seconds before the debate escalates.
    pub escalation_timer: u64,
    /// Always `valuation`.
    pub priority: String,
    /// Always `null`: the facilitator sets it.
    pub provisional_resolution: Option<Value>,
    /// Strategy's position.
    pub challenger_position: Position,
    /// Financial's position.
    pub challenged_position: Position,
    /// `<ticker>:operating_margin`.
    pub finding_key: String,
    /// The ticker.
    pub item: String,
    /// The workflow.
    pub workflow_id: String,
    /// What the figure is about.
    pub context: ChallengeContext,
    /// Analyses that use the disputed margin.
    pub downstream_dependencies: Vec<String>,
    /// The current market regime, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regime: Option<String>,
    /// From the synthetic bundled data set.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub synthetic: bool,
}

/// The challenge content (the seed's Challenge Format plus the facilitator's
/// extensions: positions, context, regime, downstream dependencies).
pub fn challenge(input: &ChallengeInput<'_>) -> Value {
    let c = input.company;
    let id = debate_id(input.workflow_id);
    let gap = input.strategy.value - input.financial.value;
    let fy = c.latest().fiscal_year;
    to_value(&MarginChallenge {
        challenge_id: id.clone(),
        debate_id: id,
        challenger: STRATEGY.into(),
        challenged: FINANCIAL.into(),
        disputed_finding: format!(
            "{} operating margin assumption {} (trailing 3-yr average)",
            c.ticker,
            pct(input.financial.value)
        ),
        challenge_basis: format!(
            "The margin trend puts FY{} at {}, {} from the trailing average (debate threshold {})",
            fy + 1,
            pct(input.strategy.value),
            pts(gap),
            pts(input.threshold)
        ),
        required_evidence: vec![
            "Operating margin by fiscal year".into(),
            "Trailing-average computation".into(),
        ],
        escalation_timer: ESCALATION_TIMER_S,
        priority: "valuation".into(),
        provisional_resolution: None,
        challenger_position: position(STRATEGY, &input.strategy, c),
        challenged_position: position(FINANCIAL, &input.financial, c),
        finding_key: format!("{}:{METRIC}", c.ticker),
        item: c.ticker.clone(),
        workflow_id: input.workflow_id.to_string(),
        context: ChallengeContext {
            sector: c.sector.clone(),
            metric: METRIC.into(),
            horizon: format!("FY{}", fy + 1),
        },
        downstream_dependencies: DOWNSTREAM.map(String::from).to_vec(),
        regime: input.regime.clone(),
        synthetic: input.synthetic,
    })
}

/// How a built-in analyst computed its margin, year by year.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Computation {
    /// `trailing_3yr_average` or `latest_plus_trend_x_r2`.
    pub method: String,
    /// Trailing average: the years averaged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trailing_years: Option<Vec<i32>>,
    /// Trailing average: standard deviation of those margins (fraction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdev: Option<f64>,
    /// Trend: slope per year (fraction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slope_per_year: Option<f64>,
    /// Trend: R² of the fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r_squared: Option<f64>,
    /// Trend: the latest year's margin (fraction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest: Option<f64>,
    /// Every fiscal year of the data set.
    pub fiscal_years: Vec<i32>,
    /// Each year's operating margin (fraction).
    pub margins: Vec<f64>,
    /// The method's result (fraction).
    pub value: f64,
}

/// The `debate_evidence` content a built-in analyst sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidenceContent {
    /// One line per year, then the method's result.
    pub evidence: Vec<String>,
    /// The analyst's position.
    pub position: Position,
    /// Always false: built-in analysts keep their view.
    pub revised: bool,
    /// What the method cannot see.
    pub limitations: Vec<String>,
    /// The computation behind it.
    pub computation: Computation,
}

/// A challenged built-in analyst's answer: its position and computation.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    /// The `debate_evidence` content without `debate_id`/`snapshot_id`.
    pub content: Value,
}

/// The evidence `agent` (financial or strategy) gives for its margin view
/// of `company`: every year's operating margin, then its method's result.
pub fn evidence(agent: &str, company: &Company) -> Result<Evidence, AnalystError> {
    let margins = operating_margins(company);
    let years: Vec<i32> = company.years.iter().map(|y| y.fiscal_year).collect();
    let mut lines: Vec<String> = years
        .iter()
        .zip(&margins)
        .map(|(y, m)| format!("FY{y} operating margin {}", pct(*m)))
        .collect();
    let (value, statement, computation, limitations) = match agent {
        FINANCIAL => {
            let a = financial::margin_assumption(company);
            lines.push(format!(
                "Trailing {}-yr average FY{}–FY{}: {} (std dev {:.1} pts)",
                a.years.len(),
                a.years.first().copied().unwrap_or_default(),
                a.years.last().copied().unwrap_or_default(),
                pct(a.value),
                a.stdev * 100.0
            ));
            (
                a.value,
                format!("{} operating margin (trailing 3-yr average)", pct(a.value)),
                Computation {
                    method: "trailing_3yr_average".into(),
                    trailing_years: Some(a.years.clone()),
                    stdev: Some(round(a.stdev, 6)),
                    ..Computation::default()
                },
                vec!["An average lags a margin that keeps trending".to_string()],
            )
        }
        STRATEGY => {
            let v = strategy::margin_view(company)?;
            lines.push(format!(
                "Trend {}/yr with R² {:.2}; latest {} + trend × R² = {}",
                pts(v.fit.slope),
                v.fit.r_squared,
                pct(v.latest),
                pct(v.value)
            ));
            (
                v.value,
                format!("{} operating margin (latest + trend × R²)", pct(v.value)),
                Computation {
                    method: "latest_plus_trend_x_r2".into(),
                    slope_per_year: Some(round(v.fit.slope, 6)),
                    r_squared: Some(round(v.fit.r_squared, 4)),
                    latest: Some(round(v.latest, 6)),
                    ..Computation::default()
                },
                vec!["Extrapolation assumes the trend holds one more year".to_string()],
            )
        }
        other => {
            return Err(AnalystError::bad_input(format!(
                "no built-in margin evidence for agent `{other}` (only {FINANCIAL} and {STRATEGY})"
            )))
        }
    };
    let computation = Computation {
        fiscal_years: years,
        margins: margins.iter().map(|m| round(*m, 6)).collect(),
        value: round(value, 6),
        ..computation
    };
    Ok(Evidence {
        content: to_value(&EvidenceContent {
            evidence: lines.clone(),
            position: Position {
                statement,
                metric: Some(METRIC.into()),
                value: Some(round(value, 6).into()),
                confidence: None,
                evidence: lines,
            },
            revised: false,
            limitations,
            computation,
        }),
    })
}

/// The challenger's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// True ends the debate at level 1.
    pub accepted: bool,
    /// The rule's reasoning, with the figures.
    pub reason: String,
}

/// The challenger is not a built-in margin analyst: it has no rule, so no
/// verdict is given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no built-in verdict rule for challenger `{challenger}`")]
pub struct NoVerdictRule {
    /// The challenger's agent type.
    pub challenger: String,
}

/// The part of any agent's `debate_evidence` content the rule reads.
#[derive(Debug, Clone, Default, Deserialize)]
struct EvidenceView {
    /// The computation, when the evidence has one.
    #[serde(default, deserialize_with = "lenient")]
    computation: Option<ComputationView>,
}

/// The yearly margins of a computation.
#[derive(Debug, Clone, Default, Deserialize)]
struct ComputationView {
    /// Each year's operating margin (fraction); `None` unless all are numbers.
    #[serde(default, deserialize_with = "lenient")]
    margins: Option<Vec<f64>>,
}

/// Applies the rule of the module docs. `evidence` is the challenged
/// agent's `debate_evidence` content (any agent's: read leniently).
pub fn verdict(
    challenger: &str,
    challenged: &str,
    evidence: &Value,
) -> Result<Verdict, NoVerdictRule> {
    if challenger != FINANCIAL && challenger != STRATEGY {
        return Err(NoVerdictRule {
            challenger: challenger.to_string(),
        });
    }
    let margins: Option<Vec<f64>> = decode::<EvidenceView>(evidence)
        .unwrap_or_default()
        .computation
        .and_then(|c| c.margins);
    let Some(m) = margins.filter(|m| m.len() >= 3 && m.iter().all(|x| x.is_finite())) else {
        return Ok(Verdict {
            accepted: false,
            reason: "the evidence carries no yearly operating margins (computation.margins, at least 3 years): cannot check the trend".into(),
        });
    };
    let n = m.len();
    let latest = m[n - 1] - m[n - 2];
    let average = (m[n - 1] - m[0]) / (n - 1) as f64;
    let fading = latest.abs() < average.abs();
    let trend = format!(
        "latest yearly change {} vs average {} over {n} years",
        pts(latest),
        pts(average)
    );
    // The evidence favours the trailing average when the trend fades.
    let favours_average = fading;
    let challenged_is_average = challenged != STRATEGY;
    let accepted = favours_average == challenged_is_average;
    let reading = if fading {
        "the trend is fading, so the trailing average is a fair forward margin"
    } else {
        "the trend holds, so the trailing average lags the forward margin"
    };
    Ok(Verdict {
        accepted,
        reason: format!(
            "{}: {trend}; {reading}",
            if accepted { "accepted" } else { "rejected" }
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysts::Dataset;
    use serde_json::json;

    fn company(t: &str) -> Company {
        Dataset::bundled().unwrap().company(t).unwrap().clone()
    }

    #[test]
    fn debate_ids_are_deterministic_and_valid() {
        assert_eq!(debate_id("0193-ab"), "margin-0193-ab");
        assert_eq!(debate_id("a.b c"), "margin-a_b_c");
        assert!(debate_id(&"x".repeat(300)).len() <= 128);
    }

    #[test]
    fn the_rule_accepts_fading_trends_and_rejects_holding_ones() {
        // NVDA's margins rise ever more slowly: the average is fair.
        let nvda = evidence(FINANCIAL, &company("NVDA")).unwrap();
        let v = verdict(STRATEGY, FINANCIAL, &nvda.content).unwrap();
        assert!(v.accepted, "{}", v.reason);
        assert!(v.reason.contains("fading"), "{}", v.reason);
        // AMZN's margins accelerate: the average lags.
        let amzn = evidence(FINANCIAL, &company("AMZN")).unwrap();
        let v = verdict(STRATEGY, FINANCIAL, &amzn.content).unwrap();
        assert!(!v.accepted, "{}", v.reason);
        // The mirror case: financial challenging strategy's trend.
        let v = verdict(
            FINANCIAL,
            STRATEGY,
            &evidence(STRATEGY, &company("AMZN")).unwrap().content,
        )
        .unwrap();
        assert!(v.accepted, "{}", v.reason);
    }

    #[test]
    fn evidence_without_margins_is_rejected_and_outsiders_get_no_rule() {
        let v = verdict(STRATEGY, FINANCIAL, &json!({"evidence": ["trust me"]})).unwrap();
        assert!(!v.accepted);
        assert!(v.reason.contains("computation.margins"));
        assert!(verdict("valuation", FINANCIAL, &json!({})).is_err());
        assert!(evidence("report", &company("AAPL")).is_err());
    }

    #[test]
    fn evidence_lists_every_year_and_the_method() {
        let e = evidence(FINANCIAL, &company("AMZN")).unwrap().content;
        assert_eq!(e["computation"]["method"], "trailing_3yr_average");
        assert_eq!(e["computation"]["margins"].as_array().unwrap().len(), 5);
        assert_eq!(e["evidence"].as_array().unwrap().len(), 6);
        assert_eq!(e["position"]["metric"], METRIC);
    }

    #[test]
    fn challenge_has_the_seed_fields_and_extensions() {
        let c = company("AMZN");
        let ch = challenge(&ChallengeInput {
            workflow_id: "wf-1",
            company: &c,
            financial: View {
                value: 0.079,
                confidence: Some(0.8),
            },
            strategy: View {
                value: 0.12,
                confidence: None,
            },
            threshold: 0.03,
            regime: Some("BEAR_HIGH_RATES".into()),
            synthetic: false,
        });
        let parsed: caucus_shared::messages::Challenge =
            serde_json::from_value(ch.clone()).unwrap();
        assert_eq!(parsed.challenger, STRATEGY);
        assert_eq!(parsed.challenged, FINANCIAL);
        assert_eq!(parsed.debate_id.as_deref(), Some("margin-wf-1"));
        assert_eq!(ch["priority"], "valuation");
        assert_eq!(ch["context"]["metric"], METRIC);
        assert_eq!(
            ch["downstream_dependencies"],
            json!(["valuation", "report"])
        );
        assert_eq!(ch["regime"], "BEAR_HIGH_RATES");
    }
}
