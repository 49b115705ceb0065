//! `gate_review`: a level-5 review of one of the workflow's debates,
//! forwarded to the facilitator with the workflow's downstream analyses;
//! an override whose impact requires it re-runs exactly those tasks.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use caucus_shared::api::coordinator::gates::{GateReviewReply, GateReviewRequest};
use caucus_shared::messages::assumption_value;
use caucus_shared::nats::api::ApiError;

use super::super::commands::SchedulerHandle;
use super::super::gates::{self, GateOp};
use super::super::gates_package;
use super::{call_as, GateApi};
use crate::workflow::{RerunRequest, WorkflowRecord};

impl GateApi {
    /// `gate_review`: forwards the review (all but `workflow_id`) to
    /// `facilitator.gate_review`, then settles the assumption and re-runs
    /// what the impact report requires.
    pub async fn review(
        &self,
        handle: SchedulerHandle,
        r: GateReviewRequest,
    ) -> Result<GateReviewReply, ApiError> {
        let workflow_id = r.workflow_id.clone();
        let debate_id = r.debate_id.clone();
        let action = r.action.clone();
        let reviewer = r.reviewer.clone().unwrap_or_else(|| "reviewer".into());
        let rec = self.record(&handle, &workflow_id).await?;
        let debate = self
            .facilitator("debate", &json!({ "debate_id": debate_id }))
            .await?;
        let of_wf = debate["challenge"]["workflow_id"].as_str();
        if of_wf.is_some_and(|w| w != workflow_id) {
            return Err(ApiError::bad_request(format!(
                "debate {debate_id} belongs to workflow {}, not {workflow_id}",
                of_wf.unwrap_or_default()
            )));
        }
        let mut forward = r;
        if action == "override" && forward.analyses.is_none() {
            forward.analyses = Some(analyses_of(&rec, &debate));
        }
        let answer = self
            .facilitator("gate_review", &facilitator_body(&forward)?)
            .await?;
        let metric = metric_of(&debate);
        let final_value = assumption_value(&answer["resolution"]["final_position"]["value"]);
        let settled = match (&metric, final_value) {
            (Some(k), Some(v)) if action != "redebate" => gates::assumptions(k, v),
            _ => BTreeMap::new(),
        };
        let reruns = rerun_groups(&rec, &answer["impact"]["plan"]);
        let estimates = gates_package::rerun_estimates(&answer["impact"], &reruns);
        let mut out = GateReviewReply {
            facilitator: answer,
            rerun: None,
        };
        if !reruns.is_empty() || !settled.is_empty() {
            // With no re-run, only the assumption is settled: tasks that
            // have not run yet get it; nothing is renewed.
            let op = GateOp::Rerun {
                workflow_id: workflow_id.clone(),
                req: RerunRequest {
                    reason: format!(
                        "gate review of debate {debate_id} by {reviewer}: {action}{}",
                        metric
                            .as_ref()
                            .zip(final_value)
                            .map(|(k, v)| format!(" ({k} = {v})"))
                            .unwrap_or_default()
                    ),
                    requested_by: reviewer,
                    groups: reruns,
                    assumptions: settled,
                    estimates,
                },
            };
            out.rerun = Some(call_as(&handle, op).await?);
        }
        Ok(out)
    }
}

/// `facilitator.gate_review`'s body: the review without `workflow_id`.
fn facilitator_body(r: &GateReviewRequest) -> Result<Value, ApiError> {
    let mut body = serde_json::to_value(r)
        .map_err(|e| ApiError::internal(format!("gate review body: {e}")))?;
    if let Value::Object(m) = &mut body {
        m.remove("workflow_id");
    }
    Ok(body)
}

/// The metric the debate is about, as the facilitator's `debate` reply
/// states it (`caucus_shared::messages::debate_metric`).
fn metric_of(debate: &Value) -> Option<String> {
    debate["metric"].as_str().map(str::to_string)
}

