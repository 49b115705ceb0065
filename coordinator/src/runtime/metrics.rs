//! The coordinator's metrics (docs/OBSERVABILITY.md lists them all).
//! Instruments are made once, from the process's meter; recording into
//! them is a no-op when metrics are off.

use std::sync::OnceLock;

use opentelemetry::metrics::Counter;
use opentelemetry::KeyValue;

use caucus_shared::task::TaskDispatch;
use caucus_shared::telemetry::metrics::meter;

struct Instruments {
    dispatched: Counter<u64>,
}

fn instruments() -> &'static Instruments {
    static I: OnceLock<Instruments> = OnceLock::new();
    I.get_or_init(|| {
        let m = meter();
        Instruments {
            dispatched: m
                .u64_counter("caucus_tasks_dispatched")
                .with_description("Task attempts published to a work queue, by agent type")
                .build(),
        }
    })
}

/// Counts a pump's dispatches (`caucus_tasks_dispatched_total`).
pub(crate) fn dispatched(dispatches: &[TaskDispatch]) {
    let i = instruments();
    for d in dispatches {
        i.dispatched
            .add(1, &[KeyValue::new("agent_type", d.agent_type.clone())]);
    }
}
