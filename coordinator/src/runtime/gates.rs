//! Human gates in the scheduler: decisions and re-runs applied to held
//! workflows, reminder/escalation cards, and automatic approval for
//! workflows submitted with `auto_approve_gates`.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use caucus_shared::api::coordinator::gates::{GateDecideReply, GatesReply, OpenGate, RerunReply};
use caucus_shared::config::CoordinatorConfig;
use caucus_shared::nats::api::{ApiError, OffsetPage};

use super::gates_package;
use super::views::workflow_view;
use crate::engine::Engine;
use crate::workflow::{
    GateError, GateOutcome, GateRequest, GateTimers, RerunRequest, WorkflowRecord,
};

/// A gate operation the scheduler carries out.
#[derive(Debug, Clone)]
pub enum GateOp {
    /// Open gates, oldest first, optionally of one workflow or item.
    List {
        /// Only this workflow.
        workflow_id: Option<String>,
        /// Only this item.
        item: Option<String>,
        /// The page.
        page: OffsetPage,
    },
    /// One workflow's record with its tasks (for a decision package).
    Get {
        /// The workflow.
        workflow_id: String,
    },
    /// A decision at an open gate.
    Decide {
        /// The workflow.
        workflow_id: String,
        /// The gate (optional when only one is open).
        gate: Option<String>,
        /// The decision.
        req: GateRequest,
    },
    /// A debate settled an assumption of the workflow.
    Settle {
        /// The workflow.
        workflow_id: String,
        /// The metric.
        metric: String,
        /// Its settled value.
        value: f64,
        /// Why (kept in the re-run record).
        reason: String,
    },
    /// Run tasks of a workflow again.
    Rerun {
        /// The workflow.
        workflow_id: String,
        /// The plan.
        req: RerunRequest,
    },
}

impl GateOp {
    /// The workflow the operation is about, if one.
    pub fn workflow_id(&self) -> Option<&str> {
        match self {
            GateOp::List { workflow_id, .. } => workflow_id.as_deref(),
            GateOp::Get { workflow_id }
            | GateOp::Decide { workflow_id, .. }
            | GateOp::Settle { workflow_id, .. }
            | GateOp::Rerun { workflow_id, .. } => Some(workflow_id),
        }
    }
}

fn gate_error(e: GateError) -> ApiError {
    ApiError::new(e.code(), e.to_string())
}

fn unknown(id: &str) -> ApiError {
    ApiError::not_found(format!("unknown workflow {id}"))
}

/// A reply as the JSON the scheduler's `Gate` command carries (the
/// scheduler adds `persisted` to decisions and re-runs).
fn body<T: Serialize>(reply: &T) -> Result<Value, ApiError> {
    serde_json::to_value(reply).map_err(|e| ApiError::internal(format!("gate reply: {e}")))
}

/// What [`GateOp::Settle`] changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettleReply {
    /// The workflow.
    pub workflow_id: String,
    /// The re-run it started, if any task used another value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rerun_id: Option<String>,
    /// Tasks renewed (they run again).
    pub renewed: Vec<String>,
    /// Tasks that became ready now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newly_ready: Option<Vec<String>>,
}

/// One open gate as listed by `coordinator.gates`.
pub fn open_gate(rec: &WorkflowRecord, key: &str, now: DateTime<Utc>) -> OpenGate {
    let g = rec.tasks[key].gate.as_ref();
    OpenGate {
        workflow_id: rec.workflow_id.clone(),
        item: rec.item.clone(),
        pipeline: rec.pipeline.clone(),
        gate: key.to_string(),
        opened_at: g.map(|g| g.opened_at),
        waiting_ms: g.map(|g| (now - g.opened_at).num_milliseconds().max(0)),
        reminders_sent: g.map(|g| g.reminders_sent).unwrap_or(0),
        escalated: g.is_some_and(|g| g.escalated_at.is_some()),
        sent_back: g.map(|g| g.history.len()).unwrap_or(0),
        pending_upstream: rec.pending_upstream(key),
    }
}

/// A gate decision on the engine, the workflow marked dirty. [`apply`]'s
/// `Decide` builds its reply from the outcome; an automatic approval
/// (`auto_approve_gates`) calls this alone, since nobody reads that reply
/// (the whole workflow view, a tenth of the coordinator's CPU per task
/// under load).
pub fn decide(
    engine: &mut Engine,
    dirty: &mut HashSet<String>,
    workflow_id: &str,
    gate: Option<&str>,
    req: GateRequest,
    now: DateTime<Utc>,
) -> Result<GateOutcome, ApiError> {
    let out = engine
        .decide_gate(workflow_id, gate, req, now)
        .ok_or_else(|| unknown(workflow_id))?
        .map_err(gate_error)?;
    dirty.insert(workflow_id.to_string());
    Ok(out)
}

