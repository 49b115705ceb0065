//! `GET /workflows/{id}`: one workflow. Its task table, a Gantt of planned
//! against actual, outputs, failures and retries, level reviews, research
//! phases and the audit trail; and its actions: `POST
//! /workflows/{id}/pause`, `/resume`, `/rerun` (each redirects back with
//! `?done=…`).

use axum::extract::{Path, Query, State};
use axum::response::{Html, Redirect};
use axum::routing::{get, post};
use axum::Router;
use chrono::{DateTime, Utc};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::Value;

use caucus_shared::api::coordinator::audit::{Audit, AuditReply, AuditRequest};
use caucus_shared::api::coordinator::control::{Pause, PauseRequest, Resume, ResumeRequest};
use caucus_shared::api::coordinator::gates::{Rerun, RerunRequest};
use caucus_shared::api::coordinator::plan::{PlanOp, PlanRequest};
use caucus_shared::api::coordinator::status::{Status, StatusRequest, TaskView, WorkflowView};

use super::gates::form::PostForm;
use super::overview::duration;
use super::plan::{gantt, planned_bars, Bar};
use crate::error::PageError;
use crate::layout;
use crate::state::AppState;
use crate::viewer::Viewer;

/// Its routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/workflows/{id}", get(show))
        .route("/workflows/{id}/pause", post(pause))
        .route("/workflows/{id}/resume", post(resume))
        .route("/workflows/{id}/rerun", post(rerun))
}

/// The flash of a redirect after an action.
#[derive(Debug, Default, Deserialize)]
pub struct Done {
    /// What was done: `paused`, `resumed`, `rerun`.
    #[serde(default)]
    pub done: Option<String>,
}

/// The workflow with its tasks (and outputs), or 404 naming the id.
async fn load(state: &AppState, id: &str) -> Result<WorkflowView, PageError> {
    let reply = state
        .api
        .call::<Status>(&StatusRequest {
            ids: vec![id.to_string()],
            tasks: true,
            ..Default::default()
        })
        .await?;
    reply
        .workflows
        .into_iter()
        .find(|w| w.workflow_id == id)
        .ok_or_else(|| PageError::NotFound(format!("no workflow `{id}`")))
}

async fn show(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
    Query(done): Query<Done>,
) -> Result<Html<String>, PageError> {
    let w = load(&state, &id).await?;
    // The plan and the audit trail are extras: a pipeline the planner
    // cannot read again, or a workflow that is not a research run, shows
    // without them.
    let plan_req = PlanRequest {
        items: vec![w.item.clone()],
        pipeline: Value::String(w.pipeline.clone()),
        capacities: Default::default(),
    };
    let (plan, audit) = tokio::join!(state.api.call::<PlanOp>(&plan_req), async {
        if w.research.is_some() {
            state
                .api
                .call::<Audit>(&AuditRequest {
                    workflow_id: id.clone(),
                })
                .await
                .ok()
        } else {
            None
        }
    });
    let tasks: Vec<(&String, &TaskView)> = w.tasks.iter().flatten().collect();
    let mut bars: Vec<Bar> = Vec::new();
    let planned = plan.as_ref().ok();
    if let Some(p) = planned {
        bars.extend(planned_bars(p));
    }
    let actual = actual_bars(&w, &tasks);
    let body = html! {
        @if let Some(d) = &done.done { p.flash #done { "Done: " (d) } }
        (summary(&w))
        (actions(&viewer, &w))
        h2 { "Tasks" }
        (task_table(&tasks))
        h2 { "Gantt: planned against actual" }
        @if planned.is_none() { p { small { "No plan: the planner could not read pipeline `" (w.pipeline) "` again." } } }
        @if bars.is_empty() && actual.is_empty() { p { "Nothing has run yet." } }
        @else {
            p { small { "Planned in pipeline time units scaled to its makespan; actual in seconds since submission." } }
            (gantt(&scale_planned(bars, &actual), "s"))
        }
        (failures(&w, &tasks))
        (outputs(&tasks))
        (level_reviews(&w))
        (research(&w, audit.as_ref()))
    };
    let title = format!("Workflow {} · {}", w.item, w.pipeline);
    Ok(Html(layout::page(&title, &viewer, body).into_string()))
}

fn summary(w: &WorkflowView) -> Markup {
    html! {
        dl #summary {
            dt { "Workflow" } dd #workflow-id { (w.workflow_id) }
            dt { "Item" } dd { (w.item) }
            dt { "Pipeline" } dd { (w.pipeline) }
            dt { "State" } dd.state { (w.state.as_str()) }
            dt { "Progress" } dd { (w.progress.completed) "/" (w.progress.total) " tasks" }
            dt { "Submitted" } dd { (layout::time(&w.created_at)) }
            @if let Some(f) = &w.finished_at { dt { "Finished" } dd { (layout::time(f)) } }
            @if let Some(ms) = w.elapsed_ms { dt { "Elapsed" } dd { (duration(ms)) } }
            @if let Some(p) = &w.pause {
                dt { "Pause" } dd #pause { (p.reason) " (by " (p.trigger_source) ", requested " (layout::time(&p.requested_at)) ")" }
            }
            @if w.reevaluate {
                dt { "Flags" } dd {
                    @for f in &w.flags { span.flag { "re-evaluate: " (f.kind) } " " (layout::time(&f.at)) " " }
                }
            }
            @if !w.open_gates.is_empty() {
                dt { "Open gates" } dd { a href={ "/gates/" (w.workflow_id) } { (w.open_gates.join(", ")) } }
            }
        }
    }
}

