//! The `gates` page (issue 13 item 2): open gates oldest first, each
//! gate's decision package, and the decisions a person makes there:
//! approve, reject or send back with a rationale, and confirm, override or
//! re-debate a provisional decision.

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::{html, Markup};
use serde::Deserialize;

use caucus_shared::api::coordinator::gates::{
    Gate, GateAction, GateDecide, GateDecideRequest, GateRequest, Gates, GatesRequest, OpenGate,
};

use crate::error::PageError;
use crate::layout::{page, time};
use crate::state::AppState;
use crate::viewer::Viewer;

pub(crate) mod form;
pub(crate) mod live;
mod package;
mod positions;

pub(crate) use positions::position;
mod provisional;

use form::{api_error, check_rationale, flash, words, PostForm};

/// Its routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/gates", get(list))
        .route("/gates/{workflow_id}", get(show))
        .route("/gates/{workflow_id}/decide", post(decide))
        .merge(provisional::routes())
}

/// `?cursor=` of the list and `?done=` after an action.
#[derive(Debug, Default, Deserialize)]
struct ListQuery {
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    done: Option<String>,
    #[serde(default)]
    workflow: Option<String>,
}

async fn list(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<ListQuery>,
) -> Result<Markup, PageError> {
    let reply = state
        .api
        .call::<Gates>(&GatesRequest {
            limit: Some(state.console().page_size),
            cursor: q.cursor.filter(|c| !c.is_empty()),
            ..GatesRequest::default()
        })
        .await?;
    let body = html! {
        @if let Some(msg) = flash(q.done.as_deref()) {
            p class="flash" {
                (msg)
                @if let Some(w) = &q.workflow { " (" a href={"/workflows/" (w)} { (w) } ")" }
            }
        }
        p { (reply.count) " open gate(s), oldest first." }
        table id="gates" {
            thead { tr { th { "Item" } th { "Pipeline" } th { "Gate" } th { "Opened" }
                         th { "Waiting" } th { "Reminders" } th { "Sent back" } th { "Workflow" } } }
            tbody {
                @for g in &reply.gates { (gate_row(g)) }
            }
        }
        @if let Some(c) = &reply.next_cursor {
            p { a rel="next" href={"/gates?cursor=" (c)} { "Next page" } }
        }
        // A gate opening or closing anywhere changes the list.
        (live::reload_on(&["gate"]))
    };
    Ok(page("Gates", &viewer, body))
}

fn gate_row(g: &OpenGate) -> Markup {
    html! {
        tr data-workflow-id=(g.workflow_id) {
            td { a href={"/gates/" (g.workflow_id)} { (g.item) } }
            td { (g.pipeline) }
            td { (g.gate) }
            td { @if let Some(at) = &g.opened_at { (time(at)) } }
            td class="waiting" { (waiting(g.waiting_ms)) }
            td { (g.reminders_sent) @if g.escalated { " " span class="flag" { "escalated" } } }
            td { (g.sent_back) }
            td { a href={"/workflows/" (g.workflow_id)} { (g.workflow_id) } }
        }
    }
}

/// Milliseconds waited, for people (`3m 12s`).
pub(crate) fn waiting(ms: Option<i64>) -> String {
    let Some(ms) = ms else { return "-".into() };
    let s = ms.max(0) / 1000;
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m {s}s"),
        (h, m, _) => format!("{h}h {m}m"),
    }
}

/// `?done=` after an action on the gate's page.
#[derive(Debug, Default, Deserialize)]
struct DoneQuery {
    #[serde(default)]
    done: Option<String>,
}

async fn show(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(workflow_id): Path<String>,
    Query(q): Query<DoneQuery>,
) -> Result<Markup, PageError> {
    let pkg = state
        .api
        .call::<Gate>(&GateRequest {
            workflow_id: workflow_id.clone(),
            gate: None,
        })
        .await
        .map_err(|e| api_error(e, &format!("workflow {workflow_id}")))?;
    let title = format!("Gate {} · {}", pkg.gate.gate, pkg.item);
    let body = package::render(&pkg, &viewer, flash(q.done.as_deref()));
    Ok(page(&title, &viewer, body))
}

/// The decision form.
#[derive(Debug, Default, Deserialize)]
struct DecideForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    action: String,
    #[serde(default)]
    rationale: String,
    #[serde(default)]
    to_stage: String,
    #[serde(default)]
    gate: String,
}

async fn decide(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(workflow_id): Path<String>,
    PostForm(form): PostForm<DecideForm>,
) -> Result<Response, PageError> {
    viewer.check_csrf(&form.csrf)?;
    let action = match form.action.as_str() {
        "approve" => GateAction::Approve,
        "reject" => GateAction::Reject,
        "send_back" => GateAction::SendBack,
        other => {
            return Err(PageError::BadRequest(format!(
                "`{other}` is not a decision: approve, reject or send_back"
            )))
        }
    };
    let rationale = form.rationale.trim().to_string();
    check_rationale(&state, &rationale)?;
    if action != GateAction::Approve && rationale.is_empty() {
        return Err(PageError::BadRequest(format!(
            "a rationale is required to {}",
            action.as_str().replace('_', " ")
        )));
    }
    let reply = viewer
        .api(&state)
        .call::<GateDecide>(&GateDecideRequest {
            workflow_id: workflow_id.clone(),
            gate: Some(form.gate).filter(|g| !g.is_empty()),
            action,
            // The API server puts the authenticated person here; without
            // authentication the console is the one deciding.
            reviewer: viewer.identity.clone().unwrap_or_else(|| "console".into()),
            rationale,
            send_back_to: words(&form.to_stage),
        })
        .await
        .map_err(|e| api_error(e, &format!("workflow {workflow_id}")))?;
    let done = match action {
        GateAction::Approve => "approved",
        GateAction::Reject => "rejected",
        GateAction::SendBack => "sent_back",
    };
    // Back to the list: after a decision the gate is no longer open (a
    // send-back reopens it once the stages ran again).
    let to = format!("/gates?done={done}&workflow={}", reply.workflow_id);
    Ok(Redirect::to(&to).into_response())
}
