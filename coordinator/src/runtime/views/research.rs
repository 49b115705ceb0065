//! The view of a research run: its state without the audit trail (only
//! its length) and without the writes not stored yet.

use caucus_shared::api::coordinator::status::{
    RefusedWriteView, ResearchAlertView, ResearchGateView, ResearchView, StreamView,
};

use crate::research::isolation::RefusedWrite;
use crate::research::state::ResearchAlert;
use crate::research::{GateDecision, ResearchState, StreamState, StreamStatus};

pub(super) fn research_view(r: &ResearchState) -> ResearchView {
    ResearchView {
        phase: r.phase.as_str().to_string(),
        phase_started_at: r.phase_started_at,
        phase_stages: r
            .phase_stages
            .iter()
            .map(|(p, s)| (p.as_str().to_string(), s.clone()))
            .collect(),
        total_limit_ms: r.total_limit_ms,
        streams: r
            .streams
            .iter()
            .map(|(n, s)| (*n, stream_view(s)))
            .collect(),
        passed: r.passed.clone(),
        gates: r
            .gates
            .iter()
            .map(|(p, g)| (p.as_str().to_string(), gate_view(g)))
            .collect(),
        refused_writes: r.refused_writes.iter().map(refused_view).collect(),
        refused_count: r.refused_count,
        stored_keys: r.stored_keys,
        alert: r.alert.as_ref().map(alert_view),
        paused_ms: r.paused_ms,
        checkpoints: r.checkpoints,
        last_checkpoint_at: r.last_checkpoint_at,
        audit_entries: r.audit.len(),
    }
}

fn stream_view(s: &StreamStatus) -> StreamView {
    let state = match s.state {
        StreamState::Pending => "pending",
        StreamState::Running => "running",
        StreamState::Complete => "complete",
        StreamState::Insufficient => "insufficient",
        StreamState::Failed => "failed",
        StreamState::TimedOut => "timed_out",
    };
    StreamView {
        task: s.task.clone(),
        state: state.to_string(),
        sources: s.sources,
        started_at: s.started_at,
        finished_at: s.finished_at,
        progress: s.progress.clone(),
        eta: s.eta,
        error: s.error.clone(),
        can_continue: s.can_continue,
        needs_intervention: s.needs_intervention,
        keys: s.keys.clone(),
    }
}

fn gate_view(g: &GateDecision) -> ResearchGateView {
    ResearchGateView {
        phase: g.phase.as_str().to_string(),
        verdict: g.verdict.as_str().to_string(),
        reasons: g.reasons.clone(),
        escalate: g.escalate,
        metrics: g.metrics.clone(),
    }
}

fn refused_view(w: &RefusedWrite) -> RefusedWriteView {
    RefusedWriteView {
        task: w.task.clone(),
        key: w.key.clone(),
        reason: w.reason.clone(),
    }
}

fn alert_view(a: &ResearchAlert) -> ResearchAlertView {
    ResearchAlertView {
        event_type: a.event_type.clone(),
        severity: a.severity.clone(),
        reason: a.reason.clone(),
        sent: a.sent,
    }
}
