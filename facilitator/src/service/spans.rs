//! The facilitator's spans: a debate lives in the trace of whatever opened
//! it, however long it lasts and whichever instance moves it on.
//!
//! - `debate`: one per debate, while it opens (sync lock, flush, snapshot,
//!   store, challenge sent). Its parent is the current span: the `consume`
//!   span of the challenge message (a child of the sending worker task's
//!   span through the `traceparent` header) or the `api` span of a
//!   `facilitator.message` request. Attributes `caucus.debate_id`,
//!   `caucus.topic` (the disputed finding), `caucus.level`,
//!   `caucus.priority`, `caucus.workflow_id`, `caucus.item`,
//!   `caucus.redebate_of`; span event `debate opened`. Its context is
//!   stored in the debate record (`trace_parent` / `trace_state`).
//! - `debate.step`: one per later transition (an agent's message, a
//!   time-out fired by the timer, mediation, a person's decision, a gate
//!   review), on any instance, even after a restart. Its parent is the
//!   stored `debate` context, so the whole debate is one subtree of the
//!   workflow's trace; when a message or request caused the step, the span
//!   also links to that message's span. Attributes `caucus.debate_id`,
//!   `caucus.level` and `caucus.state` (after the step), `caucus.outcome`
//!   (when the step ended or settled a level, as in
//!   `caucus_debates_total`); span events `debate escalated` (from, to,
//!   reason, outcome) and `debate resolved` (level, method, label,
//!   outcome), which are the facilitator's log lines of the same name.

use async_nats::HeaderMap;
use caucus_shared::nats::trace;
use opentelemetry::trace::{SpanContext, TraceContextExt};
use opentelemetry::Context;
use tracing::field::Empty;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::debate::{Debate, Effect};
use crate::metrics::level_ends;

/// The W3C `traceparent` (and non-empty `tracestate`) of `cx`; `None` when
/// `cx` holds no valid span.
pub fn traceparent_of(cx: &Context) -> Option<(String, Option<String>)> {
    let mut h = HeaderMap::new();
    trace::inject_context(cx, &mut h);
    let parent = h.get("traceparent")?.as_str().to_string();
    let state = h
        .get("tracestate")
        .map(|v| v.as_str().to_string())
        .filter(|s| !s.is_empty());
    Some((parent, state))
}

/// The remote context a stored `traceparent` / `tracestate` names (empty
/// when the traceparent does not parse).
pub fn context_from(parent: &str, state: Option<&str>) -> Context {
    let mut h = HeaderMap::new();
    h.insert("traceparent", parent);
    if let Some(s) = state {
        h.insert("tracestate", s);
    }
    trace::extract(&h)
}

/// The stored context of `d`'s `debate` span, if it has one.
pub fn stored_context(d: &Debate) -> Option<Context> {
    let parent = d.trace_parent.as_deref()?;
    let cx = context_from(parent, d.trace_state.as_deref());
    cx.has_active_span().then_some(cx)
}

/// Stores the context of `span` in `d` (when tracing gives it one).
pub fn store_context(d: &mut Debate, span: &Span) {
    if let Some((parent, state)) = traceparent_of(&span.context()) {
        d.trace_parent = Some(parent);
        d.trace_state = state;
    }
}

/// The `debate` span of debate `id` opened by `d`'s challenge (call before
/// the debate is built: only the challenge is read).
pub fn debate_span(id: &str, challenge: &caucus_shared::messages::Challenge) -> Span {
    let span = tracing::info_span!(
        "debate",
        caucus.debate_id = %id,
        caucus.topic = %challenge.disputed_finding,
        caucus.level = 1u64,
        caucus.priority = challenge.priority.as_str(),
        caucus.workflow_id = Empty,
        caucus.item = Empty,
        caucus.redebate_of = Empty,
    );
    if let Some(w) = &challenge.workflow_id {
        span.record("caucus.workflow_id", w.as_str());
    }
    if let Some(i) = &challenge.item {
        span.record("caucus.item", i.as_str());
    }
    span
}

/// The span context of whatever span is current (the message or request
/// being handled), when it is valid.
fn current_span_context() -> Option<SpanContext> {
    let cx = Span::current().context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then_some(sc)
}

/// Parent and link of a step of `d`: the stored debate context as parent
/// (none: the step joins the current span's trace instead) and the current
/// span as a link when it is a different span of the stored context.
pub fn step_relations(d: &Debate) -> (Option<Context>, Option<SpanContext>) {
    let parent = stored_context(d);
    let link = match &parent {
        Some(p) => {
            current_span_context().filter(|sc| sc.span_id() != p.span().span_context().span_id())
        }
        None => None,
    };
    (parent, link)
}

/// The `debate.step` span of a transition of `d` (as loaded, before it).
pub fn step_span(d: &Debate) -> Span {
    let span = tracing::info_span!(
        "debate.step",
        caucus.debate_id = %d.debate_id,
        caucus.level = u64::from(d.level),
        caucus.state = d.state.as_str(),
        caucus.outcome = Empty,
        otel.status_code = Empty,
    );
    let (parent, link) = step_relations(d);
    if let Some(p) = parent {
        // Fails only without an OpenTelemetry layer: nothing to join then.
        let _ = span.set_parent(p);
    }
    if let Some(l) = link {
        span.add_link(l);
    }
    span
}

