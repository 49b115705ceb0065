//! Dispatching: each pump hands the ready tasks within capacity to
//! JetStream, then persists and acknowledges.

use async_nats::jetstream::context::{PublishAckFuture, PublishError, PublishErrorKind};
use async_nats::HeaderMap;
use chrono::Utc;
use futures::future::join_all;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use caucus_shared::nats::{elections, trace};
use caucus_shared::task::TaskDispatch;

use super::Scheduler;
use crate::runtime::gates;

/// How long a dispatch no JetStream stored waits before it is published
/// again.
const UNSTORED_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether a publish failed for want of a JetStream to store it, not
/// because of the message: nobody answered for the stream (503, as while a
/// cluster elects the stream's leader after its node died: up to the RAFT
/// election timeout, several seconds), the ack did not come, or the
/// connection broke. Such a dispatch is published again as the same
/// attempt instead of failing it: an outage would otherwise spend the
/// task's whole retry budget (3 attempts, 200 ms apart) in a second and
/// pause its workflow. Publishing it again is safe: the same `Nats-Msg-Id`
/// is dropped as a duplicate if the first copy was stored after all.
fn unstored(e: &PublishError) -> bool {
    elections::unanswered(e)
        || matches!(
            e.kind(),
            PublishErrorKind::TimedOut | PublishErrorKind::BrokenPipe
        )
}

impl Scheduler {
    /// Dispatch within capacity, publish, persist what is due, then ack
    /// the events behind it.
    pub(super) async fn pump(&mut self) {
        if !self.may_act() {
            self.abandon().await;
            return;
        }
        let now = self.clock.now();
        let caps = self
            .capacities
            .read()
            .map(|c| c.clone())
            .unwrap_or_default();
        // With several partitions each dispatches its share of the
        // capacity (docs/PARTITIONS.md): a dispatch beyond it would wait in
        // JetStream and be taken for silent.
        let part = self.partition;
        let (mut dispatches, dirty) = self
            .engine
            .next_dispatches(now, |a| part.share(caps.get(a).copied().unwrap_or(0)));
        self.dirty.extend(dirty);
        if !dispatches.is_empty() {
            let tag = self.partition.tag();
            for d in &mut dispatches {
                d.partition = tag;
            }
            self.attach_findings(&mut dispatches);
            crate::runtime::metrics::dispatched(&dispatches);
            self.publish(dispatches).await;
        }
        if let Some(c) = self.control.as_mut() {
            c.flush(&mut self.engine, &mut self.dirty, now).await;
        }
        if let Some(r) = self.research.as_mut() {
            r.flush(&mut self.engine, &self.dirty).await;
        }
        if let Some(r) = self.requests.as_mut() {
            r.flush(&mut self.engine, &mut self.dirty, now).await;
        }
        if !self.auto_due.is_empty() {
            let due = std::mem::take(&mut self.auto_due);
            let candidates = gates::auto_candidates_of(&self.engine, &due, Utc::now());
            self.auto_approve_these(candidates);
        }
        self.persist_due().await;
    }

    async fn publish(&mut self, dispatches: Vec<TaskDispatch>) {
        // Checked right before the batch goes out: a leader that was paused
        // past its lease dispatches nothing (its successor owns the tasks).
        if !self.may_act() {
            return;
        }
        let mut acks: Vec<(
            TaskDispatch,
            tracing::Span,
            Result<PublishAckFuture, PublishError>,
        )> = Vec::with_capacity(dispatches.len());
        for d in dispatches {
            let span = self.dispatch_span(&d);
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Msg-Id", d.msg_id().as_str());
            // The worker's `task` span becomes a child of this one.
            trace::inject_context(&span.context(), &mut headers);
            let body = serde_json::to_vec(&d).expect("dispatch serialises");
            let r = self
                .js
                .publish_with_headers(self.subjects.tasks(&d.agent_type), headers, body.into())
                .instrument(span.clone())
                .await;
            acks.push((d, span, r));
        }
        let mut failed = Vec::new();
        // Each dispatch span lasts until JetStream confirms (or refuses) it.
        let futs = acks.into_iter().map(|(d, span, r)| {
            async move {
                match r {
                    Ok(f) => match f.await {
                        Ok(_) => Ok(d.task_id),
                        Err(e) => Err((d, e)),
                    },
                    Err(e) => Err((d, e)),
                }
            }
            .instrument(span)
        });
        let now = self.clock.now();
        for r in join_all(futs).await {
            match r {
                Ok(task_id) => {
                    self.heard.insert(task_id, now);
                }
                Err((d, e)) => failed.push((d, e)),
            }
        }
        let later = now + chrono::Duration::from_std(UNSTORED_RETRY).expect("small");
        for (d, e) in failed {
            if unstored(&e) {
                tracing::warn!(task_id = %d.task_id, attempt = d.attempt, error = %e, "no JetStream stored the dispatch; publishing it again shortly");
                self.engine.requeue_at(&d.workflow_id, &d.task_id, later);
                self.dirty.insert(d.workflow_id.clone());
            } else {
                self.dispatch_failed(&d, &e.to_string());
            }
        }
    }

