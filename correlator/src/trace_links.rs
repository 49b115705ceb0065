//! The span contexts of recent failures, so a correlation can link the
//! spans of the tasks whose failures made it.
//!
//! A failure event carries the `traceparent` of the worker's `task` span
//! (or the coordinator's span that reported it) in its NATS headers. The
//! engine is pure and keeps no trace data; this index, keyed by event id
//! and bounded like the engine's event-id memory, holds each failure's
//! span context beside it.
//!
//! Choice: the `correlation` span is a new root with one span link per
//! failed task, not a child of the first failure's trace. An incident
//! spans many workflows; making it part of one of them would show it in
//! one arbitrary workflow's trace and hide it from the others, while
//! links let every failed task's trace reach it (and it reach them).

use std::collections::{HashMap, VecDeque};

use async_nats::HeaderMap;
use caucus_shared::nats::trace;
use opentelemetry::trace::{SpanContext, TraceContextExt};

/// Links one correlation span carries at most (the SDK's default span link
/// limit; later failures are only counted).
pub const MAX_LINKS: usize = 128;

/// The span context a failure message's headers carry, when valid.
pub fn span_context_of(headers: Option<&HeaderMap>) -> Option<SpanContext> {
    let cx = trace::extract_opt(headers);
    let sc = cx.span().span_context().clone();
    sc.is_valid().then_some(sc)
}

/// Event id → span context of the failed task, for the newest `max` events.
#[derive(Debug, Default)]
pub struct TraceLinks {
    by_event: HashMap<String, SpanContext>,
    order: VecDeque<String>,
    max: usize,
}

impl TraceLinks {
    /// An index remembering at most `max` events.
    pub fn new(max: usize) -> Self {
        TraceLinks {
            max,
            ..TraceLinks::default()
        }
    }

    /// Remembers the span context of event `event_id`.
    pub fn note(&mut self, event_id: &str, sc: SpanContext) {
        if self.by_event.insert(event_id.to_string(), sc).is_none() {
            self.order.push_back(event_id.to_string());
        }
        while self.order.len() > self.max {
            if let Some(old) = self.order.pop_front() {
                self.by_event.remove(&old);
            }
        }
    }

    /// The span contexts of `event_ids` that are known, in that order,
    /// each span once, at most [`MAX_LINKS`].
    pub fn links(&self, event_ids: &[String]) -> Vec<SpanContext> {
        let mut seen = std::collections::HashSet::new();
        event_ids
            .iter()
            .filter_map(|id| self.by_event.get(id))
            .filter(|sc| seen.insert((sc.trace_id(), sc.span_id())))
            .take(MAX_LINKS)
            .cloned()
            .collect()
    }

    /// Events remembered.
    pub fn len(&self) -> usize {
        self.by_event.len()
    }

    /// Whether no event is remembered.
    pub fn is_empty(&self) -> bool {
        self.by_event.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanId, TraceFlags, TraceId, TraceState};

    fn sc(trace: u128, span: u64) -> SpanContext {
        SpanContext::new(
            TraceId::from(trace),
            SpanId::from(span),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        )
    }

    #[test]
    fn failure_headers_give_the_task_span() {
        let mut h = HeaderMap::new();
        h.insert(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        );
        let got = span_context_of(Some(&h)).expect("a span context");
        assert_eq!(got.span_id(), SpanId::from_hex("00f067aa0ba902b7").unwrap());
        assert!(span_context_of(Some(&HeaderMap::new())).is_none());
        assert!(span_context_of(None).is_none());
    }

    #[test]
    fn links_follow_the_events_of_the_correlation_and_forget_the_oldest() {
        let mut t = TraceLinks::new(3);
        t.note("e1", sc(1, 1));
        t.note("e2", sc(2, 2));
        t.note("e3", sc(3, 3));
        t.note("e2", sc(2, 2));
        let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            t.links(&ids(&["e3", "e1", "unknown", "e2"])),
            vec![sc(3, 3), sc(1, 1), sc(2, 2)]
        );
        t.note("e4", sc(4, 4));
        assert_eq!(t.len(), 3);
        assert_eq!(
            t.links(&ids(&["e1", "e2", "e3", "e4"])),
            vec![sc(2, 2), sc(3, 3), sc(4, 4)],
            "e1 fell out"
        );
    }

    #[test]
    fn links_are_capped_and_name_each_span_once() {
        let mut t = TraceLinks::new(1000);
        let mut ids = Vec::new();
        for i in 0..(MAX_LINKS as u64 + 50) {
            let id = format!("e{i}");
            t.note(&id, sc(u128::from(i) + 1, i + 1));
            ids.push(id);
        }
        // A failure reported twice under two ids (same task span).
        t.note("again", sc(1, 1));
        ids.insert(1, "again".into());
        let links = t.links(&ids);
        assert_eq!(links.len(), MAX_LINKS);
        assert_eq!(links[0], sc(1, 1));
        assert_eq!(links[1], sc(2, 2), "the repeat is not linked twice");
    }
}
