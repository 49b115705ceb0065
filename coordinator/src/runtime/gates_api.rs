//! The gate operations of the coordinator's API. What needs the
//! facilitator (open debates, provisional decisions, a level-5 review and
//! its impact report) is asked here, outside the scheduler loop, so a slow
//! facilitator never stalls dispatch.
//!
//! | op | body | answer |
//! |---|---|---|
//! | `gates` | `{workflow_id?, item?}` | `{count, gates: [...]}` |
//! | `gate` | `{workflow_id, gate?}` | the decision package |
//! | `gate_decide` | `{workflow_id, gate?, action, reviewer, rationale?, send_back_to?}` | the decision |
//! | `gate_review` | `{workflow_id, debate_id, action, reviewer, side?, position?, rationale?, context?}` | facilitator answer + re-run |
//! | `rerun` | `{workflow_id, tasks? \| groups?, reason, requested_by?, assumptions?}` | the re-run |

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use async_nats::Client;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};

use caucus_shared::messages::assumption_value;
use caucus_shared::nats::api::{api_request, ApiError, OffsetPage, CODE_NO_RESPONDERS};
use caucus_shared::subjects::{StreamKind, Subjects};

use super::commands::{ask, Command, SchedulerHandle};
use super::gates::GateOp;
use super::gates_package;
use crate::workflow::{GateAction, GateRequest, RerunRequest, WorkflowRecord};

/// Findings read into one decision package, at most.
pub const MAX_PACKAGE_FINDINGS: usize = 500;

/// What the gate operations need besides the scheduler.
#[derive(Clone)]
pub struct GateApi {
    /// NATS connection (facilitator requests, findings).
    pub client: Client,
    /// Subjects.
    pub subjects: Subjects,
    /// Timeout of each facilitator request.
    pub timeout: Duration,
}

fn parse<T: for<'de> Deserialize<'de>>(v: Value) -> Result<T, ApiError> {
    serde_json::from_value(v).map_err(|e| ApiError::bad_request(e.to_string()))
}

