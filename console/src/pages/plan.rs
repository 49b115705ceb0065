//! `GET /plan`, `POST /plan`: the planner as a form (items, pipeline,
//! capacity per agent type) answered with the Gantt, the makespan, the
//! critical path and the bottleneck; and [`gantt`], the inline SVG chart
//! the workflow page shares.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::Html;
use axum::routing::get;
use axum::Router;
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::Value;

use caucus_shared::api::coordinator::plan::{PlanOp, PlanReply, PlanRequest};

use super::gates::form::PostForm;
use crate::error::PageError;
use crate::layout;
use crate::state::AppState;
use crate::viewer::Viewer;

/// Its routes.
pub fn routes() -> Router<AppState> {
    Router::new().route("/plan", get(form_page).post(plan))
}

/// One bar of a Gantt chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// The row it is drawn on (a task key).
    pub row: String,
    /// Start, in the chart's unit.
    pub start: f64,
    /// End, in the chart's unit (≥ start).
    pub end: f64,
    /// `planned` or `actual` (its CSS class and colour).
    pub kind: &'static str,
    /// Drawn emphasised: on the critical path.
    pub critical: bool,
}

const ROW_H: f64 = 18.0;
const LABEL_W: f64 = 180.0;
const CHART_W: f64 = 640.0;

/// An inline SVG Gantt chart of `bars`, one row per distinct `row` in
/// first-seen order; planned bars sit in the upper half of a row, actual
/// ones in the lower half, on one time axis labelled with `unit`.
pub fn gantt(bars: &[Bar], unit: &str) -> Markup {
    let mut rows: Vec<&str> = Vec::new();
    for b in bars {
        if !rows.contains(&b.row.as_str()) {
            rows.push(&b.row);
        }
    }
    let max = bars.iter().map(|b| b.end).fold(0.0_f64, f64::max).max(1e-9);
    let scale = CHART_W / max;
    let height = ROW_H * rows.len() as f64 + 24.0;
    let width = LABEL_W + CHART_W + 10.0;
    html! {
        svg.gantt xmlns="http://www.w3.org/2000/svg" width=(width) height=(height)
            role="img" aria-label="Gantt chart" {
            @for (i, row) in rows.iter().enumerate() {
                text x="2" y=(ROW_H * i as f64 + 13.0) font-size="11" { (row) }
            }
            @for b in bars {
                @let i = rows.iter().position(|r| *r == b.row).unwrap_or(0) as f64;
                @let half = if b.kind == "planned" { 0.0 } else { ROW_H / 2.0 };
                @let fill = match (b.kind, b.critical) {
                    ("planned", true) => "#d9534f",
                    ("planned", false) => "#9db8d9",
                    _ => "#2e7d32",
                };
                rect class=(b.kind) data-row=(b.row)
                    x=(format!("{:.1}", LABEL_W + b.start * scale))
                    y=(format!("{:.1}", ROW_H * i + half + 1.0))
                    width=(format!("{:.1}", ((b.end - b.start) * scale).max(1.0)))
                    height=(ROW_H / 2.0 - 2.0) fill=(fill) {
                    title { (b.row) " " (b.kind) ": " (fmt(b.start)) "–" (fmt(b.end)) " " (unit) }
                }
            }
            text x=(LABEL_W) y=(height - 6.0) font-size="11" { "0" }
            text x=(LABEL_W + CHART_W - 60.0) y=(height - 6.0) font-size="11" { (fmt(max)) " " (unit) }
        }
        p.legend { small { "upper bars: planned (red: critical path) · lower bars: actual" } }
    }
}

fn fmt(v: f64) -> String {
    format!("{v:.1}")
}

/// The planned bars of a plan, in pipeline time units.
pub fn planned_bars(reply: &PlanReply) -> Vec<Bar> {
    reply
        .plan
        .tasks
        .iter()
        .map(|t| Bar {
            row: {
                let key = match t.shard {
                    Some(s) => format!("{}#{s}", t.stage),
                    None => t.stage.clone(),
                };
                // One item: rows are the workflow's task keys.
                if reply.plan.items.len() > 1 {
                    format!("{} {key}", t.item)
                } else {
                    key
                }
            },
            start: t.start,
            end: t.end,
            kind: "planned",
            critical: t.on_critical_path,
        })
        .collect()
}

/// The planner form's fields.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct PlanForm {
    /// Items, separated by commas, spaces or lines.
    #[serde(default)]
    pub items: String,
    /// A built-in pipeline's name.
    #[serde(default)]
    pub pipeline: String,
    /// `agent=slots` per line or comma.
    #[serde(default)]
    pub capacities: String,
    /// The form's CSRF token (a dry run, but every POST carries it).
    #[serde(default)]
    pub csrf: String,
}

async fn form_page(viewer: Viewer) -> Html<String> {
    let body = form(&viewer, &PlanForm::default());
    Html(layout::page("Plan", &viewer, body).into_string())
}

