//! One debate: the challenge, both positions, evidence, the level-2
//! assessment, the resolution, the history, and (at level 3) the form a
//! person decides with.

use axum::extract::{Path, Query, State};
use maud::{html, Markup};
use serde::Deserialize;

use caucus_shared::api::facilitator::{DebateRecord, DebateRequest, DebateState, GetDebate};

use crate::error::PageError;
use crate::layout::{csrf_field, page, time};
use crate::state::AppState;
use crate::viewer::Viewer;

use super::super::gates::form::{api_error, flash};

/// `?done=` after the decision.
#[derive(Debug, Default, Deserialize)]
pub(super) struct DoneQuery {
    #[serde(default)]
    done: Option<String>,
}

/// `GET /debates/{debate_id}`.
pub(super) async fn show(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(debate_id): Path<String>,
    Query(q): Query<DoneQuery>,
) -> Result<Markup, PageError> {
    let reply = state
        .api
        .call::<GetDebate>(&DebateRequest {
            debate_id: debate_id.clone(),
        })
        .await
        .map_err(|e| api_error(e, &format!("debate {debate_id}")))?;
    let d = &reply.debate;
    let body = html! {
        @if let Some(msg) = flash(q.done.as_deref()) { p class="flash" { (msg) } }
        (summary(d, reply.metric.as_deref()))
        @if d.state == DebateState::AwaitingHuman { (decide_form(d, &viewer)) }
        (resolution(d))
        section id="history" {
            h2 { "History" }
            table {
                thead { tr { th { "At" } th { "Level" } th { "State" } th { "Event" } } }
                tbody {
                    @for h in &d.history {
                        tr { td { (time(&h.at)) } td { (h.level) } td { (h.state.as_str()) } td { (h.event) } }
                    }
                }
            }
        }
    };
    Ok(page(&format!("Debate {debate_id}"), &viewer, body))
}

fn summary(d: &DebateRecord, metric: Option<&str>) -> Markup {
    let c = &d.challenge;
    html! {
        section id="debate" data-level=(d.level) data-state=(d.state.as_str()) {
            p { strong { "Disputed finding: " } (c.disputed_finding) @if let Some(m) = metric { " (" (m) ")" } }
            p { "Level " span class="level" { (d.level) } " · " span class="state" { (d.state.as_str()) }
                @if let Some(at) = &d.deadline { " · deadline " (time(at)) }
                @if let Some(e) = &d.expert { " · expert " (e) }
                " · opened " (time(&d.opened_at)) }
            p { "Basis: " (c.challenge_basis) }
            table class="positions" {
                thead { tr { th { "Side" } th { "Agent" } th { "Position" } th { "Credibility" } } }
                tbody {
                    tr {
                        td { "challenger" } td { (c.challenger) }
                        td { @if let Some(p) = &d.challenger_position { (crate::pages::gates::position(p)) } }
                        td { @if let Some(s) = d.assessment.as_ref().and_then(|a| a.challenger.as_ref()) { (format!("{:.2}", s.score)) } }
                    }
                    tr {
                        td { "challenged" } td { (c.challenged) }
                        td { @if let Some(p) = &d.challenged_position { (crate::pages::gates::position(p)) } }
                        td { @if let Some(s) = d.assessment.as_ref().and_then(|a| a.challenged.as_ref()) { (format!("{:.2}", s.score)) } }
                    }
                }
            }
            @if let Some(a) = &d.assessment { p { "Level 2: " (a.reason) } }
            @if !d.evidence.is_empty() {
                h3 { "Evidence" }
                ul {
                    @for e in &d.evidence {
                        li { (e.from) " (" (e.side.as_str()) ", " (time(&e.at)) "): " (e.evidence.join("; ")) }
                    }
                }
            }
        }
    }
}

/// `form#decide-debate`: the person takes one side, or says they cannot
/// (the conservative default applies).
fn decide_form(d: &DebateRecord, viewer: &Viewer) -> Markup {
    html! {
        section id="decide" {
            h2 { "Decide (level 3)" }
            form id="decide-debate" method="post" action={"/debates/" (d.debate_id) "/decide"} {
                (csrf_field(viewer))
                @if viewer.identity.is_none() {
                    input type="hidden" name="expert" value=(d.expert.as_deref().unwrap_or(""));
                }
                p { label { "Rationale " br; textarea name="rationale" rows="3" cols="80" {} } }
                button type="submit" name="side" value="challenger" { "The challenger (" (d.challenge.challenger) ") is right" }
                " "
                button type="submit" name="side" value="challenged" { "The challenged agent (" (d.challenge.challenged) ") is right" }
                " "
                button type="submit" name="unavailable" value="1" { "I cannot decide: apply the conservative default" }
            }
        }
    }
}

fn resolution(d: &DebateRecord) -> Markup {
    html! {
        @if let Some(r) = &d.resolution {
            section id="resolution" {
                h2 { "Resolution" }
                p { strong { (r.label) } " at level " (r.level) ", " (time(&r.resolved_at))
                    @if let Some(by) = &r.decided_by { " by " (by) } }
                @if let Some(p) = &r.final_position { p { "Position: " (crate::pages::gates::position(p)) } }
                p { (r.rationale) }
                @if let Some(pd) = &r.provisional_details {
                    p { "Provisional decision (conservative default): " (pd.conservative_rationale)
                        "; review by " (time(&pd.review_deadline)) }
                    @if !pd.downstream_dependencies.is_empty() {
                        p { "Downstream impact: " (pd.downstream_dependencies.join(", ")) }
                    }
                }
            }
        }
    }
}
