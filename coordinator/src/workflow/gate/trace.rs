//! Gate transitions in the workflow's trace: a short `gate` span, a child
//! of the workflow's root, carrying one span event (`gate.opened`,
//! `gate.reminded`, `gate.decided`) with the attributes `gate`, `decision`
//! and `by`.

use caucus_shared::nats::trace;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::super::WorkflowRecord;

/// One gate transition, as recorded in the trace.
pub(super) struct GateEvent<'a> {
    /// `gate.opened`, `gate.reminded` or `gate.decided`.
    pub name: &'static str,
    /// The gate's task key.
    pub gate: &'a str,
    /// The decision (`approve`, `reject`, `send_back`), a reminder's
    /// `reminder <n>` or `escalation`; empty at opening.
    pub decision: &'a str,
    /// Who decided (`auto` for an automatic approval); empty otherwise.
    pub by: &'a str,
}

impl WorkflowRecord {
    /// Records `event` in a `gate` span under the workflow's root. A record
    /// that has no stored root yet (a gate open from the start is opened
    /// while `submit` instantiates it) uses the current span, which is
    /// then that root.
    pub(super) fn trace_gate(&self, event: GateEvent<'_>) {
        let span = tracing::info_span!(
            target: trace::SPAN_TARGET,
            parent: None,
            "gate",
            caucus.workflow_id = %self.workflow_id,
            caucus.item = %self.item,
            caucus.gate = event.gate
        );
        let parent = match self.trace_parent.as_deref() {
            Some(tp) => trace::context_from(tp, self.trace_state.as_deref()),
            None => tracing::Span::current().context(),
        };
        trace::set_parent(&span, parent);
        let GateEvent {
            name,
            gate,
            decision,
            by,
        } = event;
        // The message is the OpenTelemetry event's name.
        span.in_scope(
            || tracing::info!(gate, decision, by, workflow_id = %self.workflow_id, "{name}"),
        );
    }
}
