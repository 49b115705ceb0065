//! Views of the smaller records a workflow carries: pause, flags, gates,
//! re-runs and the level review.

use caucus_shared::api::coordinator::status::{
    ConflictView, FlagView, GateDecisionView, GateView, LevelOutcomeView, LevelReviewPolicyView,
    LevelReviewResultView, LevelReviewView, PauseView, RerunEstimateView, RerunView, RetryView,
    ReviewedConflictView,
};

use crate::workflow::{
    Conflict, GateDecision, GateState, LevelOutcome, LevelReview, LevelReviewState, PauseInfo,
    RerunEstimate, RerunRecord, ReviewedConflict, WorkflowFlag,
};

pub(super) fn pause_view(p: &PauseInfo) -> PauseView {
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

fn decision_view(d: &GateDecision) -> GateDecisionView {
    GateDecisionView {
        action: d.action.as_str().to_string(),
        decided_by: d.decided_by.clone(),
        rationale: d.rationale.clone(),
        at: d.at,
        response_ms: d.response_ms,
        send_back_to: d.send_back_to.clone(),
        reminders_sent: d.reminders_sent,
        escalated: d.escalated,
    }
}

pub(super) fn rerun_view(r: &RerunRecord) -> RerunView {
    RerunView {
        rerun_id: r.rerun_id.clone(),
        reason: r.reason.clone(),
        requested_by: r.requested_by.clone(),
        requested_at: r.requested_at,
        groups: r.groups.clone(),
        next_group: r.next_group,
        not_yet_run: r.not_yet_run.clone(),
        assumptions: r.assumptions.clone(),
        completed_at: r.completed_at,
        estimates: r.estimates.iter().map(estimate_view).collect(),
    }
}

fn estimate_view(e: &RerunEstimate) -> RerunEstimateView {
    RerunEstimateView {
        task: e.task.clone(),
        output_metric: e.output_metric.clone(),
        before: e.before,
        estimate: e.estimate,
        estimate_method: e.estimate_method.clone(),
        actual: e.actual,
        error: e.error,
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
