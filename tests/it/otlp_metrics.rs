//! With an OTLP endpoint set, the metrics `/metrics` shows also go out
//! over OTLP (issue 12 item 2): a coordinator and a worker push to a real
//! OTLP gRPC receiver and the receiver sees the instruments by name.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use caucus_harness::Stack;
use fake_opentelemetry_collector::FakeCollectorServer;
use serde_json::json;

use crate::common::{coordinator, worker, Api};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn metrics_are_pushed_over_otlp() {
    let mut collector = FakeCollectorServer::start().await.expect("collector");
    let endpoint = collector.endpoint();
    let env = [
        ("CAUCUS_TELEMETRY_OTLP_ENDPOINT", endpoint.as_str()),
        ("CAUCUS_TELEMETRY_METRICS_EXPORT_INTERVAL", "300ms"),
    ];
    let stack = Stack::start();
    let _c = coordinator(&stack, &env);
    let _w = worker(
        &stack,
        "screening,business,financial,strategy,valuation,report",
        2,
        "noop",
        &env,
    );
    let api = Api::connect(&stack).await;
    let ids = api.submit(&["AAPL"], json!("stock-analysis"), 50).await;
    api.wait_completed(&ids, Duration::from_secs(60)).await;

    let wanted = [
        "caucus_tasks_dispatched",
        "caucus_tasks_completed",
        "caucus_worker_tasks",
        "caucus_worker_handler_seconds",
    ];
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline && !wanted.iter().all(|w| seen.contains(*w)) {
        for batch in collector
            .exported_metrics(1, Duration::from_millis(500))
            .await
        {
            for m in batch.metrics {
                seen.insert(m.name);
            }
        }
    }
    for w in wanted {
        assert!(seen.contains(w), "{w} not pushed over OTLP; saw {seen:?}");
    }
}