fn form(viewer: &Viewer, f: &PlanForm) -> Markup {
    html! {
        form #plan-form method="post" action="/plan" {
            (layout::csrf_field(viewer))
            p { label { "Items (comma or space separated) " br;
                textarea name="items" rows="3" cols="60" required { (f.items) } } }
            p { label { "Pipeline " input name="pipeline" required value=(f.pipeline); } }
            p { label { "Capacity per agent type (agent=slots, one per line; empty: the pipeline's) " br;
                textarea name="capacities" rows="3" cols="40" { (f.capacities) } } }
            button type="submit" { "Plan" }
        }
    }
}

/// Parses `agent=slots` pairs.
fn capacities(text: &str) -> Result<BTreeMap<String, u32>, PageError> {
    let mut out = BTreeMap::new();
    for pair in text
        .split([',', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let (agent, slots) = pair.split_once('=').ok_or_else(|| {
            PageError::BadRequest(format!("capacity `{pair}` is not `agent=slots`"))
        })?;
        let slots: u32 = slots.trim().parse().map_err(|_| {
            PageError::BadRequest(format!("capacity `{pair}`: slots must be a whole number"))
        })?;
        out.insert(agent.trim().to_string(), slots);
    }
    Ok(out)
}

async fn plan(
    State(state): State<AppState>,
    viewer: Viewer,
    PostForm(f): PostForm<PlanForm>,
) -> Result<Html<String>, PageError> {
    viewer.check_csrf(&f.csrf)?;
    let items: Vec<String> = f
        .items
        .split([',', ' ', '\n', '\r', '\t'])
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    if items.is_empty() {
        return Err(PageError::BadRequest(
            "`items`: name at least one item".into(),
        ));
    }
    if f.pipeline.trim().is_empty() {
        return Err(PageError::BadRequest("`pipeline`: name a pipeline".into()));
    }
    let req = PlanRequest {
        items,
        pipeline: Value::String(f.pipeline.trim().to_string()),
        capacities: capacities(&f.capacities)?,
    };
    let reply = state.api.call::<PlanOp>(&req).await?;
    let p = &reply.plan;
    let body = html! {
        (form(&viewer, &f))
        section #plan {
            h2 { "Plan for " (p.items.len()) " items through " (p.pipeline) }
            p #makespan { "Makespan: " strong { (fmt(p.makespan)) } " time units (sequential "
                (fmt(p.sequential_time)) ", parallelism ×" (format!("{:.2}", p.parallelism_factor)) ")" }
            p #critical-path { "Critical path: " (p.critical_path.join(" → "))
                " (" (fmt(p.critical_path_length)) " units)" }
            p #bottleneck {
                @match &p.bottleneck {
                    Some(b) => { "Bottleneck: " strong { (b.agent_type) } " at " (b.capacity)
                        " slots; one more slot: makespan " (fmt(b.makespan_with_one_more_slot))
                        " (gains " (fmt(b.gain)) " units, queueing delay " (fmt(b.queueing_delay)) ")" }
                    None => { "No bottleneck: capacity never delays a task." }
                }
            }
            table #utilization {
                thead { tr { th { "Agent type" } th { "Capacity" } th { "Tasks" } th { "Utilization" } th { "Queueing delay" } } }
                tbody {
                    @for (agent, u) in &p.utilization {
                        tr { td { (agent) } td { (u.capacity) } td { (u.tasks) }
                             td { (format!("{:.0}%", u.utilization * 100.0)) } td { (fmt(u.queueing_delay)) } }
                    }
                }
            }
            h3 { "Gantt" }
            (gantt(&planned_bars(&reply), "units"))
        }
    };
    Ok(Html(layout::page("Plan", &viewer, body).into_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(row: &str, start: f64, end: f64, kind: &'static str) -> Bar {
        Bar {
            row: row.into(),
            start,
            end,
            kind,
            critical: false,
        }
    }

    #[test]
    fn gantt_draws_one_row_per_task_and_scales_to_the_last_end() {
        let svg = gantt(
            &[
                bar("a", 0.0, 2.0, "planned"),
                bar("b", 2.0, 4.0, "planned"),
                bar("a", 0.0, 1.0, "actual"),
            ],
            "s",
        )
        .into_string();
        assert_eq!(svg.matches("<rect").count(), 3, "{svg}");
        // Two rows: the labels, and the height (2 rows + axis).
        assert_eq!(svg.matches("font-size=\"11\">a<").count(), 1, "{svg}");
        assert!(svg.contains("height=\"60\""), "{svg}");
        // b starts half-way: 180 + 640 / 2.
        assert!(svg.contains("data-row=\"b\" x=\"500.0\""), "{svg}");
        assert!(svg.contains("4.0 s"), "{svg}");
    }

    #[test]
    fn capacities_are_agent_equals_slots() {
        let c = capacities("financial=2, news=1\nrisk = 3").unwrap();
        assert_eq!(c.get("financial"), Some(&2));
        assert_eq!(c.get("news"), Some(&1));
        assert_eq!(c.get("risk"), Some(&3));
        assert!(capacities("").unwrap().is_empty());
        let e = capacities("financial").unwrap_err().to_string();
        assert!(e.contains("`financial` is not `agent=slots`"), "{e}");
        let e = capacities("financial=x").unwrap_err().to_string();
        assert!(e.contains("whole number"), "{e}");
    }
}
