//! Process-level checks of the four binaries against real servers: ready,
//! `health`, clean SIGTERM drain, one clear line when NATS or Redis cannot
//! be reached, and `--dump-config`.
//!
//! The harness builds the binaries first (`cargo build --workspace --bins`)
//! unless `$CAUCUS_BIN_DIR` names a directory of built ones.

use std::time::Duration;

use caucus_harness::{free_port, ServiceBuilder, Stack};
use caucus_shared::nats::{self, api_request};
use caucus_shared::subjects::Subjects;
use caucus_shared::Config;
use serde_json::json;

/// (binary, service name in API subjects, extra arguments)
const BINARIES: [(&str, &str, &[&str]); 4] = [
    ("caucus-coordinator", "coordinator", &[]),
    (
        "caucus-worker",
        "worker",
        &["--agent", "valuation,report", "--slots", "2"],
    ),
    ("caucus-facilitator", "facilitator", &[]),
    ("caucus-correlator", "correlator", &[]),
];

const EXIT: Duration = Duration::from_secs(15);

fn spec(bin: &str) -> (&'static str, &'static str, &'static [&'static str]) {
    BINARIES
        .into_iter()
        .find(|(b, _, _)| *b == bin)
        .unwrap_or_else(|| panic!("unknown binary {bin}"))
}

async fn ready_answers_health_and_drains_on_sigterm(bin: &str) -> anyhow::Result<()> {
    let (bin, service, args) = spec(bin);
    let stack = Stack::start();
    // What the coordinator would create (a worker's consumers included).
    let types: Vec<&str> = args
        .windows(2)
        .filter(|w| w[0] == "--agent")
        .flat_map(|w| w[1].split(','))
        .collect();
    crate::topology_admin::init(&stack, &types, &[]);
    let mut svc = stack.service(bin).args(args.iter().copied()).start();
    let out = svc.output();
    let ready = out
        .lines()
        .find(|l| l.contains("service ready"))
        .unwrap_or_default();
    assert!(ready.contains(&format!("service={service} ")), "{ready}");
    assert!(ready.contains(&stack.nats.url()), "{ready}");
    assert!(ready.contains(&stack.redis.url()), "{ready}");
    assert_eq!(out.matches("service ready").count(), 1, "{out}");

    let mut cfg = Config::default();
    cfg.nats.url = stack.nats.url();
    let client = nats::connect(&cfg.nats, "binaries-test").await?;
    let health = api_request(
        &client,
        &Subjects::default(),
        service,
        "health",
        &json!({}),
        Duration::from_secs(5),
    )
    .await?;
    assert_eq!(health["service"], service, "{health}");
    assert_eq!(health["status"], "ok", "{health}");
    let id = health["instance_id"].as_str().unwrap_or_default();
    assert!(id.starts_with(&format!("{service}-")), "{health}");
    assert!(
        ready.contains(id),
        "readiness line names the instance: {ready}"
    );

    svc.sigterm();
    let status = svc.wait_exit(EXIT);
    assert_eq!(status.code(), Some(0), "output:\n{}", svc.output());
    assert!(svc.output().contains("drained"), "{}", svc.output());
    Ok(())
}

/// The one line a binary prints for a fatal error: starts with `<bin>:`.
fn fatal_lines(bin: &str, output: &str) -> Vec<String> {
    output
        .lines()
        .filter(|l| l.starts_with(&format!("{bin}:")))
        .map(str::to_string)
        .collect()
}

fn fails_clearly_when_nats_is_unreachable(bin: &str) {
    let (bin, _, args) = spec(bin);
    let url = format!("nats://127.0.0.1:{}", free_port());
    let mut svc = ServiceBuilder::new(bin)
        .args(args.iter().copied())
        .env("CAUCUS_NATS_URL", &url)
        .env("CAUCUS_NATS_CONNECT_ATTEMPTS", "2")
        .env("CAUCUS_NATS_CONNECT_BACKOFF_MAX", "50ms")
        .env(
            "CAUCUS_REDIS_URL",
            format!("redis://127.0.0.1:{}", free_port()),
        )
        .spawn();
    let status = svc.wait_exit(EXIT);
    let out = svc.output();
    assert_ne!(status.code(), Some(0), "{out}");
    let lines = fatal_lines(bin, &out);
    assert_eq!(lines.len(), 1, "{out}");
    assert!(
        lines[0].contains(&format!("could not reach NATS at {url} after 2 attempts")),
        "{out}"
    );
    assert!(!out.contains("service ready"), "{out}");
}

