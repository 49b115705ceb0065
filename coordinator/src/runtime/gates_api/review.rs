//! `gate_review`: a level-5 review of one of the workflow's debates,
//! forwarded to the facilitator with the workflow's downstream analyses;
//! an override whose impact requires it re-runs exactly those tasks. A dry
//! run of an override returns the facilitator's impact report and applies
//! nothing.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value;

use caucus_shared::api::client::decode_request;
use caucus_shared::api::coordinator::gates::{GateReviewReply, GateReviewRequest};
use caucus_shared::api::facilitator::{
    self, Analysis, AnalysisKind, DebateRecord, DebateRequest, GetDebate, RerunPlan, Strategy,
};
use caucus_shared::messages::assumption_value;
use caucus_shared::nats::api::ApiError;
use caucus_shared::outputs::lenient;

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
        let dry_run = r.dry_run;
        if dry_run && action != "override" {
            return Err(ApiError::bad_request(format!(
                "dry_run is only for an override (it reports the downstream impact before committing), not `{action}`"
            )));
        }
        let rec = self.record(&handle, &workflow_id).await?;
        let debate = self
            .facilitator::<GetDebate>(&DebateRequest {
                debate_id: debate_id.clone(),
            })
            .await?;
        if let Some(w) = debate.debate.challenge.workflow_id.as_deref() {
            if w != workflow_id {
                return Err(ApiError::bad_request(format!(
                    "debate {debate_id} belongs to workflow {w}, not {workflow_id}"
                )));
            }
        }
        let mut forward = r;
        if action == "override" && forward.analyses.is_none() {
            forward.analyses = Some(analyses_of(&rec, &debate.debate));
        }
        // As the reviewer this request names (the caller's identity when
        // the API server set it), so the facilitator records the same one.
        let answer = self
            .facilitator_as::<facilitator::GateReview>(
                forward.reviewer.as_deref(),
                &facilitator_request(&forward)?,
            )
            .await?;
        if dry_run {
            // The impact report only: the workflow keeps its assumptions
            // and nothing runs again until the person commits.
            return Ok(GateReviewReply {
                facilitator: answer,
                rerun: None,
            });
        }
        // The metric, as the facilitator states it by the one shared rule
        // (`caucus_shared::messages::debate_metric`).
        let metric = debate.metric;
        let final_value = answer
            .resolution
            .as_ref()
            .and_then(|r| r.final_position.as_ref())
            .and_then(|p| p.value.as_ref())
            .and_then(assumption_value);
        let settled = match (&metric, final_value) {
            (Some(k), Some(v)) if action != "redebate" => gates::assumptions(k, v),
            _ => BTreeMap::new(),
        };
        let (reruns, estimates) = match &answer.impact {
            Some(impact) => {
                let groups = rerun_groups(&rec, &impact.plan);
                let estimates = gates_package::rerun_estimates(impact, &groups);
                (groups, estimates)
            }
            None => (Vec::new(), Vec::new()),
        };
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

/// `facilitator.gate_review`'s request: the review without `workflow_id`,
/// read as the facilitator reads it (its action and the action's fields
/// are flattened), so a malformed review is refused as the facilitator
/// would refuse it.
fn facilitator_request(r: &GateReviewRequest) -> Result<facilitator::GateReviewRequest, ApiError> {
    let mut body = serde_json::to_value(r)
        .map_err(|e| ApiError::internal(format!("gate review body: {e}")))?;
    if let Value::Object(m) = &mut body {
        m.remove("workflow_id");
    }
    decode_request::<facilitator::GateReview>(body)
}

/// What a stage's `params.impact` says of the analysis it runs. Read
/// leniently, like every stage param the pipeline author writes: a field
/// of the wrong type (or a `kind` the facilitator does not know) counts as
/// absent.
#[derive(Debug, Default, Deserialize)]
struct ImpactParams {
    /// What kind of analysis (default `other`).
    #[serde(default, deserialize_with = "lenient")]
    kind: Option<AnalysisKind>,
    /// What it produces (default `other`).
    #[serde(default, deserialize_with = "lenient")]
    output_metric: Option<String>,
    /// JSON pointer to its result in the task's output.
    #[serde(default, deserialize_with = "lenient")]
    result: Option<String>,
    /// Minutes a re-run takes (default: the stage's expected duration).
    #[serde(default, deserialize_with = "lenient")]
    rerun_minutes: Option<f64>,
    /// The assumptions it uses (names; other entries are skipped).
    #[serde(default, deserialize_with = "lenient")]
    inputs: Option<Vec<Value>>,
}

impl ImpactParams {
    /// The stage's `params.impact`; defaults when absent or not an object.
    fn of(params: Option<&Value>) -> ImpactParams {
        params
            .and_then(|v| ImpactParams::deserialize(v).ok())
            .unwrap_or_default()
    }

    /// The assumption names it lists.
    fn input_names(&self) -> Vec<String> {
        self.inputs
            .iter()
            .flatten()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect()
    }
}

/// The downstream analyses of a debate in this workflow: the tasks its
/// challenge names as downstream dependencies (else every stage declaring
/// `params.impact`), described by their stage's `params.impact`
/// (`kind`, `output_metric`, `result` = JSON pointer into the output,
/// `rerun_minutes`, `inputs`).
pub fn analyses_of(rec: &WorkflowRecord, debate: &DebateRecord) -> Vec<Analysis> {
    let named = &debate.extensions.downstream_dependencies;
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
            let imp = ImpactParams::of(stage.and_then(|s| s.params.get("impact")));
            let inputs = imp.input_names();
            let current_result = imp
                .result
                .as_deref()
                .and_then(|p| t.output.as_ref().and_then(|o| o.pointer(p)))
                .and_then(assumption_value);
            // Default: the stage's expected duration, in minutes.
            let expected_minutes = stage
                .map(|s| s.expected * rec.unit_ms as f64 / 60_000.0)
                .unwrap_or(0.0);
            let up: BTreeSet<String> = rec.upstream_of(&t.stage);
            let depends_on: Vec<String> = stage_of
                .iter()
                .filter(|(other, s)| *other != k && up.contains(**s))
                .map(|(other, _)| other.to_string())
                .collect();
            Analysis {
                analysis_id: k.clone(),
                kind: imp.kind.unwrap_or(AnalysisKind::Other),
                output_metric: imp.output_metric.unwrap_or_else(|| "other".into()),
                current_result,
                rerun_minutes: imp.rerun_minutes.unwrap_or(expected_minutes),
                inputs,
                depends_on,
            }
        })
        .collect()
}

/// The facilitator's re-run plan as groups of this workflow's task keys:
/// serial = one task per group in plan order; parallel = tasks grouped by
/// their depth among the re-run tasks, so dependencies still come first.
pub fn rerun_groups(rec: &WorkflowRecord, plan: &RerunPlan) -> Vec<Vec<String>> {
    let ids: Vec<String> = plan
        .required_reruns
        .iter()
        .map(|i| i.analysis_id.clone())
        .filter(|id| rec.tasks.contains_key(id))
        .collect();
    if ids.is_empty() {
        return Vec::new();
    }
    let serial = plan.execution_strategy != Strategy::Parallel;
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
