//! Messages from other agents and outside services reaching a task: the
//! findings a task receives in `inputs.findings`, and the answers a handler
//! may give about them.
//!
//! The coordinator reads every finding on `caucus.findings.<item>`. One
//! addressed to an agent type (see [`crate::messages::addressing`]) is
//! handed to that type's next tasks for the item, oldest first, as
//! [`InputFinding`]s under [`INPUT_FINDINGS`]. A handler may answer them by
//! returning [`FindingResponse`]s under [`OUTPUT_RESPONSES`] in its output;
//! the worker sends each answer as a `confirmation` on
//! `caucus.msg.<from_agent>` correlated by the finding's id.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::envelope::Priority;

/// Key of the findings in a task's `inputs`.
pub const INPUT_FINDINGS: &str = "findings";
/// Key of a handler's answers in its output (lifted out by the worker).
pub const OUTPUT_RESPONSES: &str = "responses";
/// Key under which built-in agents list the findings they applied.
pub const OUTPUT_APPLIED_FINDINGS: &str = "applied_findings";

/// A finding addressed to a task's agent type, as the task receives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputFinding {
    /// The envelope's `id` (what a confirmation's `correlation_id` names).
    pub id: String,
    /// The sending agent or service.
    pub from_agent: String,
    /// The `to_agent` as sent (`valuation_agent`, `valuation` or `all`).
    pub to_agent: String,
    /// The envelope's priority.
    pub priority: Priority,
    /// The sender expects a `confirmation` on `caucus.msg.<from_agent>`.
    #[serde(default)]
    pub requires_response: bool,
    /// The finding's content as sent (`finding`, `confidence`, `evidence`,
    /// `impact`, …).
    pub content: Value,
    /// When JetStream stored it.
    pub stored_at: DateTime<Utc>,
}

impl InputFinding {
    /// The finding's one-line text (`content.finding`), or "" when absent.
    pub fn text(&self) -> &str {
        self.content
            .get("finding")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The finding's `content.impact`, when it is a string.
    pub fn impact(&self) -> Option<&str> {
        self.content.get("impact").and_then(Value::as_str)
    }
}

/// A handler's answer about one finding of its `inputs.findings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindingResponse {
    /// The finding's `id`.
    pub finding_id: String,
    /// Whether the analysis used it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used: Option<bool>,
    /// How it was used, or why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A finding a built-in agent applied, as listed in its output under
/// [`OUTPUT_APPLIED_FINDINGS`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppliedFinding {
    /// The finding's `id`.
    pub finding_id: String,
    /// What the agent changed because of it.
    pub how: String,
}

/// The findings in a task's inputs (none when the key is absent or odd).
pub fn input_findings(inputs: &std::collections::BTreeMap<String, Value>) -> Vec<InputFinding> {
    inputs
        .get(INPUT_FINDINGS)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default()
}
