//! `GET /`: the overview. Workflows (state, progress, elapsed, flags) with
//! filters and server-side pages, and per agent type the capacity, use,
//! queue and the live bottleneck.
//!
//! Fast with 10,000 workflows held: one paged `status` call (its `counts`
//! give the totals per state) and one `workers` call, made together; no
//! call per workflow. `?fragment=workflows` answers the table region alone,
//! which the page's script fetches when `/events` says a workflow changed.

use axum::extract::{Query, State};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use chrono::Utc;
use maud::{html, Markup, PreEscaped};
use serde::Deserialize;

use caucus_shared::api::coordinator::status::{Status, StatusReply, StatusRequest, WorkflowView};
use caucus_shared::api::coordinator::workers::{Workers, WorkersReply};
use caucus_shared::api::Empty;

use crate::error::PageError;
use crate::layout;
use crate::state::AppState;
use crate::viewer::Viewer;

/// The states a `?state=` filter may name.
pub const STATES: &[&str] = &[
    "pending",
    "running",
    "pausing",
    "paused",
    "resuming",
    "completed",
    "failed",
];

/// The most status pages one filtered overview reads (of 1,000 each): a
/// pipeline or item filter is applied here, so a rare match costs pages.
const MAX_SCAN_PAGES: usize = 20;

/// Its routes.
pub fn routes() -> Router<AppState> {
    Router::new().route("/", get(overview))
}

/// The query of `/`.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct OverviewQuery {
    /// Only this state.
    #[serde(default)]
    pub state: Option<String>,
    /// Only this pipeline.
    #[serde(default)]
    pub pipeline: Option<String>,
    /// Only this item.
    #[serde(default)]
    pub item: Option<String>,
    /// Where the page starts (the previous page's "next" link).
    #[serde(default)]
    pub cursor: Option<String>,
    /// `workflows`: only the table region (for the live update).
    #[serde(default)]
    pub fragment: Option<String>,
}

impl OverviewQuery {
    fn nonempty(v: &Option<String>) -> Option<&str> {
        v.as_deref().map(str::trim).filter(|s| !s.is_empty())
    }

    /// The query string of this filter with another cursor.
    fn link(&self, cursor: Option<&str>) -> String {
        let mut parts = Vec::new();
        for (k, v) in [
            ("state", Self::nonempty(&self.state)),
            ("pipeline", Self::nonempty(&self.pipeline)),
            ("item", Self::nonempty(&self.item)),
            ("cursor", cursor),
        ] {
            if let Some(v) = v {
                parts.push(format!("{k}={}", encode(v)));
            }
        }
        format!("/?{}", parts.join("&"))
    }
}

