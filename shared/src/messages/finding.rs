//! `finding` and `finding_with_precedent`: sharing analytical results.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::validate::{non_empty, opt_unit_interval, unit_interval};
use super::{MessageContent, ValidationError};
use crate::envelope::MessageType;

/// An analytical result (seed: "Finding: share analytical results").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// What was found, in one line.
    pub finding: String,
    /// How sure the agent is, 0..=1.
    pub confidence: f64,
    /// Supporting evidence (document references, quotes).
    #[serde(default)]
    pub evidence: Vec<String>,
    /// Implication for other agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impact: Option<String>,
    /// Stable key of the fact this finding is about (also the last token of
    /// `caucus.findings.<key>`); findings with the same key can be disputed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The analysed item, e.g. a ticker such as `BRK.B`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item: Option<String>,
    /// The workflow that produced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// Name of the measured quantity, e.g. `operating_margin`, `target_price`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
    /// Its value: a number for numeric metrics, or any JSON (e.g. a rating).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Unit of `value`, e.g. `USD`, `ratio`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// An assumption this finding rests on, which downstream analyses use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assumption: Option<String>,
}

impl Finding {
    /// A finding with just the required fields.
    pub fn new(finding: impl Into<String>, confidence: f64) -> Self {
        Finding {
            finding: finding.into(),
            confidence,
            evidence: Vec::new(),
            impact: None,
            key: None,
            item: None,
            workflow_id: None,
            metric: None,
            value: None,
            unit: None,
            assumption: None,
        }
    }
}

impl MessageContent for Finding {
    const MESSAGE_TYPE: MessageType = MessageType::Finding;

    fn validate(&self) -> Result<(), ValidationError> {
        non_empty("finding", &self.finding)?;
        unit_interval("confidence", self.confidence)
    }
}

/// One past occurrence of the same pattern.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimilarPattern {
    /// Company (ticker) where it happened.
    pub company: String,
    /// Year it happened.
    pub year: i32,
    /// What came of it.
    pub outcome: String,
}

/// The memory behind a finding (seed: "Historical Context Fields").
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HistoricalContext {
    /// Past occurrences of the same pattern.
    #[serde(default)]
    pub similar_patterns: Vec<SimilarPattern>,
    /// Share of past occurrences that played out, 0..=1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern_success_rate: Option<f64>,
    /// The sending agent's accuracy on this pattern, 0..=1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub my_accuracy_on_pattern: Option<f64>,
    /// Number of observations behind the rates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observations: Option<u32>,
}

/// A finding with historical precedent (`finding_with_precedent`): every
/// field of [`Finding`] plus `historical_context`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindingWithPrecedent {
    /// The finding itself (its fields sit at the top level of `content`).
    #[serde(flatten)]
    pub base: Finding,
    /// Precedents and track record.
    #[serde(default)]
    pub historical_context: HistoricalContext,
}

impl MessageContent for FindingWithPrecedent {
    const MESSAGE_TYPE: MessageType = MessageType::FindingWithPrecedent;

    fn validate(&self) -> Result<(), ValidationError> {
        self.base.validate()?;
        let h = &self.historical_context;
        opt_unit_interval(
            "historical_context.pattern_success_rate",
            h.pattern_success_rate,
        )?;
        opt_unit_interval(
            "historical_context.my_accuracy_on_pattern",
            h.my_accuracy_on_pattern,
        )
    }
}
