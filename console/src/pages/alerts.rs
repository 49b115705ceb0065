//! The `alerts` page (issue 13 item 2): the correlator's alert cards and
//! its correlations with their root cause, each batch's state, and batch
//! pause and resume.

use std::collections::{BTreeMap, BTreeSet};

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::Value;

use caucus_shared::api::coordinator::control::{
    BatchPause, BatchPauseRequest, BatchResume, BatchResumeRequest, BatchStatus, BatchStatusReply,
    BatchStatusRequest,
};
use caucus_shared::api::correlator::{
    AlertCard, Alerts, Correlation, CorrelationQuery, Correlations,
};

use crate::error::PageError;
use crate::layout::{csrf_field, page, time};
use crate::state::AppState;
use crate::viewer::Viewer;

use super::gates::form::{api_error, flash, words, PostForm};

/// Its routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/alerts", get(show))
        .route("/batches/{batch_id}/pause", post(pause))
        .route("/batches/{batch_id}/resume", post(resume))
}

/// `?done=` (and the batch) after an action.
#[derive(Debug, Default, Deserialize)]
struct DoneQuery {
    #[serde(default)]
    done: Option<String>,
    #[serde(default)]
    batch: Option<String>,
}

async fn show(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<DoneQuery>,
) -> Result<Markup, PageError> {
    let query = CorrelationQuery {
        limit: Some(state.console().page_size),
        ..CorrelationQuery::default()
    };
    let (alerts, correlations) = futures::join!(
        state.api.call::<Alerts>(&query),
        state.api.call::<Correlations>(&query),
    );
    let (alerts, correlations) = (alerts?.alerts, correlations?.correlations);
    let batches = batches(&state, &correlations).await;
    let body = html! {
        @if let Some(msg) = flash(q.done.as_deref()) {
            p class="flash" { (msg) @if let Some(b) = &q.batch { " (" (b) ")" } }
        }
        section id="alerts" {
            h2 { "Alerts (" (alerts.len()) ")" }
            @if alerts.is_empty() { p { "No alerts." } }
            @for a in &alerts { (card(a, &viewer)) }
        }
        section id="correlations" {
            h2 { "Correlations (" (correlations.len()) ")" }
            @if correlations.is_empty() { p { "No correlated failures." } }
            @for c in &correlations { (correlation(c, batches.get(&c.batch_id), &viewer)) }
        }
    };
    Ok(page("Alerts", &viewer, body))
}

/// Each correlation's batch as the coordinator has it (absent: no batch
/// yet, or the coordinator did not answer; the page still shows the rest).
async fn batches(
    state: &AppState,
    correlations: &[Correlation],
) -> BTreeMap<String, BatchStatusReply> {
    let ids: BTreeSet<&str> = correlations.iter().map(|c| c.batch_id.as_str()).collect();
    let asks = ids.into_iter().map(|id| async move {
        let req = BatchStatusRequest {
            batch_id: id.to_string(),
        };
        state.api.call::<BatchStatus>(&req).await.ok()
    });
    futures::future::join_all(asks)
        .await
        .into_iter()
        .flatten()
        .map(|b| (b.batch_id.clone(), b))
        .collect()
}

/// A string field of an alert card's content.
fn field<'a>(a: &'a AlertCard, k: &str) -> Option<&'a str> {
    a.card.extra.get(k).and_then(Value::as_str)
}

fn card(a: &AlertCard, viewer: &Viewer) -> Markup {
    let tickers: Vec<&str> = a
        .card
        .extra
        .get("stock_tickers")
        .and_then(Value::as_array)
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let severity = field(a, "severity").unwrap_or("info");
    html! {
        article class={"alert " (severity)} data-msg-id=(a.msg_id) {
            h3 { (field(a, "title").or(a.card.event_type.as_deref()).unwrap_or("alert")) }
            p { "Severity " strong { (severity) }
                @if let Some(k) = field(a, "root_cause_kind") { " · root cause kind " (k) }
                @if let Some(at) = a.card.extra.get("first_seen").and_then(|v| serde_json::from_value::<chrono::DateTime<chrono::Utc>>(v.clone()).ok()) {
                    " · first seen " (time(&at))
                }
                @if !a.published { " · " span class="flag" { "not published yet" } } }
            @if let Some(rc) = field(a, "root_cause") { p class="root-cause" { "Root cause: " (rc) } }
            @if !tickers.is_empty() { p { "Items: " (tickers.join(", ")) } }
            @for r in &a.card.recommended_actions { p { (r) } }
            @if let Some(batch) = field(a, "batch_id") {
                form class="batch-resume inline" method="post" action={"/batches/" (batch) "/resume"} {
                    (csrf_field(viewer))
                    button type="submit" { "Resume all" }
                }
            }
        }
    }
}