/// Percent-encodes a query value (unreserved characters kept).
fn encode(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One page of workflows and what the table needs around it.
struct WorkflowPage {
    workflows: Vec<WorkflowView>,
    next_cursor: Option<String>,
    reply: StatusReply,
}

async fn overview(
    State(state): State<AppState>,
    viewer: Viewer,
    Query(q): Query<OverviewQuery>,
) -> Result<Response, PageError> {
    if let Some(s) = OverviewQuery::nonempty(&q.state) {
        if !STATES.contains(&s) {
            return Err(PageError::BadRequest(format!(
                "unknown state `{s}`: one of {}",
                STATES.join(", ")
            )));
        }
    }
    if let Some(c) = OverviewQuery::nonempty(&q.cursor) {
        if !valid_cursor(c) {
            return Err(PageError::BadRequest(format!(
                "`cursor` `{c}` is not a page link of this overview"
            )));
        }
    }
    let page_size = state.console().page_size.clamp(1, 1000);
    if q.fragment.as_deref() == Some("workflows") {
        let page = workflows(&state, &q, page_size).await?;
        return Ok(Html(workflows_region(&q, &page).into_string()).into_response());
    }
    let (page, workers) = tokio::join!(
        workflows(&state, &q, page_size),
        state.api.call::<Workers>(&Empty {})
    );
    let page = page?;
    let workers = workers?;
    let body = html! {
        (filters(&q))
        (counts(&page.reply))
        (workflows_region(&q, &page))
        (agents(&workers))
        script { (PreEscaped(LIVE_SCRIPT)) }
    };
    Ok(Html(layout::page("Overview", &viewer, body).into_string()).into_response())
}

/// A cursor is `<created_at ms>:<workflow id>` (the status API's form).
fn valid_cursor(c: &str) -> bool {
    c.split_once(':')
        .is_some_and(|(ms, id)| ms.parse::<i64>().is_ok() && !id.is_empty())
}

/// The page of workflows the filter asks for.
async fn workflows(
    state: &AppState,
    q: &OverviewQuery,
    page_size: usize,
) -> Result<WorkflowPage, PageError> {
    let states: Vec<String> = OverviewQuery::nonempty(&q.state)
        .map(|s| vec![s.to_string()])
        .unwrap_or_default();
    let pipeline = OverviewQuery::nonempty(&q.pipeline);
    let item = OverviewQuery::nonempty(&q.item);
    let mut cursor = OverviewQuery::nonempty(&q.cursor).map(str::to_string);
    if pipeline.is_none() && item.is_none() {
        let reply = state
            .api
            .call::<Status>(&StatusRequest {
                states,
                limit: Some(page_size),
                cursor,
                ..Default::default()
            })
            .await?;
        return Ok(WorkflowPage {
            workflows: reply.workflows.clone(),
            next_cursor: reply.next_cursor.clone(),
            reply,
        });
    }
    // The status API filters by state only: scan pages for the pipeline
    // and the item, and end the page where the last match shown is.
    let mut found: Vec<WorkflowView> = Vec::new();
    let mut last: Option<StatusReply> = None;
    let mut exhausted = true;
    for _ in 0..MAX_SCAN_PAGES {
        let reply = state
            .api
            .call::<Status>(&StatusRequest {
                states: states.clone(),
                limit: Some(1000),
                cursor: cursor.clone(),
                ..Default::default()
            })
            .await?;
        found.extend(
            reply
                .workflows
                .iter()
                .filter(|w| {
                    pipeline.is_none_or(|p| w.pipeline == p) && item.is_none_or(|i| w.item == i)
                })
                .cloned(),
        );
        cursor = reply.next_cursor.clone();
        let more = cursor.is_some();
        last = Some(reply);
        if found.len() > page_size || !more {
            exhausted = !more;
            break;
        }
        exhausted = false;
    }
    let mut reply = last.expect("at least one page read");
    let next_cursor = if found.len() > page_size {
        found.truncate(page_size);
        found.last().map(status_cursor)
    } else if !exhausted {
        // Scan limit reached: carry on from where the scan stopped.
        cursor
    } else {
        None
    };
    reply.workflows = Vec::new();
    Ok(WorkflowPage {
        workflows: found,
        next_cursor,
        reply,
    })
}

/// The status API's cursor after `w`.
fn status_cursor(w: &WorkflowView) -> String {
    format!("{}:{}", w.created_at.timestamp_millis(), w.workflow_id)
}

fn filters(q: &OverviewQuery) -> Markup {
    let sel = OverviewQuery::nonempty(&q.state).unwrap_or("");
    html! {
        form #filters method="get" action="/" {
            label { "State "
                select name="state" {
                    option value="" selected[sel.is_empty()] { "any" }
                    @for s in STATES { option value=(s) selected[sel == *s] { (s) } }
                }
            }
            " "
            label { "Pipeline " input name="pipeline" value=(q.pipeline.clone().unwrap_or_default()); }
            " "
            label { "Item " input name="item" value=(q.item.clone().unwrap_or_default()); }
            " "
            button type="submit" { "Filter" }
        }
    }
}

fn counts(reply: &StatusReply) -> Markup {
    let total: usize = reply.counts.values().sum();
    html! {
        p #counts {
            (total) " workflows held"
            @for s in STATES {
                @if let Some(n) = reply.counts.get(*s) {
                    " · " a href={ "/?state=" (s) } { (n) " " (s) }
                }
            }
        }
    }
}

/// The live region: the table and the page links.
fn workflows_region(q: &OverviewQuery, page: &WorkflowPage) -> Markup {
    let now = Utc::now();
    html! {
        div #workflows-region {
            table #workflows {
                thead { tr {
                    th { "Workflow" } th { "Item" } th { "Pipeline" } th { "State" }
                    th { "Progress" } th { "Elapsed" } th { "Submitted" } th { "Flags" }
                } }
                tbody {
                    @for w in &page.workflows {
                        tr data-workflow-id=(w.workflow_id) {
                            td { a href={ "/workflows/" (w.workflow_id) } { (w.workflow_id) } }
                            td.item { (w.item) }
                            td.pipeline { (w.pipeline) }
                            td.state { (w.state.as_str()) }
                            td.progress { (w.progress.completed) "/" (w.progress.total) }
                            td.elapsed { (elapsed(w, now)) }
                            td { (layout::time(&w.created_at)) }
                            td.flags {
                                @if w.reevaluate { span.flag { "re-evaluate" } " " }
                                @if !w.overdue_tasks.is_empty() {
                                    span.flag title=(w.overdue_tasks.join(", ")) { "overdue" } " "
                                }
                                @if !w.open_gates.is_empty() {
                                    a.flag href={ "/gates/" (w.workflow_id) } { "gate open" }
                                }
                            }
                        }
                    }
                }
            }
            @if page.workflows.is_empty() { p.empty { "No workflows match." } }
            p.pages {
                @if OverviewQuery::nonempty(&q.cursor).is_some() {
                    a #first-page href=(q.link(None)) { "First page" } " "
                }
                @if let Some(c) = &page.next_cursor {
                    a #next-page rel="next" href=(q.link(Some(c))) { "Next page" }
                }
            }
        }
    }
}

