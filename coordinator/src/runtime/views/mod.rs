//! How a workflow record is shown in API replies (`status`, gates): the
//! typed views of `caucus_shared::api::coordinator::status`, built from
//! the coordinator's records field by field (so a record that gains a
//! field shows it only once its view does).

use std::collections::BTreeMap;

use serde_json::Value;

use caucus_shared::api::coordinator::status::{
    AgentLoadView, Progress, StatusReply, TaskState, TaskView, WorkflowState as StateView,
    WorkflowView,
};
use caucus_shared::subjects::encode_token;

use crate::engine::AgentLoad;
use crate::workflow::{TaskRecord, TaskRunState, WorkflowRecord, WorkflowState};

mod records;

pub(crate) use records::pause_view;
mod research;

#[cfg(test)]
mod tests;

/// A workflow as the status API shows it (task outputs included).
pub fn workflow_view(r: &WorkflowRecord, with_tasks: bool) -> WorkflowView {
    workflow_view_with(r, with_tasks, true)
}

/// A workflow as the status API shows it; `with_outputs: false` leaves
/// tasks' `output` and `previous_output` out (and marks the workflow
/// `outputs_omitted`), as `status` lists do.
pub fn workflow_view_with(
    r: &WorkflowRecord,
    with_tasks: bool,
    with_outputs: bool,
) -> WorkflowView {
    let (completed, total) = r.progress();
    let tasks = with_tasks.then(|| {
        r.tasks
            .iter()
            .map(|(k, t)| (k.clone(), task_view(t, with_outputs)))
            .collect::<BTreeMap<_, _>>()
    });
    WorkflowView {
        workflow_id: r.workflow_id.clone(),
        item: r.item.clone(),
        item_token: encode_token(&r.item),
        pipeline: r.pipeline.clone(),
        state: state_view(r.state),
        progress: Progress { completed, total },
        overdue_tasks: r
            .tasks
            .iter()
            .filter(|(_, t)| t.overdue)
            .map(|(k, _)| k.clone())
            .collect(),
        created_at: r.created_at,
        updated_at: r.updated_at,
        finished_at: r.finished_at,
        elapsed_ms: r.finished_at.map(|f| (f - r.created_at).num_milliseconds()),
        failure: r.failure.clone(),
        pause: r.pause.as_ref().map(records::pause_view),
        flags: r.flags.iter().map(records::flag_view).collect(),
        reevaluate: !r.flags.is_empty(),
        research: r.research.as_ref().map(research::research_view),
        level_review: r.level_review.as_ref().map(records::level_review_view),
        open_gates: r.open_gate_keys(),
        resolved_assumptions: r.resolved_assumptions.clone(),
        reruns: r.reruns.iter().map(records::rerun_view).collect(),
        auto_approve_gates: r.auto_approve_gates,
        tasks,
        outputs_omitted: with_tasks && !with_outputs,
    }
}

fn task_view(t: &TaskRecord, with_outputs: bool) -> TaskView {
    // With outputs, an absent one shows as null (the key is there).
    let shown = |o: &Option<Value>| with_outputs.then(|| o.clone().unwrap_or(Value::Null));
    TaskView {
        stage: t.stage.clone(),
        agent_type: t.agent_type.clone(),
        state: task_state_view(t.state),
        attempt: t.attempt,
        worker_id: t.worker_id.clone(),
        started_at: t.started_at,
        finished_at: t.finished_at,
        overdue: t.overdue,
        error: t.error.clone(),
        output: shown(&t.output),
        gate: t.gate.as_deref().map(records::gate_view),
        previous_output: shown(&t.previous_output),
    }
}

/// The status reply around `workflows`.
pub fn status_reply(
    workflows: Vec<WorkflowView>,
    next_cursor: Option<String>,
    load: BTreeMap<String, AgentLoad>,
    capacity: BTreeMap<String, usize>,
) -> StatusReply {
    StatusReply {
        workflows,
        next_cursor,
        load: load
            .into_iter()
            .map(|(agent, l)| {
                let view = AgentLoadView {
                    ready: l.ready,
                    in_flight: l.in_flight,
                    oldest_wait_ms: l.oldest_wait_ms,
                };
                (agent, view)
            })
            .collect(),
        capacity,
        counts: BTreeMap::new(),
    }
}

/// The API spelling of a workflow's state.
pub(crate) fn state_view(s: WorkflowState) -> StateView {
    match s {
        WorkflowState::Pending => StateView::Pending,
        WorkflowState::Running => StateView::Running,
        WorkflowState::Pausing => StateView::Pausing,
        WorkflowState::Paused => StateView::Paused,
        WorkflowState::Resuming => StateView::Resuming,
        WorkflowState::Completed => StateView::Completed,
        WorkflowState::Failed => StateView::Failed,
    }
}

/// A task's state as the API names it.
pub(crate) fn task_state_view(s: TaskRunState) -> TaskState {
    match s {
        TaskRunState::Waiting => TaskState::Waiting,
        TaskRunState::Ready => TaskState::Ready,
        TaskRunState::Dispatched => TaskState::Dispatched,
        TaskRunState::Running => TaskState::Running,
        TaskRunState::Completed => TaskState::Completed,
        TaskRunState::Failed => TaskState::Failed,
        TaskRunState::AwaitingApproval => TaskState::AwaitingApproval,
    }
}
