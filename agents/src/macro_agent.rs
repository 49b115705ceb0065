//! The built-in `macro` agent: turns a macro event given as task params
//! (the seed's broadcast content: `event_type`, `old_regime`, `new_regime`,
//! `confidence`, `implications` …) into a `system_critical` alert on
//! `caucus.msg.all` when the seed calls it system-critical (regime change
//! above 0.8 confidence, rate move of 25 bps or more); otherwise it only
//! reports the event in its output.

use serde::Serialize;
use serde_json::{Map, Value};

use caucus_shared::messages::{Alert, BelowThreshold, MacroBroadcast};
use caucus_shared::task::TaskDispatch;

use crate::analysts::AnalystError;
use crate::output::{AgentMessage, AgentOutput, MessageTarget};

/// The agent type.
pub const AGENT_TYPE: &str = "macro";

/// The output of a macro task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MacroOutput {
    /// Version of the analysts' outputs.
    pub schema_version: u32,
    /// Always [`AGENT_TYPE`].
    pub agent_type: &'static str,
    /// The task's item.
    pub item: String,
    /// `regime_change` or `rate_announcement`.
    pub event_type: &'static str,
    /// The regime before (`null` when not given).
    pub old_regime: Option<String>,
    /// The regime after (`null` when not given).
    pub new_regime: Option<String>,
    /// How sure the source is, 0..=1.
    pub confidence: f64,
    /// The alert content broadcast (or that would have been).
    pub content: Alert,
    /// Whether it went to `caucus.msg.all`.
    pub broadcast: bool,
    /// `system_critical`, when broadcast.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<&'static str>,
    /// The broadcast envelope's id, when broadcast.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
    /// Why it was not broadcast.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<BelowThreshold>,
}

/// Reads the event from `params`; fields under `implications` (the seed's
/// shape) count as if given at the top level.
pub fn parse_event(params: &Value) -> Result<MacroBroadcast, AnalystError> {
    let Some(obj) = params.as_object() else {
        return Err(AnalystError::bad_input(
            "macro: params must be an object with event_type, new_regime, confidence, …",
        ));
    };
    let mut flat: Map<String, Value> = obj.clone();
    if let Some(Value::Object(imp)) = obj.get("implications") {
        for (k, v) in imp {
            flat.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    flat.remove("implications");
    match flat.get("event_type").and_then(Value::as_str) {
        Some(t) => {
            caucus_shared::messages::MacroEvent::parse(t)
                .map_err(|e| AnalystError::bad_input(format!("macro: {e}")))?;
        }
        None => {
            return Err(AnalystError::bad_input(
                "macro: params.event_type is required (regime_change or rate_announcement)",
            ))
        }
    }
    let event: MacroBroadcast = serde_json::from_value(Value::Object(flat))
        .map_err(|e| AnalystError::bad_input(format!("macro: params: {e}")))?;
    event
        .validate()
        .map_err(|e| AnalystError::bad_input(format!("macro: {e}")))?;
    Ok(event)
}

/// Runs one macro task.
pub fn run(task: &TaskDispatch) -> Result<AgentOutput, AnalystError> {
    let event = parse_event(&task.params)?;
    let mut output = MacroOutput {
        schema_version: crate::analysts::OUTPUT_SCHEMA_VERSION,
        agent_type: AGENT_TYPE,
        item: task.item.clone(),
        event_type: event.event_type.as_str(),
        old_regime: event.old_regime.clone(),
        new_regime: event.new_regime.clone(),
        confidence: event.confidence,
        content: event.content(),
        broadcast: false,
        priority: None,
        message_id: None,
        reason: None,
    };
    let mut messages = Vec::new();
    match event.is_system_critical() {
        Ok(()) => {
            // One id per task: a redelivered or re-run task is de-duplicated
            // by the stream instead of broadcasting twice.
            let envelope = event
                .envelope(AGENT_TYPE)
                .map_err(|e| AnalystError::bad_input(format!("macro: {e}")))?
                .with_id(format!("macro-{}", task.task_id))
                .with_correlation_id(task.workflow_id.clone());
            output.broadcast = true;
            output.priority = Some("system_critical");
            output.message_id = Some(envelope.id.clone());
            messages.push(AgentMessage {
                target: MessageTarget::Broadcast,
                envelope,
            });
        }
        Err(reason) => output.reason = Some(reason),
    }
    let output =
        serde_json::to_value(&output).map_err(|e| AnalystError::bad_input(e.to_string()))?;
    Ok(AgentOutput {
        output,
        findings: Vec::new(),
        messages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(params: Value) -> TaskDispatch {
        serde_json::from_value(json!({
            "task_id": "wf/macro", "workflow_id": "wf", "item": "MARKET", "pipeline": "p",
            "stage": "macro", "agent_type": "macro", "attempt": 1, "params": params,
            "dispatched_at": "2025-01-15T10:30:00Z"
        }))
        .unwrap()
    }

    #[test]
    fn a_confident_regime_change_is_broadcast_once_per_task() {
        let out = run(&task(json!({
            "event_type": "regime_change", "old_regime": "BULL_LOW_RATES",
            "new_regime": "BEAR_HIGH_RATES", "confidence": 0.85,
            "implications": {"discount_rate_changes": {"Technology": 0.025}}
        })))
        .unwrap();
        assert_eq!(out.output["broadcast"], true);
        assert_eq!(out.messages.len(), 1);
        let env = &out.messages[0].envelope;
        assert_eq!(env.id, "macro-wf/macro");
        assert!(env.is_broadcast());
        assert_eq!(
            env.content["implications"]["discount_rate_changes"]["Technology"],
            0.025
        );
    }

    #[test]
    fn an_unsure_regime_change_is_only_reported() {
        let out = run(&task(json!({
            "event_type": "regime_change", "new_regime": "BEAR_HIGH_RATES", "confidence": 0.6
        })))
        .unwrap();
        assert_eq!(out.output["broadcast"], false);
        assert!(out.output["reason"].as_str().unwrap().contains("0.6"));
        assert!(out.messages.is_empty());
    }

    #[test]
    fn bad_params_are_permanent_errors_naming_the_field() {
        let e = run(&task(json!({"event_type": "gossip", "confidence": 0.9}))).unwrap_err();
        assert!(e.permanent);
        assert!(e.message.contains("event_type"), "{}", e.message);
        let e = run(&task(
            json!({"event_type": "rate_announcement", "confidence": 0.9}),
        ))
        .unwrap_err();
        assert!(e.message.contains("rate_change_bps"), "{}", e.message);
    }
}