/// Elapsed time: to the finish, or to now while it runs.
fn elapsed(w: &WorkflowView, now: chrono::DateTime<Utc>) -> String {
    let ms = w
        .elapsed_ms
        .unwrap_or_else(|| (now - w.created_at).num_milliseconds())
        .max(0);
    duration(ms)
}

/// `1h 02m`, `3m 04s`, `5.2s`.
pub fn duration(ms: i64) -> String {
    let s = ms / 1000;
    if s >= 3600 {
        format!("{}h {:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        format!("{:.1}s", ms as f64 / 1000.0)
    }
}

fn agents(w: &WorkersReply) -> Markup {
    html! {
        section #agents {
            h2 { "Agents" }
            table {
                thead { tr {
                    th { "Agent type" } th { "Capacity" } th { "In use" } th { "Queue depth" }
                    th { "Ready" } th { "In flight" } th { "Oldest wait" } th { "Workers" }
                } }
                tbody {
                    @for a in &w.agents {
                        tr data-agent-type=(a.agent_type) {
                            td { (a.agent_type) }
                            td.capacity {
                                (a.capacity)
                                @if let Some(cap) = a.cap { " (cap " (cap) ")" }
                            }
                            td.in-use { (a.in_use) }
                            td.queue-depth { (a.queue_depth) }
                            td { (a.ready) }
                            td { (a.in_flight) }
                            td.oldest-wait { (duration(a.oldest_wait_ms)) }
                            td { (a.workers.len()) }
                        }
                    }
                }
            }
            p #bottleneck {
                @match &w.bottleneck {
                    Some(b) => {
                        "Live bottleneck: " strong { (b.agent_type) } ": its oldest ready task has waited "
                        (duration(b.oldest_wait_ms)) ", " (b.ready) " ready. One more worker with "
                        (b.more_slots) " slots would clear its queue; each slot added starts one more of its ready tasks now."
                    }
                    None => { "No bottleneck: no ready task is waiting for capacity." }
                }
            }
        }
    }
}

/// Reloads the table region (same filters and page) within a second of a
/// workflow event; several events in a burst cause one reload.
const LIVE_SCRIPT: &str = r#"
(function(){
  if (!window.EventSource) return;
  var pending = null;
  var es = new EventSource('/events');
  es.addEventListener('workflow', function(){
    if (pending) return;
    pending = setTimeout(function(){
      pending = null;
      var q = new URLSearchParams(location.search); q.set('fragment','workflows');
      fetch('/?' + q.toString()).then(function(r){ return r.ok ? r.text() : null; }).then(function(t){
        if (!t) return;
        var region = document.getElementById('workflows-region');
        if (!region) return;
        region.outerHTML = t;
        for (const e of document.querySelectorAll('#workflows-region time[datetime]')) {
          const d = new Date(e.getAttribute('datetime'));
          if (!isNaN(d)) e.textContent = d.toLocaleString();
        }
      });
    }, 200);
  });
})();
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_keep_the_filters_and_encode_them() {
        let q = OverviewQuery {
            state: Some("running".into()),
            pipeline: Some(" ".into()),
            item: Some("BRK.B & co".into()),
            cursor: Some("1:old".into()),
            fragment: None,
        };
        assert_eq!(
            q.link(Some("17:wf-1")),
            "/?state=running&item=BRK.B%20%26%20co&cursor=17%3Awf-1"
        );
        assert_eq!(q.link(None), "/?state=running&item=BRK.B%20%26%20co");
    }

    #[test]
    fn cursors_are_ms_and_an_id() {
        assert!(valid_cursor("1732579200000:0193-abc"));
        assert!(!valid_cursor("nonsense"));
        assert!(!valid_cursor("x:wf"));
        assert!(!valid_cursor("12:"));
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(duration(5_200), "5.2s");
        assert_eq!(duration(184_000), "3m 04s");
        assert_eq!(duration(3_720_000), "1h 02m");
    }
}
