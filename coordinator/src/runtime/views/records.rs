//! Views of the smaller records a workflow carries: pause, flags, gates
//! and the level review (decisions and re-runs: the gate operations'
//! views, `gates_package`).

use caucus_shared::api::coordinator::status::{
    ConflictView, FlagView, GateView, LevelOutcomeView, LevelReviewPolicyView,
    LevelReviewResultView, LevelReviewView, PauseView, RetryView, ReviewedConflictView,
};

use crate::runtime::gates_package::decision_view;
pub(super) use crate::runtime::gates_package::rerun_view;
use crate::workflow::{
    Conflict, GateState, LevelOutcome, LevelReview, LevelReviewState, PauseInfo, ReviewedConflict,
    WorkflowFlag,
};

/// The API view of a workflow's pause.
pub(crate) fn pause_view(p: &PauseInfo) -> PauseView {
    PauseView {
        seq: p.seq,
        reason: p.reason.clone(),
        trigger_source: p.trigger_source.clone(),
        requested_at: p.requested_at,
        paused_at: p.paused_at,
        cancel_in_flight: p.cancel_in_flight,
        tier: p.tier,
        escalated: p.escalated,
        failed_tasks: p.failed_tasks.clone(),
        checkpoint_id: p.checkpoint_id.clone(),
        reminders_sent: p.reminders_sent.clone(),
        batch_id: p.batch_id.clone(),
        correlation_id: p.correlation_id.clone(),
    }
}

pub(super) fn flag_view(f: &WorkflowFlag) -> FlagView {
    FlagView {
        kind: f.kind.clone(),
        at: f.at,
        detail: f.detail.clone(),
    }
}

pub(super) fn gate_view(g: &GateState) -> GateView {
    GateView {
        opened_at: g.opened_at,
        reminders_sent: g.reminders_sent,
        escalated_at: g.escalated_at,
        history: g.history.iter().map(decision_view).collect(),
        decision: g.decision.as_ref().map(decision_view),
    }
}

pub(super) fn level_review_view(s: &LevelReviewState) -> LevelReviewView {
    let p = &s.policy;
    LevelReviewView {
        policy: LevelReviewPolicyView {
            mode: p.mode,
            agent: p.agent.clone(),
            expected: p.expected,
            timeout: p.timeout,
            retry: RetryView {
                max_attempts: p.retry.max_attempts,
                backoff_initial_ms: p.retry.backoff_initial_ms,
                backoff_max_ms: p.retry.backoff_max_ms,
            },
        },
        levels: s.levels.iter().map(level_view).collect(),
    }
}

fn level_view(l: &LevelOutcome) -> LevelOutcomeView {
    LevelOutcomeView {
        level: l.level,
        conflicts: l.conflicts.iter().map(conflict_view).collect(),
        review_task: l.review_task.clone(),
        review: l.review.as_ref().map(review_view),
    }
}

fn conflict_view(c: &Conflict) -> ConflictView {
    ConflictView {
        resource: c.resource.clone(),
        tasks: c.tasks.clone(),
    }
}

fn review_view(r: &LevelReview) -> LevelReviewResultView {
    LevelReviewResultView {
        level: r.level,
        conflicts: r.conflicts.iter().map(reviewed_view).collect(),
        summary: r.summary.clone(),
        fixes_applied: r.fixes_applied.clone(),
        warnings_for_next_level: r.warnings_for_next_level.clone(),
        duration_ms: r.duration_ms,
        issues: r.issues.clone(),
    }
}

fn reviewed_view(c: &ReviewedConflict) -> ReviewedConflictView {
    ReviewedConflictView {
        resource: c.resource.clone(),
        tasks: c.tasks.clone(),
        resolved: c.resolved,
        resolution: c.resolution.clone(),
    }
}