fn fails_clearly_when_redis_is_unreachable(bin: &str) {
    let (bin, _, args) = spec(bin);
    let stack = Stack::start();
    let url = format!("redis://:hunter2@127.0.0.1:{}", free_port());
    let mut svc = stack
        .service(bin)
        .args(args.iter().copied())
        .env("CAUCUS_REDIS_URL", &url)
        .env("CAUCUS_REDIS_CONNECT_ATTEMPTS", "2")
        .env("CAUCUS_REDIS_CONNECT_BACKOFF_MAX", "50ms")
        .spawn();
    let status = svc.wait_exit(EXIT);
    let out = svc.output();
    assert_ne!(status.code(), Some(0), "{out}");
    let lines = fatal_lines(bin, &out);
    assert_eq!(lines.len(), 1, "{out}");
    assert!(
        lines[0].contains("could not reach Redis at redis://:***@127.0.0.1:"),
        "{out}"
    );
    assert!(!out.contains("hunter2"), "the password leaked:\n{out}");
}

fn dump_config_prints_the_effective_toml(bin: &str) {
    let (bin, _, args) = spec(bin);
    let mut svc = ServiceBuilder::new(bin)
        .args(args.iter().copied())
        .arg("--dump-config")
        .env("CAUCUS_NATS_URL", "nats://dump-test.invalid:4321")
        .env("CAUCUS_WORKER_LEASE_TTL", "7s")
        .spawn();
    let status = svc.wait_exit(EXIT);
    let out = svc.output();
    assert_eq!(status.code(), Some(0), "{out}");
    let parsed: toml::Value = toml::from_str(&out)
        .map_err(|e| format!("{e}\n{out}"))
        .unwrap();
    assert_eq!(
        parsed["nats"]["url"].as_str(),
        Some("nats://dump-test.invalid:4321"),
        "{out}"
    );
    assert_eq!(parsed["worker"]["lease_ttl"].as_str(), Some("7s"), "{out}");
    if bin == "caucus-worker" {
        let agents: Vec<&str> = parsed["worker"]["agents"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        assert_eq!(agents, vec!["valuation", "report"], "{out}");
        assert_eq!(parsed["worker"]["slots"].as_integer(), Some(2), "{out}");
    }
}

macro_rules! binary_tests {
    ($($module:ident => $bin:literal),* $(,)?) => {$(
        mod $module {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn ready_answers_health_and_drains_on_sigterm() -> anyhow::Result<()> {
                super::ready_answers_health_and_drains_on_sigterm($bin).await
            }

            #[test]
            fn fails_clearly_when_nats_is_unreachable() {
                super::fails_clearly_when_nats_is_unreachable($bin)
            }

            #[test]
            fn fails_clearly_when_redis_is_unreachable() {
                super::fails_clearly_when_redis_is_unreachable($bin)
            }

            #[test]
            fn dump_config_prints_the_effective_toml() {
                super::dump_config_prints_the_effective_toml($bin)
            }
        }
    )*};
}

binary_tests! {
    coordinator => "caucus-coordinator",
    worker => "caucus-worker",
    facilitator => "caucus-facilitator",
    correlator => "caucus-correlator",
}

/// Across processes: a request carrying a `traceparent` makes the worker
/// export (over OTLP gRPC) an `api` span that is a child of the caller's span.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_span_is_exported_as_a_child_of_the_callers_span() -> anyhow::Result<()> {
    use caucus_shared::nats::trace;
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };

    let mut collector = fake_opentelemetry_collector::FakeCollectorServer::start()
        .await
        .map_err(|e| anyhow::anyhow!("collector: {e}"))?;
    let stack = Stack::start();
    crate::topology_admin::init(&stack, &["valuation"], &[]);
    let mut svc = stack
        .service("caucus-worker")
        .args(["--agent", "valuation"])
        .env("CAUCUS_TELEMETRY_OTLP_ENDPOINT", collector.endpoint())
        .start();

    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent_id = "00f067aa0ba902b7";
    let caller = SpanContext::new(
        TraceId::from_hex(trace_id)?,
        SpanId::from_hex(parent_id)?,
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    let mut headers = async_nats::HeaderMap::new();
    trace::inject_context(
        &opentelemetry::Context::new().with_remote_span_context(caller),
        &mut headers,
    );
    let mut cfg = Config::default();
    cfg.nats.url = stack.nats.url();
    let client = nats::connect(&cfg.nats, "trace-export-test").await?;
    let reply = client
        .request_with_headers(
            Subjects::default().api("worker", "health"),
            headers,
            "{}".into(),
        )
        .await?;
    let reply: serde_json::Value = serde_json::from_slice(&reply.payload)?;
    assert_eq!(reply["status"], "ok", "{reply}");

    // The batch exporter flushes on shutdown.
    svc.sigterm();
    assert_eq!(svc.wait_exit(EXIT).code(), Some(0), "{}", svc.output());
    let spans = collector.exported_spans(1, Duration::from_secs(10)).await;
    let api = spans
        .iter()
        .find(|s| s.name == "api")
        .unwrap_or_else(|| panic!("no `api` span among {spans:?}"));
    assert_eq!(api.trace_id, trace_id);
    assert_eq!(api.parent_span_id, parent_id);
    // The fake collector renders attribute values with their protobuf wrapper.
    let operation = api.attributes.get("operation").cloned().unwrap_or_default();
    assert!(operation.contains("\"health\""), "{operation}");
    Ok(())
}
