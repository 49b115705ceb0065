//! The engine plus its side effects: one failure in, records and messages
//! out. Used the same way by the start-up replay and the live consumer.
//!
//! Effects that fail (NATS away) are retried here with a capped backoff
//! until they succeed or `stop` fires. A stopped processor is thrown away
//! with its engine; the next one replays the stream, so nothing is lost.

use std::collections::{HashMap, HashSet, VecDeque};
use std::future::Future;
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};
use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use opentelemetry::trace::SpanContext;
use tracing::Instrument;

use crate::effects::{EffectError, Effects, Published, Workflows};
use crate::engine::{Correlation, CorrelationOutcome, Correlator, CorrelatorError};
use crate::event::FailureEvent;
use crate::metrics;
use crate::spans;
use crate::trace_links::TraceLinks;
use crate::window::canonical_item;

const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Why processing stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// `stop` fired while an effect was being retried.
    #[error("stopped with side effects outstanding")]
    Stopped,
    /// The engine refused the event (validated earlier, so a bug).
    #[error(transparent)]
    Engine(#[from] CorrelatorError),
}

/// Counters for logs and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessStats {
    /// Failures fed to the engine.
    pub events: u64,
    /// Incidents detected.
    pub detected: u64,
    /// Items that joined an open incident.
    pub joined_items: u64,
    /// Incidents closed.
    pub closed: u64,
}

/// Workflow ids of recent failures, bounded, so a detection can name the
/// workflows of the failures that made it.
#[derive(Debug, Default)]
struct WorkflowIndex {
    by_event: HashMap<String, (String, String)>,
    order: VecDeque<String>,
    max: usize,
}

impl WorkflowIndex {
    fn note(&mut self, ev: &FailureEvent) {
        let Some(wf) = &ev.workflow_id else { return };
        let item = canonical_item(&ev.stock_ticker);
        if self
            .by_event
            .insert(ev.event_id.clone(), (item, wf.clone()))
            .is_none()
        {
            self.order.push_back(ev.event_id.clone());
        }
        while self.order.len() > self.max {
            if let Some(old) = self.order.pop_front() {
                self.by_event.remove(&old);
            }
        }
    }

    fn of(&self, event_ids: &[String]) -> Workflows {
        let mut out = Workflows::new();
        for id in event_ids {
            if let Some((item, wf)) = self.by_event.get(id) {
                out.entry(item.clone()).or_default().insert(wf.clone());
            }
        }
        out
    }
}

/// Engine + effects.
#[derive(Debug)]
pub struct Processor {
    engine: Correlator,
    effects: Effects,
    workflows: WorkflowIndex,
    /// Incidents whose record lags the engine (repeated failures of known
    /// items); written by [`Processor::flush`], not per event.
    dirty: HashSet<String>,
    flush_interval: Duration,
    last_flush: Instant,
    stop: CancellationToken,
    stats: ProcessStats,
    /// Span contexts of recent failures, for the correlation span's links.
    traces: TraceLinks,
}

impl Processor {
    /// A processor over a fresh `engine`.
    pub fn new(
        engine: Correlator,
        effects: Effects,
        max_tracked_ids: usize,
        stop: CancellationToken,
    ) -> Self {
        Processor {
            engine,
            effects,
            workflows: WorkflowIndex {
                max: max_tracked_ids,
                ..WorkflowIndex::default()
            },
            dirty: HashSet::new(),
            flush_interval: Duration::ZERO,
            last_flush: Instant::now(),
            stop,
            stats: ProcessStats::default(),
            traces: TraceLinks::new(max_tracked_ids),
        }
    }

    /// Writes refreshed records at most every `interval` from
    /// [`Processor::flush_due`] (default: every call).
    pub fn with_flush_interval(mut self, interval: Duration) -> Self {
        self.flush_interval = interval;
        self
    }

    /// The engine (read-only).
    pub fn engine(&self) -> &Correlator {
        &self.engine
    }

    /// The span contexts of `c`'s failed tasks its `correlation` span
    /// links to (those whose failure messages carried one).
    pub fn links(&self, c: &Correlation) -> Vec<SpanContext> {
        self.traces.links(&c.event_ids)
    }

    /// Counters so far.
    pub fn stats(&self) -> ProcessStats {
        self.stats
    }

    /// Takes one failure and carries out what it caused.
    pub async fn handle(&mut self, ev: FailureEvent) -> Result<(), ProcessError> {
        self.handle_traced(ev, None).await
    }

    /// [`Processor::handle`] for a failure whose message carried the span
    /// context `task` (the failed task's span), which the incident's
    /// `correlation` span will link to.
    pub async fn handle_traced(
        &mut self,
        ev: FailureEvent,
        task: Option<SpanContext>,
    ) -> Result<(), ProcessError> {
        if let Some(sc) = task {
            self.traces.note(&ev.event_id, sc);
        }
        self.workflows.note(&ev);
        let outcomes = self.engine.on_failure(ev)?;
        self.stats.events += 1;
        for outcome in outcomes {
            match outcome {
                CorrelationOutcome::Detected(c) => {
                    self.stats.detected += 1;
                    self.detected(&c).await?;
                }
                CorrelationOutcome::Joined {
                    correlation_id,
                    new_item,
                    item,
                    ..
                } => {
                    if !new_item {
                        // Only counts changed: written by the next flush.
                        if !self.dirty.contains(&correlation_id) {
                            self.dirty.insert(correlation_id);
                        }
                        continue;
                    }
                    let Some(c) = self.engine.correlation(&correlation_id).cloned() else {
                        continue;
                    };
                    self.stats.joined_items += 1;
                    tracing::info!(correlation_id = %correlation_id, item = %item, "item joined a correlation");
                    self.sync(&c).await?;
                    self.dirty.remove(&correlation_id);
                }
                CorrelationOutcome::Closed(c) => self.close(&c).await?,
            }
        }
        Ok(())
    }

