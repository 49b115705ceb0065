//! `caucus status` and `caucus result`.

use caucus_shared::api::coordinator::status::{Status, StatusReply, StatusRequest, WorkflowView};

use crate::render::{missing_ids, research_lines, utilisation, workflow_line};
use crate::Client;

/// Paging of `caucus status` without ids.
#[derive(Debug, Clone, Default)]
pub struct StatusPage {
    /// Workflows per page.
    pub limit: Option<usize>,
    /// Where the first page starts.
    pub cursor: Option<String>,
    /// Follow `next_cursor` to the end.
    pub all: bool,
}

/// Workflows per page when `caucus result` looks an item up.
const LOOKUP_PAGE: usize = 1_000;

pub async fn status(
    client: &Client,
    ids: Vec<String>,
    states: Vec<String>,
    tasks: bool,
    page: StatusPage,
    as_json: bool,
) -> anyhow::Result<i32> {
    let listing = ids.is_empty();
    let mut request = StatusRequest {
        ids,
        states,
        tasks,
        limit: if listing { page.limit } else { None },
        cursor: if listing { page.cursor.clone() } else { None },
    };
    let mut shown = 0usize;
    // `--json --all`: one document with every page's workflows.
    let mut merged: Option<StatusReply> = None;
    // Named workflows the coordinator does not hold.
    let mut missing: Vec<String> = Vec::new();
    loop {
        let st = client.op_ok::<Status>(&request).await?;
        if !listing && request.states.is_empty() {
            missing = missing_ids(&request.ids, &st);
        }
        let next = st.next_cursor.clone();
        if as_json {
            shown += st.workflows.len();
            merged = Some(match merged.take() {
                None => st,
                Some(mut m) => {
                    m.workflows.extend(st.workflows);
                    m.next_cursor = st.next_cursor;
                    m.load = st.load;
                    m.capacity = st.capacity;
                    m
                }
            });
        } else {
            shown += print_status(&st);
        }
        match next {
            Some(c) if page.all && listing => request.cursor = Some(c),
            Some(c) => {
                if !as_json {
                    println!(
                        "more workflows: caucus status --cursor {c}{} (or --all)",
                        page.limit
                            .map(|l| format!(" --limit {l}"))
                            .unwrap_or_default()
                    );
                }
                break;
            }
            None => break,
        }
    }
    if let Some(m) = merged {
        println!("{}", serde_json::to_string_pretty(&m)?);
    } else if shown == 0 && missing.is_empty() {
        println!("no workflows");
    }
    for id in &missing {
        eprintln!("no workflow {id} (finished workflows are kept for coordinator.retain_history)");
    }
    Ok(if missing.is_empty() { 0 } else { 1 })
}

/// Prints one status reply; returns how many workflows it showed.
fn print_status(st: &StatusReply) -> usize {
    for w in &st.workflows {
        println!("{}", workflow_line(w));
        for line in research_lines(w) {
            println!("    {line}");
        }
        if let Some(tasks) = &w.tasks {
            for (k, t) in tasks {
                println!(
                    "    {:<14} {:<10} attempt {} {}",
                    k,
                    t.state.as_str(),
                    t.attempt,
                    t.worker_id.as_deref().unwrap_or("")
                );
            }
            for line in crate::level_review::level_review_lines(w) {
                println!("    {line}");
            }
        }
    }
    let u = utilisation(st);
    if !u.is_empty() {
        println!("{u}");
    }
    st.workflows.len()
}

/// Finds a workflow by id or item and prints its report. An id is asked
/// for alone; an item is looked up in pages of the list (no outputs), and
/// its newest workflow then asked for alone.
pub async fn result(client: &Client, target: &str) -> anyhow::Result<i32> {
    let one = |id: &str| {
        let request = StatusRequest {
            ids: vec![id.to_string()],
            tasks: true,
            ..StatusRequest::default()
        };
        async move { client.op_ok::<Status>(&request).await }
    };
    if let Some(w) = one(target).await?.workflows.first() {
        return print_report(w);
    }
    let mut newest: Option<(chrono::DateTime<chrono::Utc>, String)> = None;
    let mut request = StatusRequest {
        limit: Some(LOOKUP_PAGE),
        ..StatusRequest::default()
    };
    loop {
        let page = client.op_ok::<Status>(&request).await?;
        for w in page.workflows.iter().filter(|w| w.item == target) {
            if newest.as_ref().is_none_or(|(at, _)| w.created_at >= *at) {
                newest = Some((w.created_at, w.workflow_id.clone()));
            }
        }
        match page.next_cursor {
            Some(c) => request.cursor = Some(c),
            None => break,
        }
    }
    let Some((_, id)) = newest else {
        eprintln!("no workflow with id or item `{target}`");
        return Ok(1);
    };
    match one(&id).await?.workflows.first() {
        Some(w) => print_report(w),
        None => {
            eprintln!("workflow {id} (item `{target}`) is no longer held");
            Ok(1)
        }
    }
}

fn print_report(w: &WorkflowView) -> anyhow::Result<i32> {
    match report_of(w) {
        Some(md) => {
            println!("{md}");
            Ok(0)
        }
        None => {
            eprintln!(
                "workflow {} ({}) has no report yet: state {}",
                w.workflow_id, w.item, w.state
            );
            Ok(1)
        }
    }
}

/// The markdown report in a workflow's `report` task output, if any.
pub fn report_of(w: &WorkflowView) -> Option<String> {
    // A research run's report is its SYNTHESIZING stage's output.
    let stage = w
        .research
        .as_ref()
        .and_then(|r| r.phase_stages.get("SYNTHESIZING"))
        .map_or("report", String::as_str);
    let out = w
        .tasks
        .as_ref()?
        .get(stage)?
        .output
        .as_ref()
        .filter(|o| !o.is_null())?;
    let text = |field: &str| out.get(field).and_then(|v| v.as_str()).map(String::from);
    text("markdown")
        .or_else(|| text("report"))
        .or_else(|| Some(serde_json::to_string_pretty(out).unwrap_or_default()))
}
