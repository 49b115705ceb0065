//! The `debates` page (issue 13 item 2): the experts' queues as "2/3",
//! debates with level, deadline and state (open ones first), one debate
//! with its history, and a person's level-3 decision.

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::{html, Markup};
use serde::Deserialize;

use caucus_shared::api::facilitator::{
    Debates, DebatesRequest, Decide, DecideRequest, ExpertLoad, Side, UnknownSide,
};
use caucus_shared::api::Empty;

use crate::error::PageError;
use crate::layout::{page, time};
use crate::state::AppState;
use crate::viewer::Viewer;

use super::gates::form::{api_error, check_rationale, flash, PostForm};
use super::gates::live;

mod detail;

/// Its routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/debates", get(list))
        .route("/debates/{debate_id}", get(detail::show))
        .route("/debates/{debate_id}/decide", post(decide))
}

/// Filters, page and flash of the list.
#[derive(Debug, Default, Deserialize)]
struct ListQuery {
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    done: Option<String>,
}

async fn list(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<ListQuery>,
) -> Result<Markup, PageError> {
    let filter = q.state.clone().filter(|s| !s.is_empty());
    let req = DebatesRequest {
        state: filter.clone(),
        limit: Some(state.console().page_size),
        cursor: q.cursor.filter(|c| !c.is_empty()),
        ..DebatesRequest::default()
    };
    let (load, page_) = futures::join!(
        state.api.call::<ExpertLoad>(&Empty {}),
        state.api.call::<Debates>(&req),
    );
    let (load, page_) = (load?, page_?);
    let body = html! {
        @if let Some(msg) = flash(q.done.as_deref()) { p class="flash" { (msg) } }
        section id="experts" {
            h2 { "Expert queues" }
            @if load.is_empty() { p { "No experts configured." } } @else {
                ul {
                    @for (expert, held) in &load {
                        li data-expert=(expert) { (expert) ": " span class="load" { (held) } }
                    }
                }
            }
        }
        section {
            h2 { "Debates (" (page_.total) ")" }
            form method="get" action="/debates" {
                label { "State "
                    select name="state" {
                        option value="" { "any" }
                        @for s in STATES {
                            option value=(s) selected[filter.as_deref() == Some(*s)] { (s) }
                        }
                    }
                }
                " " button type="submit" { "Filter" }
            }
            table id="debates" {
                thead { tr { th { "Debate" } th { "Topic" } th { "Challenger" } th { "Challenged" }
                             th { "Level" } th { "State" } th { "Deadline" } th { "Expert" }
                             th { "Workflow" } th { "Resolution" } th { "Opened" } } }
                tbody {
                    @for d in &page_.debates {
                        tr data-debate-id=(d.debate_id) {
                            td { a href={"/debates/" (d.debate_id)} { (d.debate_id) } }
                            td { (d.topic) }
                            td { (d.challenger) }
                            td { (d.challenged) }
                            td class="level" { (d.level) }
                            td class="state" { (d.state.as_str())
                                @if d.provisional { " " span class="flag" { "provisional decision" } } }
                            td { @if let Some(at) = &d.deadline { (time(at)) } }
                            td { @if let Some(e) = &d.expert { (e) } }
                            td { @if let Some(w) = &d.workflow_id { a href={"/gates/" (w)} { (w) } } }
                            td { @if let Some(r) = &d.resolution { (r) } }
                            td { (time(&d.opened_at)) }
                        }
                    }
                }
            }
            @if let Some(c) = &page_.next_cursor {
                p { a rel="next" href={"/debates?cursor=" (c) "&state=" (filter.as_deref().unwrap_or(""))} { "Next page" } }
            }
        }
        (live::reload_on(&["debate"]))
    };
    Ok(page("Debates", &viewer, body))
}

/// The states a debate can be in, for the filter.
const STATES: &[&str] = &[
    "awaiting_ack",
    "awaiting_evidence",
    "awaiting_verdict",
    "mediating",
    "awaiting_human",
    "provisional",
    "resolved",
];

/// The level-3 decision form.
#[derive(Debug, Default, Deserialize)]
struct DecideForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    side: String,
    #[serde(default)]
    rationale: String,
    /// Who decides when nobody is logged in (the debate's expert).
    #[serde(default)]
    expert: String,
    /// `1`: the expert cannot take it; the conservative default applies.
    #[serde(default)]
    unavailable: String,
}

async fn decide(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(debate_id): Path<String>,
    PostForm(form): PostForm<DecideForm>,
) -> Result<Response, PageError> {
    viewer.check_csrf(&form.csrf)?;
    let rationale = form.rationale.trim().to_string();
    check_rationale(&state, &rationale)?;
    let unavailable = form.unavailable == "1";
    let side = if unavailable {
        None
    } else {
        Some(
            form.side
                .parse::<Side>()
                .map_err(|e: UnknownSide| PageError::BadRequest(e.to_string()))?,
        )
    };
    // The API server names the authenticated person; without
    // authentication the form says who (the expert holding the debate).
    let expert = viewer
        .identity
        .clone()
        .or(Some(form.expert.trim().to_string()).filter(|e| !e.is_empty()))
        .unwrap_or_else(|| "console".into());
    viewer
        .api(&state)
        .call::<Decide>(&DecideRequest {
            debate_id: debate_id.clone(),
            expert,
            side,
            position: None,
            rationale,
            unavailable,
        })
        .await
        .map_err(|e| api_error(e, &format!("debate {debate_id}")))?;
    Ok(Redirect::to(&format!("/debates/{debate_id}?done=decided")).into_response())
}
