//! Provisional decisions at a gate: the section listing them ("N
//! provisional decisions require review", both positions and credibility)
//! and the three reviews a person makes: confirm the conservative
//! default, override it (after seeing the downstream impact), or open a
//! re-debate.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::post;
use axum::Router;
use maud::{html, Markup};
use serde::Deserialize;

use caucus_shared::api::coordinator::gates::{DecisionPackage, GateReview, GateReviewRequest};
use caucus_shared::api::facilitator::{self, DebateRequest, GetDebate, ProvisionalDecision, Side};

use crate::error::PageError;
use crate::layout::{csrf_field, page, time};
use crate::state::AppState;
use crate::viewer::Viewer;

use super::form::{api_error, check_rationale, PostForm};
use super::positions::{position, value};

mod impact;

/// The review routes.
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/provisional/{debate_id}/confirm", post(confirm))
        .route("/provisional/{debate_id}/override", post(override_))
        .route("/provisional/{debate_id}/redebate", post(redebate))
}

/// `section#provisional` of a decision package.
pub(super) fn section(pkg: &DecisionPackage, viewer: &Viewer) -> Markup {
    let p = &pkg.provisional;
    html! {
        section id="provisional" {
            h2 { (p.message) }
            @for d in &p.decisions { (decision(d, &pkg.workflow_id, viewer)) }
        }
    }
}

fn decision(d: &ProvisionalDecision, workflow_id: &str, viewer: &Viewer) -> Markup {
    let base = format!("/provisional/{}", d.debate_id);
    html! {
        article class="provisional-decision" data-debate-id=(d.debate_id) {
            h3 { a href={"/debates/" (d.debate_id)} { (d.debate_id) } ": " (d.topic) }
            p {
                strong { (d.label.as_deref().unwrap_or("provisional decision")) }
                @if let Some(at) = &d.override_window_deadline { " · override window closes " (time(at)) }
            }
            p { "Conservative default applied: "
                @if let Some(c) = &d.conservative_position { (position(c)) } @else { "none" } }
            @if let Some(r) = &d.rationale { p { "Why: " (r) @if let Some(rule) = &d.rule { " (rule " (rule) ")" } } }
            table class="positions" {
                thead { tr { th { "Agent" } th { "Position" } th { "Credibility" } } }
                tbody {
                    @for (agent, pos) in &d.positions {
                        tr {
                            td { (agent) }
                            td { @if let Some(p) = pos { (position(p)) } @else { "none stated" } }
                            td {
                                @match d.credibility.as_ref().and_then(|c| c.get(agent).copied().flatten()) {
                                    Some(s) => { (format!("{:.2} ± {:.2} ({} records)", s.score, s.ci, s.data_points)) }
                                    None => { "-" }
                                }
                            }
                        }
                    }
                }
            }
            @if !d.alternatives.is_empty() {
                p { "Alternatives not applied: "
                    @for (i, a) in d.alternatives.iter().enumerate() { @if i > 0 { "; " } (position(a)) } }
            }
            p { "Downstream impact: "
                @if d.downstream_dependencies.is_empty() { "no analysis named as using it." }
                @else { (d.downstream_dependencies.join(", ")) " use the provisional assumption." } }
            form class="confirm inline" method="post" action={(base) "/confirm"} {
                (csrf_field(viewer))
                input type="hidden" name="workflow_id" value=(workflow_id);
                button type="submit" { "Confirm the conservative default" }
            }
            form class="override" method="post" action={(base) "/override"} {
                (csrf_field(viewer))
                input type="hidden" name="workflow_id" value=(workflow_id);
                label { "Apply the position of "
                    select name="side" {
                        option value="challenger" { "the challenger" }
                        option value="challenged" { "the challenged agent" }
                    }
                }
                " " label { "Rationale " input type="text" name="rationale" size="50" required; }
                " " button type="submit" { "Override…" }
            }
            form class="redebate" method="post" action={(base) "/redebate"} {
                (csrf_field(viewer))
                input type="hidden" name="workflow_id" value=(workflow_id);
                label { "Context for the new debate " input type="text" name="context" size="50" required; }
                " " button type="submit" { "Re-debate" }
            }
        }
    }
}

