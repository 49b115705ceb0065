//! Plugs the built-in agents ([`caucus_agents`]) into the handler: their
//! output becomes a [`HandlerOutput`] (findings, challenges for the
//! facilitator, `macro` broadcasts for `caucus.msg.all`, and the findings
//! they applied, from the output's `applied_findings`, which stays in the
//! output for people to see).

use std::sync::Arc;

use serde::Deserialize;

use caucus_agents::{AgentOutput, BuiltinAgents, Dataset, Settings};
use caucus_shared::inbound::AppliedFinding;
use caucus_shared::outputs::lenient;

use crate::handler::{BuiltinFn, FindingAnswers, HandlerFinding, HandlerOutput};

/// The built-in agents over `data`, with the default settings.
pub fn analysts_over(data: Arc<Dataset>) -> BuiltinFn {
    analysts_with(data, Settings::default())
}

/// The built-in agents over `data` with worker-level `settings`.
pub fn analysts_with(data: Arc<Dataset>, settings: Settings) -> BuiltinFn {
    let agents = BuiltinAgents::with_settings(data, settings);
    Arc::new(move |task| agents.run(task).map(handler_output))
}

/// The configured data set: `worker.data_path`, or the bundled one.
pub fn dataset(
    path: Option<&std::path::Path>,
) -> Result<Arc<Dataset>, caucus_agents::DatasetError> {
    caucus_agents::load_dataset(path)
}

/// The part of a built-in agent's output that says which findings it
/// applied (absent or odd: none).
#[derive(Debug, Default, Deserialize)]
struct AppliedList {
    /// `shared::inbound::OUTPUT_APPLIED_FINDINGS`.
    #[serde(default, deserialize_with = "lenient")]
    applied_findings: Option<Vec<AppliedFinding>>,
}

fn handler_output(out: AgentOutput) -> HandlerOutput {
    let applied = AppliedList::deserialize(&out.output)
        .ok()
        .and_then(|a| a.applied_findings)
        .unwrap_or_default();
    HandlerOutput {
        answers: FindingAnswers::Applied(applied),
        output: out.output,
        findings: out
            .findings
            .into_iter()
            .map(|content| HandlerFinding { content })
            .collect(),
        messages: out.messages,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caucus_shared::task::TaskDispatch;
    use serde_json::json;

    #[test]
    fn applied_findings_become_answers_and_stay_in_the_output() {
        let run = analysts_over(dataset(None).unwrap());
        let task: TaskDispatch = serde_json::from_value(json!({
            "task_id": "wf/valuation", "workflow_id": "wf", "item": "AAPL",
            "pipeline": "p", "stage": "valuation", "agent_type": "valuation",
            "attempt": 1, "dispatched_at": "2025-11-16T10:30:00Z",
            "inputs": {"findings": [
                {"id": "f1", "from_agent": "financial_analyst", "to_agent": "valuation_agent",
                 "priority": "high", "requires_response": true,
                 "content": {"finding": "Abnormal capex increase", "confidence": 0.85,
                             "impact": "Adjust FCF projections"},
                 "stored_at": "2026-11-25T10:00:00Z"},
                {"id": "f2", "from_agent": "news", "to_agent": "all",
                 "priority": "normal", "requires_response": true,
                 "content": {"finding": "New CEO appointed"},
                 "stored_at": "2026-11-25T10:01:00Z"}
            ]}
        }))
        .unwrap();
        let out = run(&task).unwrap();
        let FindingAnswers::Applied(list) = &out.answers else {
            panic!("built-in answers are applied findings: {:?}", out.answers)
        };
        let ids: Vec<_> = list.iter().map(|a| a.finding_id.as_str()).collect();
        assert_eq!(ids, ["f1"]);
        assert_eq!(out.output["applied_findings"][0]["finding_id"], "f1");
        let sent = crate::confirmations::confirmations(&task, &out.answers);
        let used: Vec<_> = sent
            .iter()
            .map(|c| {
                let k: caucus_shared::messages::Confirmation = c.envelope.content_as().unwrap();
                (c.envelope.correlation_id.clone().unwrap(), k.used)
            })
            .collect();
        assert_eq!(
            used,
            [
                ("f1".to_string(), Some(true)),
                ("f2".to_string(), Some(false))
            ]
        );
    }
}