fn actions(viewer: &Viewer, w: &WorkflowView) -> Markup {
    let id = &w.workflow_id;
    html! {
        section #actions {
            form.inline method="post" action={ "/workflows/" (id) "/pause" } {
                (layout::csrf_field(viewer))
                input type="text" name="reason" placeholder="why pause" ;
                button #pause-button type="submit" { "Pause" }
            }
            " "
            form.inline method="post" action={ "/workflows/" (id) "/resume" } {
                (layout::csrf_field(viewer))
                button #resume-button type="submit" { "Resume" }
            }
            " "
            form.inline method="post" action={ "/workflows/" (id) "/rerun" } {
                (layout::csrf_field(viewer))
                input type="text" name="tasks" placeholder="tasks or stages, comma separated" required;
                input type="text" name="reason" placeholder="why re-run" required;
                button #rerun-button type="submit" { "Re-run" }
            }
        }
    }
}

fn task_table(tasks: &[(&String, &TaskView)]) -> Markup {
    html! {
        table #tasks {
            thead { tr {
                th { "Task" } th { "Agent type" } th { "State" } th { "Attempt" } th { "Worker" }
                th { "Started" } th { "Finished" } th { "Error" }
            } }
            tbody {
                @for (key, t) in tasks {
                    tr data-task=(key) {
                        td { (key) } td { (t.agent_type) } td.state { (t.state.as_str())
                            @if t.overdue { " " span.flag { "overdue" } } }
                        td { (t.attempt) } td { (t.worker_id.clone().unwrap_or_default()) }
                        td { @if let Some(s) = &t.started_at { (layout::time(s)) } }
                        td { @if let Some(f) = &t.finished_at { (layout::time(f)) } }
                        td.error { @if let Some(e) = &t.error { (e.error_type) ": " (e.message) } }
                    }
                }
            }
        }
    }
}

/// Seconds since submission of one moment.
fn secs(w: &WorkflowView, at: &DateTime<Utc>) -> f64 {
    (*at - w.created_at).num_milliseconds().max(0) as f64 / 1000.0
}

/// What ran, in seconds since submission (a running task ends now).
fn actual_bars(w: &WorkflowView, tasks: &[(&String, &TaskView)]) -> Vec<Bar> {
    let now = Utc::now();
    tasks
        .iter()
        .filter_map(|(key, t)| {
            let start = t.started_at?;
            let end = t.finished_at.unwrap_or(now).max(start);
            Some(Bar {
                row: (*key).clone(),
                start: secs(w, &start),
                end: secs(w, &end),
                kind: "actual",
                critical: false,
            })
        })
        .collect()
}

/// Puts the planned bars (time units) on the actual axis (seconds): the
/// planned makespan is stretched to the actual one, so the shapes compare.
fn scale_planned(planned: Vec<Bar>, actual: &[Bar]) -> Vec<Bar> {
    let plan_end = planned.iter().map(|b| b.end).fold(0.0_f64, f64::max);
    let actual_end = actual.iter().map(|b| b.end).fold(0.0_f64, f64::max);
    let k = if plan_end > 0.0 && actual_end > 0.0 {
        actual_end / plan_end
    } else {
        1.0
    };
    let mut out: Vec<Bar> = planned
        .into_iter()
        .map(|b| Bar {
            start: b.start * k,
            end: b.end * k,
            ..b
        })
        .collect();
    out.extend(actual.iter().cloned());
    out
}

fn failures(w: &WorkflowView, tasks: &[(&String, &TaskView)]) -> Markup {
    let retried: Vec<_> = tasks
        .iter()
        .filter(|(_, t)| t.attempt > 1 || t.error.is_some())
        .collect();
    html! {
        section #failures {
            h2 { "Failures and retries" }
            @if let Some(f) = &w.failure { p.error #failure { (f) } }
            @if retried.is_empty() && w.failure.is_none() { p { "None." } }
            ul {
                @for (key, t) in &retried {
                    li { (key) ": attempt " (t.attempt)
                        @if let Some(e) = &t.error { " · " (e.error_type) " (" (format!("{:?}", e.class).to_lowercase()) "): " (e.message) } }
                }
            }
            @if !w.reruns.is_empty() {
                h3 { "Re-runs" }
                ul { @for r in &w.reruns { li { pre { (pretty(&serde_json::to_value(r).unwrap_or_default())) } } } }
            }
        }
    }
}

