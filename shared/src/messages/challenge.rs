//! `challenge`: disputing another agent's finding (the seed's Challenge
//! Format, field for field).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::validate::{non_empty, opt_unit_interval};
use super::{MessageContent, ValidationError};
use crate::envelope::MessageType;

/// How much a debate blocks; decides queue order and overflow handling.
/// On the wire in kebab-case: `critical-path`, `valuation`, `supporting`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChallengePriority {
    /// Blocks immediate pipeline progress (highest; never deferred, never
    /// auto-resolved by credibility).
    CriticalPath,
    /// Affects DCF assumptions or price targets (medium).
    Valuation,
    /// Background research disagreement (lowest).
    #[default]
    Supporting,
}

impl ChallengePriority {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ChallengePriority::CriticalPath => "critical-path",
            ChallengePriority::Valuation => "valuation",
            ChallengePriority::Supporting => "supporting",
        }
    }
}

/// One side's position in a debate, in a form the facilitator can compare
/// (e.g. to pick the lowest price target as the conservative default).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Position {
    /// The position in words, e.g. "25% operating margin".
    pub statement: String,
    /// Measured quantity, e.g. `operating_margin`, `target_price`, `risk_score`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// Its value (a number for numeric metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Confidence, 0..=1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Evidence behind it.
    #[serde(default)]
    pub evidence: Vec<String>,
}

/// The metric a debate is about, the one rule every part uses (the
/// facilitator's precedents and `debate` reply, the coordinator settling
/// an assumption, the CLI): the metric its context declares, else the
/// challenged position's, else the challenger's; lowercased.
pub fn debate_metric(
    context: Option<&str>,
    challenged: Option<&Position>,
    challenger: Option<&Position>,
) -> Option<String> {
    context
        .or_else(|| challenged.and_then(|p| p.metric.as_deref()))
        .or_else(|| challenger.and_then(|p| p.metric.as_deref()))
        .map(str::to_ascii_lowercase)
}

/// A value as an assumption's number: a JSON number, or a string such as
/// `"0.28"`, `"28%"` (a share: 0.28) or `"$85"`. Not finite: `None`.
pub fn assumption_value(v: &Value) -> Option<f64> {
    let x = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => {
            let t = s.trim();
            match t.strip_suffix('%') {
                Some(p) => p.trim().parse::<f64>().ok().map(|x| x / 100.0),
                None => t.trim_start_matches('$').trim().parse().ok(),
            }
        }
        _ => None,
    };
    x.filter(|x| x.is_finite())
}

impl Position {
    /// Its value as a number (see [`assumption_value`]).
    pub fn number(&self) -> Option<f64> {
        self.value.as_ref().and_then(assumption_value)
    }

    pub(crate) fn validate(&self, field: &str) -> Result<(), ValidationError> {
        non_empty(&format!("{field}.statement"), &self.statement)?;
        opt_unit_interval(&format!("{field}.confidence"), self.confidence)
    }
}

/// A challenge to another agent's finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Challenge {
    /// Challenge id, e.g. `CH-001`.
    pub challenge_id: String,
    /// The challenging agent.
    pub challenger: String,
    /// The agent whose finding is disputed.
    pub challenged: String,
    /// The disputed finding.
    pub disputed_finding: String,
    /// Why it is disputed.
    pub challenge_basis: String,
    /// Evidence the challenged agent must provide.
    #[serde(default)]
    pub required_evidence: Vec<String>,
    /// Seconds before the debate escalates (the seed's typical 1 h = 3600).
    pub escalation_timer: u64,
    /// `critical-path`, `valuation` or `supporting`.
    pub priority: ChallengePriority,
    /// Resolution applied meanwhile (level 4 conservative default); null until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisional_resolution: Option<Value>,
    /// The debate this challenge opens (assigned by the facilitator when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debate_id: Option<String>,
    /// The memory snapshot the debate argues from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
    /// The challenger's counter-evidence.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counter_evidence: Vec<String>,
    /// The challenger's position.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub challenger_position: Option<Position>,
    /// The challenged agent's position (the disputed finding, made comparable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub challenged_position: Option<Position>,
    /// Key of the disputed finding (`caucus.findings.<key>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finding_key: Option<String>,
    /// The item concerned, e.g. a ticker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    /// The workflow concerned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// Both positions come from synthetic data (e.g. the built-in analysts
    /// over the bundled data set). The debate runs as any other, but its
    /// outcome does not feed the agents' track records: it would teach the
    /// credibility engine about the data set, not about the agents, and
    /// real agents of the same types would inherit it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub synthetic: bool,
}

impl MessageContent for Challenge {
    const MESSAGE_TYPE: MessageType = MessageType::Challenge;

    fn validate(&self) -> Result<(), ValidationError> {
        non_empty("challenge_id", &self.challenge_id)?;
        non_empty("challenger", &self.challenger)?;
        non_empty("challenged", &self.challenged)?;
        if self.challenger == self.challenged {
            return Err(ValidationError::SelfChallenge {
                agent: self.challenger.clone(),
            });
        }
        non_empty("disputed_finding", &self.disputed_finding)?;
        if let Some(p) = &self.challenger_position {
            p.validate("challenger_position")?;
        }
        if let Some(p) = &self.challenged_position {
            p.validate("challenged_position")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod value_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_debates_metric_is_its_contexts_else_a_positions() {
        let pos = |m: &str| Position {
            statement: "x".into(),
            metric: Some(m.into()),
            value: None,
            confidence: None,
            evidence: Vec::new(),
        };
        let (a, b) = (pos("Operating_Margin"), pos("target_price"));
        assert_eq!(
            debate_metric(Some("WACC"), Some(&a), Some(&b)).as_deref(),
            Some("wacc")
        );
        assert_eq!(
            debate_metric(None, Some(&a), Some(&b)).as_deref(),
            Some("operating_margin")
        );
        assert_eq!(
            debate_metric(None, None, Some(&b)).as_deref(),
            Some("target_price")
        );
        assert_eq!(debate_metric(None, None, None), None);
    }

    #[test]
    fn assumption_values_read_numbers_shares_and_prices() {
        assert_eq!(assumption_value(&json!(0.28)), Some(0.28));
        assert_eq!(assumption_value(&json!(" 28% ")), Some(0.28));
        assert_eq!(assumption_value(&json!("$85")), Some(85.0));
        assert_eq!(assumption_value(&json!("0.3")), Some(0.3));
        assert_eq!(assumption_value(&json!("high")), None);
        assert_eq!(assumption_value(&json!("inf")), None);
        assert_eq!(assumption_value(&json!(true)), None);
    }
}
