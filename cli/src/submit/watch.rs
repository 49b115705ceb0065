//! `--watch`: polling `status` until the watched workflows are done, or
//! until every unfinished one waits for a person at a gate.

use std::time::Duration;

use serde::Serialize;

use caucus_shared::api::coordinator::gates::{Gate, GateRequest};
use caucus_shared::api::coordinator::status::{Status, StatusReply, StatusRequest, WorkflowView};

use super::progress::LiveView;
use super::LISTED;
use crate::Client;

/// How often `--watch` polls.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// Exit code of `submit --watch` when it stops because every unfinished
/// workflow waits for a person at a gate.
pub const EXIT_AT_GATE: i32 = 4;

/// How `--watch` ended.
#[derive(Debug)]
pub enum WatchEnd {
    /// Every workflow completed, failed or was paused: the last status.
    Done(StatusReply),
    /// Every unfinished workflow waits for a person at a gate: the last
    /// status and the waiting workflows.
    AtGates(StatusReply, Vec<WaitingWorkflow>),
}

impl WatchEnd {
    /// The last status, however it ended.
    pub fn status(&self) -> &StatusReply {
        match self {
            WatchEnd::Done(st) | WatchEnd::AtGates(st, _) => st,
        }
    }
}

/// A workflow that waits for a person at a gate (`--json`'s
/// `waiting_at_gates`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WaitingWorkflow {
    /// Its id.
    pub workflow_id: String,
    /// Its item.
    pub item: String,
    /// Keys of its open gates.
    pub gates: Vec<String>,
}

/// Polls status until every workflow in `ids` completed, failed or paused
/// (or, with `stop_at_gates`, until every unfinished one waits for a
/// person at a gate), drawing progress unless `draw` is false (see
/// [`LiveView`]).
pub async fn watch_until_done(
    client: &Client,
    ids: &[String],
    draw: bool,
    stop_at_gates: bool,
) -> anyhow::Result<WatchEnd> {
    let mut view = LiveView::new(draw);
    // Progress of the previous poll when every unfinished workflow sat at a
    // gate: the same picture twice in a row means nothing else moves.
    let mut gate_picture: Option<Vec<(String, usize)>> = None;
    let request = StatusRequest {
        ids: ids.to_vec(),
        ..StatusRequest::default()
    };
    loop {
        let st = client.op_ok::<Status>(&request).await?;
        let wfs = &st.workflows;
        let done = wfs.iter().filter(|w| w.is_settled()).count();
        view.update(&st, done, ids.len())?;
        let all_in = !wfs.is_empty() && wfs.len() == ids.len();
        if all_in && done == ids.len() {
            view.finish(wfs)?;
            return Ok(WatchEnd::Done(st));
        }
        if stop_at_gates && all_in {
            let picture = gate_waits(wfs);
            if picture.is_some() && picture == gate_picture {
                let waiting = waiting_for_people(client, wfs).await;
                if waiting.len() == ids.len() - done {
                    view.finish(wfs)?;
                    return Ok(WatchEnd::AtGates(st, waiting));
                }
            }
            gate_picture = picture;
        }
        tokio::time::sleep(WATCH_EVERY).await;
    }
}

/// When every unfinished workflow has an open gate: their ids and
/// progress (to tell a standing picture from a moving one).
fn gate_waits(wfs: &[WorkflowView]) -> Option<Vec<(String, usize)>> {
    wfs.iter()
        .filter(|w| !w.is_settled())
        .map(|w| (!w.open_gates.is_empty()).then(|| (w.workflow_id.clone(), w.progress.completed)))
        .collect()
}

/// The unfinished workflows whose open gate waits for a person: every one
/// not submitted with `auto_approve_gates`, and an auto-approving one
/// whose decision package holds provisional decisions to review.
async fn waiting_for_people(client: &Client, wfs: &[WorkflowView]) -> Vec<WaitingWorkflow> {
    let mut out = Vec::new();
    for w in wfs.iter().filter(|w| !w.is_settled()) {
        let needs_person =
            !w.auto_approve_gates || provisional_waiting(client, &w.workflow_id).await;
        if needs_person {
            out.push(WaitingWorkflow {
                workflow_id: w.workflow_id.clone(),
                item: w.item.clone(),
                gates: w.open_gates.clone(),
            });
        }
    }
    out
}

/// Whether the decision package of `workflow_id`'s gate lists provisional
/// decisions to review.
async fn provisional_waiting(client: &Client, workflow_id: &str) -> bool {
    let request = GateRequest {
        workflow_id: workflow_id.to_string(),
        gate: None,
    };
    let package = client.op::<Gate>(&request).await;
    package.is_ok_and(|p| p.provisional.count > 0)
}

/// Tells the person what to run at each waiting gate.
pub(super) fn print_at_gates(waiting: &[WaitingWorkflow]) {
    println!(
        "\n{} workflow(s) wait for a person at a gate:",
        waiting.len()
    );
    for w in waiting.iter().take(LISTED) {
        let id = &w.workflow_id;
        println!(
            "  {:<8} gate {}:  caucus gate show {id}   then   caucus gate approve {id} --rationale \"…\"",
            w.item,
            w.gates.join(",")
        );
    }
    if waiting.len() > LISTED {
        println!("  … and {} more (caucus gate list)", waiting.len() - LISTED);
    }
    println!(
        "(exit code {EXIT_AT_GATE}: waiting at a human gate; submit with --auto-approve-gates for an unattended run)"
    );
}