/// Sends `op` to the scheduler and waits for its answer.
pub async fn call(handle: &SchedulerHandle, op: GateOp) -> Result<Value, ApiError> {
    ask(handle, |reply| Command::Gate { op, reply }).await?
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListRequest {
    #[serde(default)]
    workflow_id: Option<String>,
    #[serde(default)]
    item: Option<String>,
    /// Gates per page (default [`GATES_PAGE`], at most [`GATES_PAGE_MAX`]).
    #[serde(default)]
    limit: Option<usize>,
    /// The `next_cursor` of the previous page.
    #[serde(default)]
    cursor: Option<String>,
}

/// Open gates per `coordinator.gates` page unless `limit` says otherwise.
const GATES_PAGE: usize = 200;
/// The largest page: an open gate is well under 1 KiB, so a page stays far
/// below NATS's 1 MiB `max_payload`.
const GATES_PAGE_MAX: usize = 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PackageRequest {
    workflow_id: String,
    #[serde(default)]
    gate: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecideRequest {
    workflow_id: String,
    #[serde(default)]
    gate: Option<String>,
    action: GateAction,
    reviewer: String,
    #[serde(default)]
    rationale: String,
    #[serde(default)]
    send_back_to: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RerunBody {
    workflow_id: String,
    #[serde(default)]
    tasks: Vec<String>,
    #[serde(default)]
    groups: Vec<Vec<String>>,
    reason: String,
    #[serde(default)]
    requested_by: Option<String>,
    #[serde(default)]
    assumptions: BTreeMap<String, Value>,
}

impl GateApi {
    async fn facilitator(&self, op: &str, body: &Value) -> Result<Value, ApiError> {
        api_request(
            &self.client,
            &self.subjects,
            "facilitator",
            op,
            body,
            self.timeout,
        )
        .await
    }

    /// `gates`: open gates, oldest first.
    pub async fn list(&self, handle: SchedulerHandle, body: Value) -> Result<Value, ApiError> {
        let r: ListRequest = parse(body)?;
        let page = OffsetPage::of(r.limit, r.cursor.as_deref(), GATES_PAGE, GATES_PAGE_MAX)?;
        call(
            &handle,
            GateOp::List {
                workflow_id: r.workflow_id,
                item: r.item,
                page,
            },
        )
        .await
    }

    async fn record(
        &self,
        handle: &SchedulerHandle,
        workflow_id: &str,
    ) -> Result<WorkflowRecord, ApiError> {
        let v = call(
            handle,
            GateOp::Get {
                workflow_id: workflow_id.to_string(),
            },
        )
        .await?;
        serde_json::from_value(v["record"].clone())
            .map_err(|e| ApiError::internal(format!("stored record unreadable: {e}")))
    }

    /// Provisional decisions of a workflow still awaiting review, from the
    /// facilitator. `Ok(None)` when no facilitator runs.
    async fn provisional(&self, workflow_id: &str) -> Result<Option<Value>, ApiError> {
        match self
            .facilitator("provisional", &json!({ "workflow_id": workflow_id }))
            .await
        {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.code == CODE_NO_RESPONDERS => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `gate`: everything a person needs to decide.
    pub async fn package(&self, handle: SchedulerHandle, body: Value) -> Result<Value, ApiError> {
        let r: PackageRequest = parse(body)?;
        let rec = self.record(&handle, &r.workflow_id).await?;
        let gate = rec
            .pick_open_gate(r.gate.as_deref())
            .map_err(|e| ApiError::new(e.code(), e.to_string()))?;
        let wf = json!({ "workflow_id": rec.workflow_id });
        let (debates, provisional, findings) = tokio::join!(
            self.facilitator("debates", &wf),
            self.provisional(&rec.workflow_id),
            self.findings(&rec),
        );
        let (debates, facilitator_note) = match debates {
            Ok(v) => (v["debates"].as_array().cloned().unwrap_or_default(), None),
            Err(e) => (Vec::new(), Some(e.message)),
        };
        let open: Vec<&Value> = debates
            .iter()
            .filter(|d| d["resolution"].is_null())
            .collect();
        let provisional = provisional.unwrap_or(None).unwrap_or_else(|| {
            json!({"count": 0, "message": "0 provisional decisions require review", "decisions": []})
        });
        let mut precedents = Vec::new();
        for d in &debates {
            if let Some(p) = d.get("precedents").and_then(Value::as_array) {
                precedents.extend(p.iter().cloned());
            }
        }
        let pending = rec.pending_upstream(&gate);
        let n_prov = provisional["count"].as_u64().unwrap_or(0);
        let mut blocking = Vec::new();
        if n_prov > 0 {
            blocking.push(format!(
                "{} — each must be confirmed, overridden or re-debated (coordinator.gate_review)",
                provisional["message"]
                    .as_str()
                    .unwrap_or("provisional decisions")
            ));
        }
        if !pending.is_empty() {
            blocking.push(format!("re-runs in progress: {}", pending.join(", ")));
        }
        let now = chrono::Utc::now();
        let tasks: Vec<Value> = rec
            .tasks
            .iter()
            .map(|(k, t)| {
                json!({
                    "task": k,
                    "stage": t.stage,
                    "agent_type": t.agent_type,
                    "state": t.state,
                    "finished_at": t.finished_at,
                    "rerun": t.previous_output.is_some(),
                })
            })
            .collect();
        let mut pkg = json!({
            "gate": super::gates::open_gate_json(&rec, &gate, now),
            "workflow_id": rec.workflow_id,
            "item": rec.item,
            "pipeline": rec.pipeline,
            "tasks": tasks,
            "findings": findings.unwrap_or_default(),
            "open_debates": open,
            "provisional": provisional,
            "precedents": precedents,
            "resolved_assumptions": rec.resolved_assumptions,
            "reruns": rec.reruns,
            "can_approve": blocking.is_empty(),
            "blocking": blocking,
            "actions": ["approve", "reject", "send_back"],
        });
        if let Some(note) = facilitator_note {
            pkg["facilitator"] = json!(note);
        }
        Ok(pkg)
    }

    /// The item's findings published by this workflow's tasks, oldest first.
    async fn findings(&self, rec: &WorkflowRecord) -> Result<Vec<Value>, String> {
        let js = async_nats::jetstream::new(self.client.clone());
        let stream = js
            .get_stream(self.subjects.stream(StreamKind::Findings))
            .await
            .map_err(|e| e.to_string())?;
        let subject = self.subjects.findings(&rec.item);
        let consumer = stream
            .create_consumer(async_nats::jetstream::consumer::pull::OrderedConfig {
                filter_subject: subject,
                ..Default::default()
            })
            .await
            .map_err(|e| e.to_string())?;
        let pending = consumer.cached_info().num_pending as usize;
        let mut out = Vec::new();
        if pending == 0 {
            return Ok(out);
        }
        let mut msgs = consumer.messages().await.map_err(|e| e.to_string())?;
        let mut seen = 0usize;
        while seen < pending {
            let next = tokio::time::timeout(self.timeout, msgs.next()).await;
            let Ok(Some(Ok(m))) = next else { break };
            seen += 1;
            let Ok(v) = serde_json::from_slice::<Value>(&m.payload) else {
                continue;
            };
            let ours = v["correlation_id"].as_str() == Some(&rec.workflow_id)
                || v["content"]["workflow_id"].as_str() == Some(&rec.workflow_id);
            if ours {
                let msg_id = m
                    .headers
                    .as_ref()
                    .and_then(|h| h.get("Nats-Msg-Id"))
                    .map(|id| id.as_str());
                let c = &v["content"];
                let mut f = json!({
                    "from_agent": v["from_agent"],
                    "finding": c["finding"],
                    "confidence": c["confidence"],
                    "evidence": c["evidence"],
                    "impact": c["impact"],
                    "metric": c["metric"],
                    "value": c["value"],
                    "timestamp": v["timestamp"],
                });
                if let Some(id) = msg_id.and_then(gates_package::finding_id) {
                    f["finding_id"] = json!(id);
                }
                gates_package::push_finding(&mut out, f);
                if out.len() >= MAX_PACKAGE_FINDINGS {
                    break;
                }
            }
        }
        Ok(out)
    }

    /// `gate_decide`: approve (refused while provisional decisions await
    /// review), reject or send back.
    pub async fn decide(&self, handle: SchedulerHandle, body: Value) -> Result<Value, ApiError> {
        let r: DecideRequest = parse(body)?;
        if r.reviewer.trim().is_empty() {
            return Err(ApiError::bad_request("`reviewer` must name who decides"));
        }
        if r.action == GateAction::Approve {
            match self.provisional(&r.workflow_id).await? {
                None => {
                    return Err(ApiError::new(
                        "facilitator_unavailable",
                        "cannot check this workflow's provisional decisions: no facilitator is running; start one and retry",
                    ))
                }
                Some(p) if p["count"].as_u64().unwrap_or(0) > 0 => {
                    let ids: Vec<&str> = p["decisions"]
                        .as_array()
                        .map(|a| a.iter().filter_map(|d| d["debate_id"].as_str()).collect())
                        .unwrap_or_default();
                    return Err(ApiError::new(
                        "provisional_unreviewed",
                        format!(
                            "{}: {} — confirm, override or re-debate each (coordinator.gate_review) before approving",
                            p["message"].as_str().unwrap_or("provisional decisions require review"),
                            ids.join(", ")
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
        call(
            &handle,
            GateOp::Decide {
                workflow_id: r.workflow_id,
                gate: r.gate,
                req: GateRequest {
                    action: r.action,
                    decided_by: r.reviewer,
                    rationale: r.rationale,
                    send_back_to: r.send_back_to,
                },
            },
        )
        .await
    }

    /// `gate_review`: a level-5 review of one of the workflow's debates,
    /// forwarded to the facilitator with the workflow's downstream analyses;
    /// an override whose impact requires it re-runs exactly those tasks.
    pub async fn review(&self, handle: SchedulerHandle, body: Value) -> Result<Value, ApiError> {
        let Value::Object(mut m) = body else {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        };
        let workflow_id = m
            .remove("workflow_id")
            .and_then(|v| v.as_str().map(str::to_string))
            .ok_or_else(|| ApiError::bad_request("`workflow_id` is required"))?;
        let debate_id = m
            .get("debate_id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| ApiError::bad_request("`debate_id` is required"))?;
        let action = m
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let reviewer = m
            .get("reviewer")
            .and_then(Value::as_str)
            .unwrap_or("reviewer")
            .to_string();
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
        if action == "override" && !m.contains_key("analyses") {
            m.insert("analyses".into(), Value::Array(analyses_of(&rec, &debate)));
        }
        let answer = self.facilitator("gate_review", &Value::Object(m)).await?;
        let metric = metric_of(&debate);
        let mut out = json!({ "facilitator": answer });
        let final_value = assumption_value(&answer["resolution"]["final_position"]["value"]);
        let settled = match (&metric, final_value) {
            (Some(k), Some(v)) if action != "redebate" => super::gates::assumptions(k, v),
            _ => BTreeMap::new(),
        };
        let reruns = rerun_groups(&rec, &answer["impact"]["plan"]);
        let estimates = gates_package::rerun_estimates(&answer["impact"], &reruns);
        if !reruns.is_empty() || !settled.is_empty() {
            let groups = if reruns.is_empty() {
                // Only settle the assumption: tasks that have not run yet
                // get it; nothing is renewed.
                Vec::new()
            } else {
                reruns
            };
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
                    groups,
                    assumptions: settled,
                    estimates,
                },
            };
            out["rerun"] = call(&handle, op).await?;
        }
        Ok(out)
    }

    /// `rerun`: run tasks of a workflow again (each group after the last).
    pub async fn rerun(&self, handle: SchedulerHandle, body: Value) -> Result<Value, ApiError> {
        let r: RerunBody = parse(body)?;
        if r.reason.trim().is_empty() {
            return Err(ApiError::bad_request("`reason` is required"));
        }
        let mut groups = r.groups;
        if !r.tasks.is_empty() {
            groups.insert(0, r.tasks);
        }
        call(
            &handle,
            GateOp::Rerun {
                workflow_id: r.workflow_id,
                req: RerunRequest {
                    reason: r.reason,
                    requested_by: r.requested_by.unwrap_or_else(|| "api".into()),
                    groups,
                    assumptions: r.assumptions,
                    estimates: Vec::new(),
                },
            },
        )
        .await
    }
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

/// How long automatic approval waits for a debate a task named
/// (`debate_ids`) to appear at the facilitator: it opens one after its
/// pre-debate sync lock (seconds), so longer means the challenge was lost
/// or refused, and waiting on would hold the gate for nothing.
const UNOPENED_DEBATE_WAIT: Duration = Duration::from_secs(30);

/// Debate states still moving on their own (levels 1 and 2): they end
/// resolved, with an expert, or provisional within the facilitator's
/// time-outs.
fn in_motion(state: &str) -> bool {
    matches!(
        state,
        "awaiting_ack" | "awaiting_evidence" | "awaiting_verdict" | "mediating"
    )
}

/// Debates of `named` (named by the workflow's tasks) or of `listed` (the
/// facilitator's debates of the workflow) that are still in motion: listed
/// at level 1 or 2, or named and not listed yet while the gate has been
/// open less than [`UNOPENED_DEBATE_WAIT`].
fn debates_in_motion(named: &[String], listed: &[Value], open_for: Duration) -> Vec<String> {
    let mut out: Vec<String> = listed
        .iter()
        .filter(|d| d["state"].as_str().is_some_and(in_motion))
        .filter_map(|d| d["debate_id"].as_str().map(String::from))
        .collect();
    if open_for < UNOPENED_DEBATE_WAIT {
        out.extend(
            named
                .iter()
                .filter(|id| !listed.iter().any(|d| d["debate_id"] == id.as_str()))
                .cloned(),
        );
    }
    out
}

/// Approves an auto-approving workflow's open gate when nothing needs a
/// person: no debate of the workflow is still in motion (approving over a
/// debate that ends provisional a second later would skip its review) and
/// no provisional decision awaits review. With no facilitator running
/// nothing can await review, so it approves (the submitter opted in to
/// unattended runs).
pub async fn auto_decide(
    client: Client,
    subjects: Subjects,
    timeout: Duration,
    handle: SchedulerHandle,
    candidate: super::gates::AutoCandidate,
) {
    let super::gates::AutoCandidate {
        workflow_id,
        gate,
        debates: named,
        open_for,
    } = candidate;
    let api = GateApi {
        client,
        subjects,
        timeout,
    };
    match api
        .facilitator("debates", &json!({ "workflow_id": workflow_id }))
        .await
    {
        Ok(v) => {
            let listed = v["debates"].as_array().cloned().unwrap_or_default();
            let moving = debates_in_motion(&named, &listed, open_for);
            if !moving.is_empty() {
                tracing::debug!(workflow_id, gate, debates = ?moving, "automatic approval waits for debates in motion");
                return;
            }
        }
        Err(e) if e.code == CODE_NO_RESPONDERS => {}
        Err(e) => {
            tracing::warn!(workflow_id, gate, error = %e, "automatic approval: facilitator check failed; will retry");
            return;
        }
    }
    let rationale = match api.provisional(&workflow_id).await {
        Ok(None) => "auto_approve_gates: no facilitator running, nothing to review".to_string(),
        Ok(Some(p)) if p["count"].as_u64().unwrap_or(0) == 0 => {
            "auto_approve_gates: no provisional decision to review".to_string()
        }
        Ok(Some(p)) => {
            tracing::info!(workflow_id, gate, message = %p["message"], "automatic approval waits for a person's review");
            return;
        }
        Err(e) => {
            tracing::warn!(workflow_id, gate, error = %e, "automatic approval: facilitator check failed; will retry");
            return;
        }
    };
    let op = GateOp::Decide {
        workflow_id: workflow_id.clone(),
        gate: Some(gate.clone()),
        req: GateRequest {
            action: GateAction::Approve,
            decided_by: "auto".into(),
            rationale,
            send_back_to: Vec::new(),
        },
    };
    if let Err(e) = call(&handle, op).await {
        tracing::debug!(workflow_id, gate, error = %e, "automatic approval not applied");
    }
}

/// Registers `gates`, `gate`, `gate_decide`, `gate_review` and `rerun`
/// (the leader answers).
pub fn routes(svc: &mut caucus_shared::service::Service, slot: super::SharedScheduler) {
    let ctx = svc.context().clone();
    let gate_api = GateApi {
        client: ctx.nats.clone(),
        subjects: ctx.subjects.clone(),
        timeout: ctx.config.nats.request_timeout,
    };
    for op in ["gates", "gate", "gate_decide", "gate_review", "rerun"] {
        let slot = slot.clone();
        let api = gate_api.clone();
        let health = ctx.health.clone();
        svc.route(op, move |body| {
            let slot = slot.clone();
            let api = api.clone();
            let health = health.clone();
            async move {
                let handle = super::leader_only(&slot, &health)?;
                match op {
                    "gates" => api.list(handle, body).await,
                    "gate" => api.package(handle, body).await,
                    "gate_decide" => api.decide(handle, body).await,
                    "gate_review" => api.review(handle, body).await,
                    _ => api.rerun(handle, body).await,
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debates_at_levels_one_and_two_hold_automatic_approval() {
        let listed = vec![
            json!({"debate_id": "a", "state": "awaiting_evidence"}),
            json!({"debate_id": "b", "state": "mediating"}),
            json!({"debate_id": "c", "state": "awaiting_human"}),
            json!({"debate_id": "d", "state": "provisional"}),
            json!({"debate_id": "e", "state": "resolved"}),
        ];
        let got = debates_in_motion(&[], &listed, Duration::ZERO);
        assert_eq!(got, ["a", "b"]);
    }

    #[test]
    fn a_named_debate_not_opened_yet_holds_approval_for_a_while_only() {
        let named = vec!["margin-wf".to_string()];
        assert_eq!(
            debates_in_motion(&named, &[], Duration::from_secs(1)),
            ["margin-wf"]
        );
        assert!(debates_in_motion(&named, &[], UNOPENED_DEBATE_WAIT).is_empty());
        let settled = vec![json!({"debate_id": "margin-wf", "state": "awaiting_human"})];
        assert!(debates_in_motion(&named, &settled, Duration::ZERO).is_empty());
    }
}