/// The downstream analyses of a debate in this workflow: the tasks its
/// challenge names as downstream dependencies (else every stage declaring
/// `params.impact`), described by their stage's `params.impact`
/// (`kind`, `output_metric`, `result` = JSON pointer into the output,
/// `rerun_minutes`, `inputs`).
pub fn analyses_of(rec: &WorkflowRecord, debate: &Value) -> Vec<Value> {
    let named: Vec<String> = debate["extensions"]["downstream_dependencies"]
        .as_array()
        .or_else(|| debate["challenge"]["downstream_dependencies"].as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let keys: Vec<String> = if named.is_empty() {
        rec.tasks
            .iter()
            .filter(|(_, t)| {
                rec.stages
                    .iter()
                    .any(|s| s.name == t.stage && s.params.get("impact").is_some())
            })
            .map(|(k, _)| k.clone())
            .collect()
    } else {
        rec.tasks
            .iter()
            .filter(|(k, t)| named.contains(k) || named.contains(&t.stage))
            .map(|(k, _)| k.clone())
            .collect()
    };
    let stage_of: BTreeMap<&str, &str> = keys
        .iter()
        .map(|k| (k.as_str(), rec.tasks[k].stage.as_str()))
        .collect();
    keys.iter()
        .map(|k| {
            let t = &rec.tasks[k];
            let stage = rec.stages.iter().find(|s| s.name == t.stage);
            let imp = stage
                .and_then(|s| s.params.get("impact"))
                .cloned()
                .unwrap_or(Value::Null);
            let current = imp["result"]
                .as_str()
                .and_then(|p| t.output.as_ref().and_then(|o| o.pointer(p)))
                .and_then(assumption_value);
            // Default: the stage's expected duration, in minutes.
            let expected_minutes = stage
                .map(|s| s.expected * rec.unit_ms as f64 / 60_000.0)
                .unwrap_or(0.0);
            let up: BTreeSet<String> = rec.upstream_of(&t.stage);
            let depends_on: Vec<&str> = stage_of
                .iter()
                .filter(|(other, s)| *other != k && up.contains(**s))
                .map(|(other, _)| *other)
                .collect();
            let mut a = json!({
                "analysis_id": k,
                "kind": imp["kind"].as_str().unwrap_or("other"),
                "output_metric": imp["output_metric"].as_str().unwrap_or("other"),
                "rerun_minutes": imp["rerun_minutes"].as_f64().unwrap_or(expected_minutes),
                "inputs": imp["inputs"].as_array().cloned().unwrap_or_default(),
                "depends_on": depends_on,
            });
            if let Some(c) = current {
                a["current_result"] = json!(c);
            }
            a
        })
        .collect()
}

/// The facilitator's re-run plan as groups of this workflow's task keys:
/// serial = one task per group in plan order; parallel = tasks grouped by
/// their depth among the re-run tasks, so dependencies still come first.
pub fn rerun_groups(rec: &WorkflowRecord, plan: &Value) -> Vec<Vec<String>> {
    let ids: Vec<String> = plan["required_reruns"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i["analysis_id"].as_str().map(str::to_string))
                .filter(|id| rec.tasks.contains_key(id))
                .collect()
        })
        .unwrap_or_default();
    if ids.is_empty() {
        return Vec::new();
    }
    let serial = plan["execution_strategy"].as_str() != Some("parallel");
    // Dependencies first, whatever order the plan lists them in.
    let depth = |k: &String| -> usize {
        let up = rec.upstream_of(&rec.tasks[k].stage);
        ids.iter()
            .filter(|o| *o != k && up.contains(&rec.tasks[*o].stage))
            .count()
    };
    let mut ordered: Vec<(usize, usize, String)> = ids
        .iter()
        .enumerate()
        .map(|(i, k)| (depth(k), i, k.clone()))
        .collect();
    ordered.sort();
    if serial {
        return ordered.into_iter().map(|(_, _, k)| vec![k]).collect();
    }
    let mut groups: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for (d, _, k) in ordered {
        groups.entry(d).or_default().push(k);
    }
    groups.into_values().collect()
}
