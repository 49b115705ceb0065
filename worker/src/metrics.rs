//! The worker's metrics (docs/OBSERVABILITY.md lists them all):
//!
//! - `caucus_worker_slots{agent_type}`: slots this process runs per type;
//! - `caucus_worker_slots_busy{agent_type}`: slots running a task now;
//! - `caucus_worker_tasks_total{agent_type,outcome}`: task attempts this
//!   process took, by how they ended: `completed`, `failed` (the handler
//!   failed; the coordinator decides whether to retry) or `abandoned`
//!   (returned to the queue without a result: the lease was lost, or the
//!   `started` event could not be published);
//! - `caucus_worker_handler_seconds{agent_type,handler}`: how long the
//!   handler ran (without `worker.pace`'s padding), `handler` being
//!   `builtin`, `exec` or `http` (`noop` and `sleep` for load tests).
//!
//! Instruments are made once, from the process's meter (after telemetry is
//! installed); recording into them is a no-op when metrics are off.

use std::sync::OnceLock;
use std::time::Duration;

use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter, UpDownCounter};
use opentelemetry::KeyValue;

use caucus_shared::telemetry::metrics::{meter, SECONDS_BUCKETS};

/// How a task attempt ended on this worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// `completed` was reported.
    Completed,
    /// `failed` was reported.
    Failed,
    /// Handed back to the queue without a result.
    Abandoned,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Failed => "failed",
            Outcome::Abandoned => "abandoned",
        }
    }
}

/// The worker's instruments.
pub(crate) struct Instruments {
    slots: Gauge<u64>,
    busy: UpDownCounter<i64>,
    tasks: Counter<u64>,
    handler: Histogram<f64>,
}

impl Instruments {
    /// The instruments, made from `m`.
    pub(crate) fn new(m: &Meter) -> Self {
        Instruments {
            slots: m
                .u64_gauge("caucus_worker_slots")
                .with_description("Slots this worker runs, by agent type")
                .build(),
            // An up-down counter: Prometheus shows it as a gauge, and
            // concurrent slots add and remove without reading it.
            busy: m
                .i64_up_down_counter("caucus_worker_slots_busy")
                .with_description("Slots of this worker running a task now, by agent type")
                .build(),
            tasks: m
                .u64_counter("caucus_worker_tasks")
                .with_description(
                    "Task attempts this worker took, by agent type and outcome \
                     (completed, failed, abandoned)",
                )
                .build(),
            handler: m
                .f64_histogram("caucus_worker_handler_seconds")
                .with_description("How long the handler ran, by agent type and handler kind")
                .with_boundaries(SECONDS_BUCKETS.to_vec())
                .build(),
        }
    }

    /// Sets `caucus_worker_slots` of `agent_type`.
    pub(crate) fn slots(&self, agent_type: &str, slots: u32) {
        self.slots.record(u64::from(slots), &[agent(agent_type)]);
    }

    /// Counts a slot of `agent_type` busy until the guard is dropped.
    pub(crate) fn busy(&'static self, agent_type: &str) -> Busy {
        let labels = [agent(agent_type)];
        self.busy.add(1, &labels);
        Busy {
            instruments: self,
            labels,
        }
    }

    /// Counts one attempt of `agent_type` ended with `outcome`.
    pub(crate) fn task_ended(&self, agent_type: &str, outcome: Outcome) {
        self.tasks.add(
            1,
            &[agent(agent_type), KeyValue::new("outcome", outcome.label())],
        );
    }

    /// Records one handler run of `took`.
    pub(crate) fn handler_ran(&self, agent_type: &str, handler: &'static str, took: Duration) {
        self.handler.record(
            took.as_secs_f64(),
            &[agent(agent_type), KeyValue::new("handler", handler)],
        );
    }
}

fn agent(agent_type: &str) -> KeyValue {
    KeyValue::new("agent_type", agent_type.to_string())
}

/// A busy slot; dropping it frees the slot in `caucus_worker_slots_busy`,
/// however the task ended (reported, cancelled, panicked).
pub(crate) struct Busy {
    instruments: &'static Instruments,
    labels: [KeyValue; 1],
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.instruments.busy.add(-1, &self.labels);
    }
}

/// The process's instruments (made on first use: after telemetry is
/// installed, since instruments of a meter taken earlier stay no-ops).
pub(crate) fn instruments() -> &'static Instruments {
    static I: OnceLock<Instruments> = OnceLock::new();
    I.get_or_init(|| Instruments::new(&meter()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use caucus_shared::config::TelemetryConfig;
    use caucus_shared::telemetry::metrics::{encode, install};

    /// Installs the process's meter provider with the Prometheus registry
    /// `encode` reads, then makes a fresh set of instruments from it (the
    /// shared ones may have been made before, from the no-op meter).
    fn installed() -> &'static Instruments {
        static I: OnceLock<Instruments> = OnceLock::new();
        I.get_or_init(|| {
            let cfg = TelemetryConfig {
                metrics_addr: Some("127.0.0.1:0".into()),
                ..TelemetryConfig::default()
            };
            // The provider must outlive the test: the global keeps a clone.
            let _provider = install(&cfg, "worker-test").unwrap();
            Instruments::new(&meter())
        })
    }

    #[test]
    fn prometheus_shows_the_worker_figures_by_their_names() {
        let i = installed();
        i.slots("m_valuation", 3);
        let one = i.busy("m_valuation");
        let two = i.busy("m_valuation");
        drop(one);
        i.task_ended("m_valuation", Outcome::Completed);
        i.task_ended("m_valuation", Outcome::Completed);
        i.task_ended("m_valuation", Outcome::Failed);
        i.task_ended("m_valuation", Outcome::Abandoned);
        i.handler_ran("m_valuation", "http", Duration::from_millis(20));
        i.handler_ran("m_valuation", "http", Duration::from_millis(700));
        let text = encode();
        let has = |line: &str| assert!(text.contains(line), "no `{line}` in\n{text}");
        has("caucus_worker_slots{agent_type=\"m_valuation\"} 3");
        has("caucus_worker_slots_busy{agent_type=\"m_valuation\"} 1");
        has("# TYPE caucus_worker_slots_busy gauge");
        has("caucus_worker_tasks_total{agent_type=\"m_valuation\",outcome=\"completed\"} 2");
        has("caucus_worker_tasks_total{agent_type=\"m_valuation\",outcome=\"failed\"} 1");
        has("caucus_worker_tasks_total{agent_type=\"m_valuation\",outcome=\"abandoned\"} 1");
        has("caucus_worker_handler_seconds_bucket{agent_type=\"m_valuation\",handler=\"http\",le=\"0.025\"} 1");
        has("caucus_worker_handler_seconds_bucket{agent_type=\"m_valuation\",handler=\"http\",le=\"1\"} 2");
        has("caucus_worker_handler_seconds_count{agent_type=\"m_valuation\",handler=\"http\"} 2");
        drop(two);
        let text = encode();
        assert!(
            text.contains("caucus_worker_slots_busy{agent_type=\"m_valuation\"} 0"),
            "{text}"
        );
    }
}