    /// The `dispatch` span of one attempt, a child of its workflow's root
    /// (stored in the record, so it is the same trace on any coordinator
    /// and across re-runs and resumes). A workflow without a stored root
    /// (an older record, or one created outside `submit`) gets a
    /// `workflow` root span now, stored with the record's next write.
    fn dispatch_span(&mut self, d: &TaskDispatch) -> tracing::Span {
        let key = d
            .task_id
            .strip_prefix(d.workflow_id.as_str())
            .and_then(|k| k.strip_prefix('/'))
            .unwrap_or_default();
        let mut queue_wait_ms = 0i64;
        let mut parent = None;
        if let Some(rec) = self.engine.get_mut(&d.workflow_id) {
            if let Some(ready) = rec.tasks.get(key).and_then(|t| t.ready_at) {
                queue_wait_ms = (d.dispatched_at - ready).num_milliseconds().max(0);
            }
            if rec.trace_parent.is_none() {
                let root = tracing::info_span!(
                    target: trace::SPAN_TARGET,
                    parent: None,
                    "workflow",
                    caucus.workflow_id = d.workflow_id.as_str(),
                    caucus.item = d.item.as_str(),
                    caucus.pipeline = %d.pipeline
                );
                if let Some((tp, ts)) = trace::traceparent_of(&root.context()) {
                    rec.trace_parent = Some(tp);
                    rec.trace_state = ts;
                    self.dirty.insert(d.workflow_id.clone());
                }
            }
            parent = rec
                .trace_parent
                .as_deref()
                .map(|tp| trace::context_from(tp, rec.trace_state.as_deref()));
        }
        let span = tracing::info_span!(
            target: trace::SPAN_TARGET,
            parent: None,
            "dispatch",
            otel.kind = "producer",
            caucus.task_id = d.task_id.as_str(),
            caucus.workflow_id = d.workflow_id.as_str(),
            caucus.item = d.item.as_str(),
            caucus.stage = d.stage.as_str(),
            caucus.agent_type = d.agent_type.as_str(),
            // i64: tracing-opentelemetry exports unsigned fields as strings.
            caucus.attempt = i64::from(d.attempt),
            caucus.queue_wait_ms = queue_wait_ms
        );
        if let Some(cx) = parent {
            trace::set_parent(&span, cx);
        }
        span
    }

    /// A dispatch JetStream refused (not for want of a stream, see
    /// [`unstored`]) fails its attempt (transient),
    /// so the task's retry policy backs it off or fails it with the reason
    /// instead of republishing it on every pump while NATS is unwell. If
    /// the message was stored after all, the worker's events of that
    /// attempt are stale once the next attempt is dispatched.
    fn dispatch_failed(&mut self, d: &TaskDispatch, error: &str) {
        tracing::warn!(task_id = %d.task_id, attempt = d.attempt, error, "dispatch not confirmed by JetStream; failing the attempt");
        self.fail_attempt(
            &d.workflow_id,
            &d.task_id,
            d.attempt,
            caucus_shared::task::TaskError {
                class: caucus_shared::task::ErrorClass::Transient,
                error_type: caucus_shared::task::coordinator_errors::DISPATCH_FAILED.into(),
                message: format!("the dispatch could not be published: {error}"),
                data_source: None,
            },
        );
    }
}