/// Records on `span` what a stored transition did: the level and state it
/// left `d` in and, when it ended or settled a level, the outcome (the
/// last one when it did both, e.g. a human time-out that applied the
/// conservative default). The escalations and resolutions themselves are
/// the `debate escalated` / `debate resolved` log events, which become
/// span events of `span`.
pub fn record_step(span: &Span, d: &Debate, effects: &[Effect]) {
    span.record("caucus.level", u64::from(d.level));
    span.record("caucus.state", d.state.as_str());
    if let Some((_, outcome)) = level_ends(effects).last() {
        span.record("caucus.outcome", *outcome);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use opentelemetry::trace::{SpanId, TraceFlags, TraceId, TraceState};

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn traceparents_round_trip_and_absent_contexts_store_nothing() {
        let cx = context_from(PARENT, Some("vendor=x"));
        let sc = cx.span().span_context().clone();
        assert_eq!(
            sc.trace_id(),
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap()
        );
        assert_eq!(sc.span_id(), SpanId::from_hex("00f067aa0ba902b7").unwrap());
        assert!(sc.is_sampled());
        assert_eq!(
            traceparent_of(&cx),
            Some((PARENT.to_string(), Some("vendor=x".to_string())))
        );
        assert_eq!(traceparent_of(&Context::new()), None);
        assert!(!context_from("garbage", None).has_active_span());
    }

    #[test]
    fn a_stored_context_is_the_parent_of_every_later_step() {
        let mut d = crate::debate::tests::open("supporting");
        assert!(stored_context(&d).is_none(), "opened without a trace");
        assert!(matches!(step_relations(&d), (None, None)));
        d.trace_parent = Some(PARENT.into());
        // What the debates bucket holds survives a restart or a takeover.
        let stored: Debate = serde_json::from_value(serde_json::to_value(&d).unwrap()).unwrap();
        assert_eq!(stored.trace_parent.as_deref(), Some(PARENT));
        let (parent, link) = step_relations(&stored);
        let parent = parent.expect("parent from the record");
        assert_eq!(
            parent.span().span_context().span_id(),
            SpanId::from_hex("00f067aa0ba902b7").unwrap()
        );
        // No current span (a timer firing): nothing to link.
        assert!(link.is_none());
    }

    /// Installs the process's telemetry once for this test binary, with
    /// every span sampled and nothing exported, so spans get real ids, and
    /// metrics read by the Prometheus registry (no listener needed). Call
    /// it first in every test that records a metric: instruments made
    /// before it are no-ops for good.
    pub(crate) fn traced() {
        static GUARD: std::sync::OnceLock<caucus_shared::telemetry::TelemetryGuard> =
            std::sync::OnceLock::new();
        GUARD.get_or_init(|| {
            let cfg = caucus_shared::config::TelemetryConfig {
                sample_ratio: 1.0,
                log_level: "info".into(),
                metrics_addr: Some("127.0.0.1:0".into()),
                ..Default::default()
            };
            let provider = caucus_shared::telemetry::tracer_provider(&cfg, "test").unwrap();
            caucus_shared::telemetry::init_with_provider(&cfg, "test", provider).unwrap()
        });
    }

    fn span_context(s: &Span) -> SpanContext {
        s.context().span().span_context().clone()
    }

    #[test]
    fn a_debate_and_its_later_steps_share_the_opening_messages_trace() {
        traced();
        // The challenge arrives with the worker task's traceparent.
        let mut h = HeaderMap::new();
        h.insert("traceparent", PARENT);
        let consume = trace::consumer_span("caucus.debates.d1.challenge", Some(&h));
        let mut d = crate::debate::tests::open("supporting");
        let opened = consume.in_scope(|| {
            let span = debate_span(&d.debate_id, &d.challenge);
            store_context(&mut d, &span);
            span_context(&span)
        });
        assert_eq!(
            opened.trace_id(),
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            "the debate span is in the worker task's trace"
        );
        let stored = stored_context(&d).expect("the debate span's context is stored");
        assert_eq!(stored.span().span_context().span_id(), opened.span_id());

        // Later, on another instance: the agent's evidence comes in its own
        // message span (here another trace), the step joins the debate.
        let evidence = tracing::info_span!("consume");
        let _ = evidence.set_parent(Context::new().with_remote_span_context(SpanContext::new(
            TraceId::from_hex("11111111111111111111111111111111").unwrap(),
            SpanId::from_hex("2222222222222222").unwrap(),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        )));
        let (step, link, evidence_sc) = evidence.in_scope(|| {
            let (_, link) = step_relations(&d);
            (
                span_context(&step_span(&d)),
                link,
                span_context(&Span::current()),
            )
        });
        assert_eq!(step.trace_id(), opened.trace_id(), "one trace per debate");
        assert_ne!(step.span_id(), opened.span_id());
        assert_eq!(
            link.map(|l| l.span_id()),
            Some(evidence_sc.span_id()),
            "the step links the message that caused it"
        );

        // A time-out fired by the timer: no current span, same trace.
        let fired = span_context(&step_span(&d));
        assert_eq!(fired.trace_id(), opened.trace_id());
        assert!(step_relations(&d).1.is_none());
    }

    #[test]
    fn debates_without_a_trace_are_stored_as_before() {
        let d = crate::debate::tests::open("supporting");
        let json = serde_json::to_value(&d).unwrap();
        assert!(json.get("trace_parent").is_none());
        assert!(json.get("trace_state").is_none());
    }
}