/// Carries out `op` on the engine; marks changed workflows dirty. The
/// reply is the operation's typed reply as JSON ([`GatesReply`],
/// the [`WorkflowRecord`] itself, [`GateDecideReply`], [`SettleReply`],
/// [`RerunReply`]).
pub fn apply(
    op: GateOp,
    engine: &mut Engine,
    dirty: &mut HashSet<String>,
    now: DateTime<Utc>,
) -> Result<Value, ApiError> {
    match op {
        GateOp::List {
            workflow_id,
            item,
            page,
        } => {
            let gates: Vec<OpenGate> = engine
                .open_gates()
                .into_iter()
                .filter(|(w, _)| workflow_id.as_ref().is_none_or(|x| x == w))
                .filter_map(|(w, k)| {
                    let rec = engine.get(&w)?;
                    if item.as_ref().is_some_and(|i| i != &rec.item) {
                        return None;
                    }
                    Some(open_gate(rec, &k, now))
                })
                .collect();
            let count = gates.len();
            let (gates, next_cursor) = page.take(gates);
            body(&GatesReply {
                count,
                gates,
                next_cursor,
            })
        }
        GateOp::Get { workflow_id } => {
            let rec = engine
                .get(&workflow_id)
                .ok_or_else(|| unknown(&workflow_id))?;
            body(rec)
        }
        GateOp::Decide {
            workflow_id,
            gate,
            req,
        } => {
            let action = req.action;
            let out = decide(engine, dirty, &workflow_id, gate.as_deref(), req, now)?;
            let rec = engine.get(&workflow_id).expect("just decided");
            let decision = rec.tasks[&out.gate]
                .gate
                .as_ref()
                .and_then(|g| g.decision.as_ref().or_else(|| g.history.last()))
                .map(gates_package::decision_view);
            body(&GateDecideReply {
                workflow_id,
                gate: out.gate,
                action: gates_package::action_view(action),
                decision,
                newly_ready: out.newly_ready,
                renewed: out.renewed,
                workflow: workflow_view(rec, false),
                persisted: None,
            })
        }
        GateOp::Settle {
            workflow_id,
            metric,
            value,
            reason,
        } => {
            let out = engine
                .mutate(&workflow_id, |rec| {
                    rec.settle_assumption(&metric, value, reason, "facilitator".into(), now)
                })
                .ok_or_else(|| unknown(&workflow_id))?;
            if out.is_some() {
                dirty.insert(workflow_id.clone());
            }
            body(&match out {
                Some(o) => SettleReply {
                    workflow_id,
                    rerun_id: Some(o.rerun_id),
                    renewed: o.renewed,
                    newly_ready: Some(o.newly_ready),
                },
                None => SettleReply {
                    workflow_id,
                    rerun_id: None,
                    renewed: Vec::new(),
                    newly_ready: None,
                },
            })
        }
        GateOp::Rerun { workflow_id, req } => {
            let out = engine
                .request_rerun(&workflow_id, req, now)
                .ok_or_else(|| unknown(&workflow_id))?
                .map_err(gate_error)?;
            dirty.insert(workflow_id.clone());
            let rec = engine.get(&workflow_id).expect("just changed");
            body(&RerunReply {
                workflow_id,
                rerun_id: out.rerun_id,
                renewed: out.renewed,
                not_yet_run: out.not_yet_run,
                newly_ready: out.newly_ready,
                workflow: workflow_view(rec, false),
                persisted: None,
            })
        }
    }
}

/// The reminder and escalation settings of gate `key`: the coordinator's,
/// unless the gate stage's params set `reminders` (list of durations) or
/// `escalate_after` (a duration, or `"never"`).
pub fn timers_for(cfg: &CoordinatorConfig, rec: &WorkflowRecord, key: &str) -> GateTimers {
    let mut t = GateTimers {
        reminders: cfg.gate_reminders.clone(),
        escalate_after: Some(cfg.gate_escalate_after),
    };
    let Some(stage) = rec
        .tasks
        .get(key)
        .and_then(|task| rec.stages.iter().find(|s| s.name == task.stage))
    else {
        return t;
    };
    if let Some(list) = stage.params.get("reminders").and_then(Value::as_array) {
        let parsed: Vec<Duration> = list
            .iter()
            .filter_map(Value::as_str)
            .filter_map(|s| humantime::parse_duration(s).ok())
            .collect();
        if parsed.len() == list.len() {
            t.reminders = parsed;
        }
    }
    if let Some(s) = stage.params.get("escalate_after").and_then(Value::as_str) {
        if s == "never" {
            t.escalate_after = None;
        } else if let Ok(d) = humantime::parse_duration(s) {
            t.escalate_after = Some(d);
        }
    }
    t
}