fn correlation(c: &Correlation, batch: Option<&BatchStatusReply>, viewer: &Viewer) -> Markup {
    let s = &c.signature;
    html! {
        article class="correlation" data-correlation-id=(c.correlation_id) data-batch-id=(c.batch_id) {
            h3 { "Root cause: " span class="root-cause" { (c.root_cause.text) } " (" (c.root_cause.kind) ")" }
            p { (c.failure_count) " failures of " (s.agent_type) " · " (s.error_type) " from " (s.data_source)
                " · " (format!("{:?}", c.status).to_lowercase())
                " · first " (time(&c.first_seen)) " · last " (time(&c.last_seen)) }
            p { "Message: " code { (s.normalized_message) } }
            p { "Items: " (c.items.join(", ")) }
            p class="batch" { "Batch " (c.batch_id) ": "
                @match batch {
                    Some(b) => {
                        span class="batch-state" { (b.state.as_str()) }
                        " · " (b.paused) " paused, " (b.resumed) " resumed, " (b.failed) " failed of " (b.total)
                        @if let Some(why) = &b.stop_reason { " · stopped: " (why) }
                    }
                    None => { span class="batch-state" { "no batch" } }
                }
            }
            form class="batch-pause inline" method="post" action={"/batches/" (c.batch_id) "/pause"} {
                (csrf_field(viewer))
                input type="hidden" name="items" value=(c.items.join(","));
                input type="hidden" name="correlation_id" value=(c.correlation_id);
                input type="hidden" name="reason" value=(c.root_cause.text);
                button type="submit" { "Pause batch" }
            }
            " "
            form class="batch-resume inline" method="post" action={"/batches/" (c.batch_id) "/resume"} {
                (csrf_field(viewer))
                button type="submit" { "Resume batch" }
            }
        }
    }
}

/// The batch forms' fields.
#[derive(Debug, Default, Deserialize)]
struct BatchForm {
    #[serde(default)]
    csrf: String,
    /// Items to pause (default: the batch's own).
    #[serde(default)]
    items: String,
    #[serde(default)]
    correlation_id: String,
    #[serde(default)]
    reason: String,
}

async fn pause(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(batch_id): Path<String>,
    PostForm(form): PostForm<BatchForm>,
) -> Result<Response, PageError> {
    viewer.check_csrf(&form.csrf)?;
    let api = viewer.api(&state);
    let mut items = words(&form.items);
    if items.is_empty() {
        // No items named: pause the batch's own again.
        let b = api
            .call::<BatchStatus>(&BatchStatusRequest {
                batch_id: batch_id.clone(),
            })
            .await
            .map_err(|e| api_error(e, &format!("batch {batch_id}")))?;
        items = b.items.into_iter().map(|i| i.item).collect();
    }
    let reason = match (form.reason.trim(), &viewer.identity) {
        ("", _) => None,
        (r, Some(who)) => Some(format!("{r} (paused by {who})")),
        (r, None) => Some(r.to_string()),
    };
    api.call::<BatchPause>(&BatchPauseRequest {
        items,
        batch_id: Some(batch_id.clone()),
        correlation_id: Some(form.correlation_id).filter(|c| !c.is_empty()),
        reason,
        ..BatchPauseRequest::default()
    })
    .await
    .map_err(|e| api_error(e, &format!("batch {batch_id}")))?;
    Ok(Redirect::to(&format!("/alerts?done=paused&batch={batch_id}")).into_response())
}

async fn resume(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(batch_id): Path<String>,
    PostForm(form): PostForm<BatchForm>,
) -> Result<Response, PageError> {
    viewer.check_csrf(&form.csrf)?;
    viewer
        .api(&state)
        .call::<BatchResume>(&BatchResumeRequest {
            batch_id: Some(batch_id.clone()),
            ..BatchResumeRequest::default()
        })
        .await
        .map_err(|e| api_error(e, &format!("batch {batch_id}")))?;
    Ok(Redirect::to(&format!("/alerts?done=resumed&batch={batch_id}")).into_response())
}