/// The fields of the three review forms.
#[derive(Debug, Default, Deserialize)]
struct ReviewForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    workflow_id: String,
    #[serde(default)]
    side: String,
    #[serde(default)]
    rationale: String,
    #[serde(default)]
    context: String,
    /// `1` on the second step of an override: commit it.
    #[serde(default)]
    confirm: String,
}

async fn confirm(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(debate_id): Path<String>,
    PostForm(form): PostForm<ReviewForm>,
) -> Result<Response, PageError> {
    viewer.check_csrf(&form.csrf)?;
    review(&state, &viewer, &debate_id, &form, Review::Confirm).await?;
    Ok(back(&form.workflow_id, "confirmed"))
}

async fn redebate(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(debate_id): Path<String>,
    PostForm(form): PostForm<ReviewForm>,
) -> Result<Response, PageError> {
    viewer.check_csrf(&form.csrf)?;
    let context = form.context.trim().to_string();
    check_rationale(&state, &context)?;
    if context.is_empty() {
        return Err(PageError::BadRequest(
            "a re-debate needs the context the new debate should weigh".into(),
        ));
    }
    review(
        &state,
        &viewer,
        &debate_id,
        &form,
        Review::Redebate { context },
    )
    .await?;
    Ok(back(&form.workflow_id, "redebated"))
}

/// First step (no `confirm=1`): the facilitator's downstream impact report
/// of the override (a dry run: nothing changes), and a button that commits
/// it. Second step: the override.
async fn override_(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(debate_id): Path<String>,
    PostForm(form): PostForm<ReviewForm>,
) -> Result<Response, PageError> {
    viewer.check_csrf(&form.csrf)?;
    let side: Side = form
        .side
        .parse()
        .map_err(|e: facilitator::UnknownSide| PageError::BadRequest(e.to_string()))?;
    let rationale = form.rationale.trim().to_string();
    check_rationale(&state, &rationale)?;
    if rationale.is_empty() {
        return Err(PageError::BadRequest(
            "a rationale is required to override a provisional decision".into(),
        ));
    }
    if form.confirm != "1" {
        let page = impact_page(&state, &viewer, &debate_id, &form, side, &rationale).await?;
        return Ok(page.into_response());
    }
    let commit = Review::Override {
        side,
        rationale,
        dry_run: false,
    };
    review(&state, &viewer, &debate_id, &form, commit).await?;
    Ok(back(&form.workflow_id, "overridden"))
}

/// The override's first step: a dry run of the override, so the page
/// shows the facilitator's own impact report (each downstream analysis,
/// its result now and the estimate after the override, the re-runs) for
/// exactly the review the second step commits; nothing changes until then.
async fn impact_page(
    state: &AppState,
    viewer: &Viewer,
    debate_id: &str,
    form: &ReviewForm,
    side: Side,
    rationale: &str,
) -> Result<maud::Markup, PageError> {
    let debate = state
        .api
        .call::<GetDebate>(&DebateRequest {
            debate_id: debate_id.to_string(),
        })
        .await
        .map_err(|e| api_error(e, &format!("debate {debate_id}")))?;
    let dry = review(
        state,
        viewer,
        debate_id,
        form,
        Review::Override {
            side,
            rationale: rationale.to_string(),
            dry_run: true,
        },
    )
    .await?;
    let d = debate.debate;
    let provisional = d
        .resolution
        .as_ref()
        .and_then(|r| r.final_position.as_ref());
    let (agent, chosen) = match side {
        Side::Challenger => (&d.challenge.challenger, d.challenger_position.as_ref()),
        Side::Challenged => (&d.challenge.challenged, d.challenged_position.as_ref()),
    };
    let body = html! {
        section id="impact" {
            h2 { "Downstream impact of overriding the provisional decision" }
            p { "Debate " a href={"/debates/" (debate_id)} { (debate_id) } ": " (d.challenge.disputed_finding)
                " · nothing has changed yet: this is the facilitator's report of what the override will do." }
            table {
                tr { th { "Provisional (conservative default)" }
                     td { @if let Some(p) = provisional { (position(p)) } @else { "none" } } }
                tr { th { "Would apply (" (agent) ", " (side.as_str()) ")" }
                     td { @if let Some(p) = chosen { (position(p)) } @else { "no position stated" } } }
                @if let (Some(old), Some(new)) = (provisional.and_then(|p| p.value.as_ref()), chosen.and_then(|p| p.value.as_ref())) {
                    tr { th { "Changed assumption" } td { (value(old)) " → " (value(new)) } }
                }
            }
            h3 { "Analyses using the provisional assumption" }
            (impact::report(dry.impact.as_ref()))
            p { "Rationale: " (rationale) }
            form id="override-commit" method="post" action={"/provisional/" (debate_id) "/override"} {
                (csrf_field(viewer))
                input type="hidden" name="workflow_id" value=(form.workflow_id);
                input type="hidden" name="side" value=(side.as_str());
                input type="hidden" name="rationale" value=(rationale);
                input type="hidden" name="confirm" value="1";
                button type="submit" { "Override and re-run what the impact requires" }
            }
            @if !form.workflow_id.is_empty() {
                p { a href={"/gates/" (form.workflow_id)} { "Back to the gate without overriding" } }
            }
        }
    };
    Ok(page("Override a provisional decision", viewer, body))
}