/// Why a gate stage's params are refused (the pipeline is invalid).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GateParamsError {
    /// `reminders` is not a list.
    #[error("gate `{stage}`: params.reminders must be a list of durations")]
    RemindersNotList {
        /// The gate stage.
        stage: String,
    },
    /// An entry of `reminders` is not a duration.
    #[error("gate `{stage}`: params.reminders entry {entry} is not a duration like \"1h\"")]
    NotADuration {
        /// The gate stage.
        stage: String,
        /// The entry, as written.
        entry: Value,
    },
    /// `reminders` goes down somewhere.
    #[error("gate `{stage}`: params.reminders must be in ascending order")]
    RemindersOrder {
        /// The gate stage.
        stage: String,
    },
    /// `escalate_after` is neither a duration nor `never`.
    #[error("gate `{stage}`: params.escalate_after {value} must be a duration like \"24h\" or \"never\"")]
    EscalateAfter {
        /// The gate stage.
        stage: String,
        /// The value, as written.
        value: Value,
    },
}

/// Checks a gate stage's params when a pipeline is submitted, so a typo in
/// a duration is an error then rather than a silently ignored setting.
pub fn check_params(stage: &str, params: &Value) -> Result<(), GateParamsError> {
    let stage_name = || stage.to_string();
    if let Some(v) = params.get("reminders") {
        let list = v
            .as_array()
            .ok_or_else(|| GateParamsError::RemindersNotList {
                stage: stage_name(),
            })?;
        let mut last = Duration::ZERO;
        for x in list {
            let d = x
                .as_str()
                .and_then(|s| humantime::parse_duration(s).ok())
                .ok_or_else(|| GateParamsError::NotADuration {
                    stage: stage_name(),
                    entry: x.clone(),
                })?;
            if d < last {
                return Err(GateParamsError::RemindersOrder {
                    stage: stage_name(),
                });
            }
            last = d;
        }
    }
    if let Some(v) = params.get("escalate_after") {
        let ok = v
            .as_str()
            .is_some_and(|s| s == "never" || humantime::parse_duration(s).is_ok());
        if !ok {
            return Err(GateParamsError::EscalateAfter {
                stage: stage_name(),
                value: v.clone(),
            });
        }
    }
    Ok(())
}

/// The alert card body for a reminder or an escalation.
pub fn notice_fields(rec: &WorkflowRecord, gate: &str, waiting_ms: i64, n: u32) -> Value {
    let opened = rec
        .tasks
        .get(gate)
        .and_then(|t| t.gate.as_ref())
        .map(|g| g.opened_at);
    json!({
        "workflow_id": rec.workflow_id,
        "item": rec.item,
        "pipeline": rec.pipeline,
        "gate": gate,
        "opened_at": opened,
        "waiting_ms": waiting_ms,
        "reminder": n,
        "actions": ["approve", "reject", "send_back"],
        "api": "coordinator.gate_decide",
    })
}

/// An open gate of an auto-approving workflow, with what its approval
/// check needs.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoCandidate {
    /// The workflow.
    pub workflow_id: String,
    /// The gate's task key.
    pub gate: String,
    /// Debates the workflow's completed tasks named in their outputs
    /// (`debate_ids`): approval waits while one of them is still in motion.
    pub debates: Vec<String>,
    /// How long the gate has been open.
    pub open_for: Duration,
}

/// The open gates of `r` that may approve themselves now; none unless it
/// was submitted with `auto_approve_gates`.
fn auto_ready(r: &WorkflowRecord, now: DateTime<Utc>) -> Vec<AutoCandidate> {
    if !(r.auto_approve_gates && r.state.accepts_dispatch()) {
        return Vec::new();
    }
    r.open_gate_keys()
        .into_iter()
        .filter(|k| r.pending_upstream(k).is_empty())
        .map(|k| {
            let opened = r.tasks[&k].gate.as_ref().map_or(now, |g| g.opened_at);
            AutoCandidate {
                workflow_id: r.workflow_id.clone(),
                debates: r.named_debates(),
                open_for: (now - opened).to_std().unwrap_or_default(),
                gate: k,
            }
        })
        .collect()
}

/// Open gates of every auto-approving workflow.
pub fn auto_candidates(engine: &Engine, now: DateTime<Utc>) -> Vec<AutoCandidate> {
    engine
        .workflows()
        .flat_map(|r| auto_ready(r, now))
        .collect()
}

/// Open gates ready for automatic approval among the workflows `ids`.
pub fn auto_candidates_of(
    engine: &Engine,
    ids: &[String],
    now: DateTime<Utc>,
) -> Vec<AutoCandidate> {
    let mut seen = HashSet::new();
    ids.iter()
        .filter(|id| seen.insert(id.as_str()))
        .filter_map(|id| engine.get(id))
        .flat_map(|r| auto_ready(r, now))
        .collect()
}

/// Assumptions settled by a review, as the workflow stores them.
pub fn assumptions(metric: &str, value: f64) -> BTreeMap<String, Value> {
    BTreeMap::from([(metric.to_string(), json!(value))])
}
