//! Logs join traces (#12) through the trace-only spans: the worker's
//! `task` span is left out of log lines (target `caucus_trace`,
//! docs/OBSERVABILITY.md), yet a JSON line the worker logs inside it
//! carries the `trace_id` and `span_id` of that span as the OTLP receiver
//! got it, and names its task itself.

use std::time::Duration;

use fake_opentelemetry_collector::{ExportedSpan, FakeCollectorServer};
use serde_json::{json, Value};

use crate::common::{coordinator, eventually, pipeline, worker, Api};
use crate::spans_common::spans_until;
use caucus_harness::Stack;

/// An agent whose `responses` is not an array: the worker warns while it
/// runs the task (inside its `task` span) and completes it.
const ODD_ANSWER: &str = "exec:cat >/dev/null; echo '{\"responses\": \"not a list\"}'";

/// What the worker logs for that answer.
const WARNING: &str = "handler output's `responses` is not an array; ignored";

#[tokio::test(flavor = "multi_thread")]
async fn a_line_logged_in_a_task_span_carries_its_ids_and_names_its_task() {
    let stack = Stack::start();
    let mut collector = FakeCollectorServer::start().await.expect("collector");
    let endpoint = collector.endpoint();
    let otlp = [
        ("CAUCUS_TELEMETRY_OTLP_ENDPOINT", endpoint.as_str()),
        ("CAUCUS_TELEMETRY_SAMPLE_RATIO", "1.0"),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let _c = coordinator(&stack, &otlp);
    let mut worker_env = otlp.to_vec();
    worker_env.push(("CAUCUS_TELEMETRY_LOG_FORMAT", "json"));
    let w = worker(&stack, "odd", 1, ODD_ANSWER, &worker_env);
    let api = Api::connect(&stack).await;
    let p = pipeline(
        "odd",
        json!([{"name": "odd", "agent": "odd", "expected_duration": 1.0}]),
    );
    let ids = api.submit(&["AAPL"], p, 10).await;
    api.wait_completed(&ids, Duration::from_secs(30)).await;
    let task_id = format!("{}/odd", ids[0]);

    let line: Value = eventually("the worker's warning", Duration::from_secs(10), || {
        let out = w.output();
        async move {
            out.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .find(|l| l["fields"]["message"] == WARNING)
        }
    })
    .await;
    let mut spans: Vec<ExportedSpan> = Vec::new();
    let task_span = spans_until(&mut collector, &mut spans, Duration::from_secs(20), |all| {
        all.iter()
            .find(|s| {
                s.name == "task"
                    && s.attributes
                        .get("caucus.task_id")
                        .is_some_and(|v| v.contains(&task_id))
            })
            .cloned()
    })
    .await;

    assert_eq!(line["fields"]["task_id"], task_id.as_str(), "{line}");
    assert_eq!(line["trace_id"], task_span.trace_id.as_str(), "{line}");
    assert_eq!(line["span_id"], task_span.span_id.as_str(), "{line}");
    assert!(
        line.get("span").is_none(),
        "the log layer never sees the trace-only span: {line}"
    );
}