/// What a person does with a provisional decision.
enum Review {
    /// Keep the conservative default.
    Confirm,
    /// Apply `side`'s position; with `dry_run`, only report the impact.
    Override {
        side: Side,
        rationale: String,
        dry_run: bool,
    },
    /// Debate again with more context.
    Redebate { context: String },
}

/// One review through the coordinator (which re-runs what an override
/// requires), or straight to the facilitator for a debate of no workflow;
/// the facilitator's answer (with the impact of an override).
async fn review(
    state: &AppState,
    viewer: &Viewer,
    debate_id: &str,
    form: &ReviewForm,
    what: Review,
) -> Result<facilitator::GateReviewReply, PageError> {
    let api = viewer.api(state);
    let reviewer = viewer.identity.clone().unwrap_or_else(|| "console".into());
    let not_found = |e| api_error(e, &format!("debate {debate_id}"));
    if form.workflow_id.is_empty() {
        let (action, dry_run) = match what {
            Review::Confirm => (facilitator::GateAction::Confirm { reviewer }, false),
            Review::Override {
                side,
                rationale,
                dry_run,
            } => (
                facilitator::GateAction::Override {
                    reviewer,
                    side: Some(side),
                    position: None,
                    rationale,
                },
                dry_run,
            ),
            Review::Redebate { context } => (
                facilitator::GateAction::Redebate { reviewer, context },
                false,
            ),
        };
        return api
            .call::<facilitator::GateReview>(&facilitator::GateReviewRequest {
                debate_id: debate_id.to_string(),
                action,
                analyses: Vec::new(),
                dry_run,
            })
            .await
            .map_err(not_found);
    }
    let mut req = GateReviewRequest {
        workflow_id: form.workflow_id.clone(),
        debate_id: debate_id.to_string(),
        action: String::new(),
        reviewer: Some(reviewer),
        side: None,
        position: None,
        rationale: None,
        context: None,
        analyses: None,
        dry_run: false,
    };
    match what {
        Review::Confirm => req.action = "confirm".into(),
        Review::Override {
            side,
            rationale,
            dry_run,
        } => {
            req.action = "override".into();
            req.side = Some(side);
            req.rationale = Some(rationale);
            req.dry_run = dry_run;
        }
        Review::Redebate { context } => {
            req.action = "redebate".into();
            req.context = Some(context);
        }
    }
    let reply = api.call::<GateReview>(&req).await.map_err(not_found)?;
    Ok(reply.facilitator)
}

/// 303 back to the gate (or the debates page for a debate of no workflow).
fn back(workflow_id: &str, done: &str) -> Response {
    let to = if workflow_id.is_empty() {
        format!("/debates?done={done}")
    } else {
        format!("/gates/{workflow_id}?done={done}")
    };
    Redirect::to(&to).into_response()
}