fn outputs(tasks: &[(&String, &TaskView)]) -> Markup {
    html! {
        section #outputs {
            h2 { "Outputs" }
            @for (key, t) in tasks {
                @if let Some(o) = t.output.as_ref().filter(|o| !o.is_null()) {
                    details { summary { (key) } pre { (pretty(o)) } }
                }
            }
        }
    }
}

fn level_reviews(w: &WorkflowView) -> Markup {
    html! {
        @if let Some(l) = &w.level_review {
            section #level-reviews {
                h2 { "Level reviews" }
                p { "Policy: " (format!("{:?}", l.policy.mode).to_lowercase()) " by " (l.policy.agent) }
                @for (i, level) in l.levels.iter().enumerate() {
                    details { summary { "Level " (i + 1) }
                        pre { (pretty(&serde_json::to_value(level).unwrap_or_default())) } }
                }
            }
        }
    }
}

fn research(w: &WorkflowView, audit: Option<&AuditReply>) -> Markup {
    html! {
        @if let Some(r) = &w.research {
            section #research {
                h2 { "Research phases" }
                p { "Phase: " strong { (r.phase) } " since " (layout::time(&r.phase_started_at)) }
                table { thead { tr { th { "Phase" } th { "Stage" } } }
                    tbody { @for (phase, stage) in &r.phase_stages { tr { td { (phase) } td { (stage) } } } } }
                @if !r.passed.is_empty() { p { "Gates passed: " (r.passed.iter().cloned().collect::<Vec<_>>().join(", ")) } }
            }
        }
        @if let Some(a) = audit {
            section #audit {
                h2 { "Audit trail" }
                table { thead { tr { th { "At" } th { "Agent" } th { "Action" } th { "Result" } } }
                    tbody { @for e in &a.entries {
                        tr { td { (layout::time(&e.at)) } td { (e.agent) } td { (e.action) } td { (e.result) } }
                    } } }
            }
        }
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// The pause form.
#[derive(Debug, Default, Deserialize)]
pub struct PauseForm {
    /// Why (shown to people).
    #[serde(default)]
    pub reason: String,
    /// The page's CSRF token.
    #[serde(default)]
    pub csrf: String,
}

/// The resume form.
#[derive(Debug, Default, Deserialize)]
pub struct ResumeForm {
    /// The page's CSRF token.
    #[serde(default)]
    pub csrf: String,
}

/// The re-run form.
#[derive(Debug, Default, Deserialize)]
pub struct RerunForm {
    /// Task keys or stage names, comma separated.
    #[serde(default)]
    pub tasks: String,
    /// Why (required).
    #[serde(default)]
    pub reason: String,
    /// The page's CSRF token.
    #[serde(default)]
    pub csrf: String,
}

fn back(id: &str, done: &str) -> Redirect {
    Redirect::to(&format!("/workflows/{id}?done={done}"))
}

async fn pause(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
    PostForm(f): PostForm<PauseForm>,
) -> Result<Redirect, PageError> {
    viewer.check_csrf(&f.csrf)?;
    load(&state, &id).await?;
    let reason = f.reason.trim();
    let who = viewer.identity.clone().unwrap_or_else(|| "console".into());
    viewer
        .api(&state)
        .call::<Pause>(&PauseRequest {
            workflow_id: Some(id.clone()),
            reason: Some(if reason.is_empty() {
                format!("paused from the console by {who}")
            } else {
                reason.to_string()
            }),
            trigger_source: Some("human".into()),
            ..Default::default()
        })
        .await?;
    Ok(back(&id, "paused"))
}

async fn resume(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
    PostForm(f): PostForm<ResumeForm>,
) -> Result<Redirect, PageError> {
    viewer.check_csrf(&f.csrf)?;
    load(&state, &id).await?;
    viewer
        .api(&state)
        .call::<Resume>(&ResumeRequest {
            workflow_id: Some(id.clone()),
            ..Default::default()
        })
        .await?;
    Ok(back(&id, "resumed"))
}

async fn rerun(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
    PostForm(f): PostForm<RerunForm>,
) -> Result<Redirect, PageError> {
    viewer.check_csrf(&f.csrf)?;
    let tasks: Vec<String> = f
        .tasks
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if tasks.is_empty() {
        return Err(PageError::BadRequest(
            "`tasks`: name the tasks or stages to re-run".into(),
        ));
    }
    if f.reason.trim().is_empty() {
        return Err(PageError::BadRequest("`reason`: say why it re-runs".into()));
    }
    load(&state, &id).await?;
    viewer
        .api(&state)
        .call::<Rerun>(&RerunRequest {
            workflow_id: id.clone(),
            tasks,
            groups: Vec::new(),
            reason: f.reason.trim().to_string(),
            requested_by: viewer.identity.clone(),
            assumptions: Default::default(),
        })
        .await?;
    Ok(back(&id, "rerun"))
}