    /// [`Processor::flush`] if the flush interval has passed. Refreshes are
    /// derivable: a replay rebuilds the counts, so they may lag the ack.
    pub async fn flush_due(&mut self) -> Result<(), ProcessError> {
        if self.last_flush.elapsed() >= self.flush_interval {
            self.flush().await?;
        }
        Ok(())
    }

    /// Writes the records of incidents that only had repeated failures.
    pub async fn flush(&mut self) -> Result<(), ProcessError> {
        self.last_flush = Instant::now();
        let ids: Vec<String> = self.dirty.drain().collect();
        for id in ids {
            let Some(c) = self.engine.correlation(&id).cloned() else {
                continue;
            };
            let wf = self.workflows.of(&c.event_ids);
            retry(&self.stop, "refresh correlation record", || {
                self.effects.refresh(&c, &wf)
            })
            .await?;
        }
        Ok(())
    }

    /// Closes incidents quiet for a full window before `now`.
    pub async fn expire(&mut self, now: DateTime<Utc>) -> Result<(), ProcessError> {
        self.flush().await?;
        for c in self.engine.expire(now) {
            self.close(&c).await?;
        }
        Ok(())
    }

    async fn sync(&mut self, c: &Correlation) -> Result<Published, ProcessError> {
        let wf = self.workflows.of(&c.event_ids);
        let effects = &self.effects;
        retry(&self.stop, "publish correlation", || effects.sync(c, &wf)).await
    }

    /// A detection: announced inside the incident's `correlation` span,
    /// unless its record says it went out already (a replay re-detecting
    /// it, or another instance first), so each incident gets one span and
    /// one count.
    async fn detected(&mut self, c: &Correlation) -> Result<(), ProcessError> {
        let announced = match self.effects.store().get(&c.correlation_id).await {
            Ok(found) => found.is_some_and(|(rec, _)| rec.detection_published),
            // Unknown: sync reads it again and says what it published.
            Err(_) => false,
        };
        if announced {
            tracing::info!(correlation_id = %c.correlation_id, root_cause = %c.root_cause.text, items = ?c.items, announced, "correlated failures detected");
            self.sync(c).await?;
            return Ok(());
        }
        let span = spans::correlation_span(c, self.links(c));
        let published = async {
            tracing::info!(correlation_id = %c.correlation_id, root_cause = %c.root_cause.text, items = ?c.items, "correlated failures detected");
            self.sync(c).await
        }
        .instrument(span)
        .await?;
        if published.detected {
            metrics::correlation_detected();
        }
        Ok(())
    }

    async fn close(&mut self, c: &Correlation) -> Result<(), ProcessError> {
        self.stats.closed += 1;
        self.dirty.remove(&c.correlation_id);
        tracing::info!(correlation_id = %c.correlation_id, items = c.items.len(), "correlation closed");
        let effects = &self.effects;
        retry(&self.stop, "close correlation", || effects.close(c)).await
    }
}

/// One try of an effect: it failed (try again after the backoff), or
/// `stop` fired first (give up).
enum Attempt {
    Stopped,
    Failed(EffectError),
}

/// Runs `f` until it succeeds, backing off from [`FIRST_BACKOFF`] to
/// [`MAX_BACKOFF`] between tries; `stop` ends the retries, also during a
/// pause.
async fn retry<T, F, Fut>(stop: &CancellationToken, what: &str, mut f: F) -> Result<T, ProcessError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, EffectError>>,
{
    let once = || {
        let attempt = (!stop.is_cancelled()).then(&mut f);
        async move {
            match attempt {
                Some(fut) => fut.await.map_err(Attempt::Failed),
                None => Err(Attempt::Stopped),
            }
        }
    };
    let token = stop.clone();
    let pause = move |d: Duration| {
        let token = token.clone();
        async move {
            tokio::select! {
                _ = token.cancelled() => {}
                _ = tokio::time::sleep(d) => {}
            }
        }
    };
    let schedule = ExponentialBuilder::default()
        .with_min_delay(FIRST_BACKOFF)
        .with_factor(2.0)
        .with_max_delay(MAX_BACKOFF)
        .without_max_times();
    once.retry(schedule)
        .sleep(pause)
        .when(|a| matches!(a, Attempt::Failed(_)))
        .notify(|a, retry_in| {
            if let Attempt::Failed(e) = a {
                tracing::warn!(error = %e, ?retry_in, "{what} failed");
            }
        })
        .await
        // Without a limit on tries, only `stop` ends the retries.
        .map_err(|_| ProcessError::Stopped)
}
