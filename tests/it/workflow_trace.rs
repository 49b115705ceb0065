//! One trace per workflow (#12), across real processes and a real OTLP
//! receiver: a stock-analysis workflow submitted with a `traceparent` is
//! one trace holding the coordinator's `submit` span (the workflow's root,
//! under the API server's `api` span, under the caller's span), a
//! `dispatch` span per task and the worker's `task` span under each, and a
//! `gate` span per gate transition carrying the `gate.*` events (opened,
//! reminded, decided). The coordinator is killed (SIGKILL) after the first
//! tasks and a new one takes over: its dispatches land in the same trace,
//! under the same root, because the root's context is stored in the
//! workflow record.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use caucus_harness::{Service, Stack};
use caucus_shared::nats::{trace, ApiError};
use caucus_shared::subjects::Subjects;
use fake_opentelemetry_collector::{ExportedSpan, FakeCollectorServer};
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use serde_json::{json, Value};

use crate::common::{call, coordinator, worker, Api};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
const AGENTS: &str = "screening,business,financial,strategy,valuation,report";
const STAGES: [&str; 6] = [
    "screening",
    "business",
    "financial",
    "strategy",
    "valuation",
    "report",
];

/// Spans received so far; the fake collector's channel holds only 64, so
/// the test drains it while it waits.
struct Spans {
    collector: FakeCollectorServer,
    all: Vec<ExportedSpan>,
}

impl Spans {
    async fn drain(&mut self) {
        let got = self.collector.exported_spans(0, Duration::ZERO).await;
        self.all.extend(got);
    }

    fn named(&self, name: &str) -> Vec<&ExportedSpan> {
        self.all.iter().filter(|s| s.name == name).collect()
    }

    fn in_trace(&self, name: &str) -> Vec<&ExportedSpan> {
        self.all
            .iter()
            .filter(|s| s.name == name && s.trace_id == TRACE_ID)
            .collect()
    }

    /// The trace as `name span <- parent` lines (for failure messages and
    /// the test's output).
    fn tree(&self) -> String {
        self.all
            .iter()
            .filter(|x| x.trace_id == TRACE_ID)
            .map(|x| {
                let what = match x.attributes.get("caucus.stage") {
                    Some(_) => attr_str(x, "caucus.stage").to_string(),
                    None => x
                        .events
                        .iter()
                        .map(|e| e.name.as_str())
                        .collect::<Vec<_>>()
                        .join(","),
                };
                let line = format!("{} {} <- {} {what}", x.name, x.span_id, x.parent_span_id);
                line.trim_end().to_string()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Exports within 100 ms of a span ending, so the spans of a process that
/// is killed later are out by then.
fn otlp(endpoint: &str) -> Vec<(&'static str, String)> {
    vec![
        ("CAUCUS_TELEMETRY_OTLP_ENDPOINT", endpoint.to_string()),
        ("CAUCUS_TELEMETRY_SAMPLE_RATIO", "1.0".to_string()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100".to_string()),
    ]
}

fn borrowed<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

fn now_nanos() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

/// An attribute's value as the fake collector renders it (wrapped in its
/// protobuf type, e.g. `Some(StringValue("x"))`).
fn attr<'a>(s: &'a ExportedSpan, key: &str) -> &'a str {
    s.attributes
        .get(key)
        .map(String::as_str)
        .unwrap_or_else(|| panic!("span {} has no {key}: {:?}", s.name, s.attributes))
}

/// A string attribute's bare value.
fn attr_str<'a>(s: &'a ExportedSpan, key: &str) -> &'a str {
    let v = attr(s, key);
    v.split('"').nth(1).unwrap_or(v)
}

/// A number attribute's value, whether exported as an integer or (as
/// tracing-opentelemetry does with unsigned fields) as a string.
fn number(s: &ExportedSpan, key: &str) -> i64 {
    let digits: String = attr(s, key).chars().filter(char::is_ascii_digit).collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("{key} of {s:?} is no number"))
}

/// `coordinator.submit` with the caller's `traceparent` in the headers
/// (retried while no coordinator leads yet, as the CLI does).
async fn submit_traced(api: &Api) -> String {
    let caller = SpanContext::new(
        TraceId::from_hex(TRACE_ID).unwrap(),
        SpanId::from_hex(CALLER_SPAN).unwrap(),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    let body = json!({"items": ["MSFT"], "pipeline": "stock-analysis"});
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut headers = async_nats::HeaderMap::new();
        trace::inject_context(
            &opentelemetry::Context::new().with_remote_span_context(caller.clone()),
            &mut headers,
        );
        let msg = api
            .nats
            .request_with_headers(
                Subjects::default().api("coordinator", "submit"),
                headers,
                serde_json::to_vec(&body).unwrap().into(),
            )
            .await
            .expect("submit request");
        let reply: Value = serde_json::from_slice(&msg.payload).unwrap();
        match ApiError::from_reply(&reply) {
            Some(e) if e.code == "standby" && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Some(e) => panic!("submit: {e:?}"),
            None => return reply["workflow_ids"][0].as_str().unwrap().to_string(),
        }
    }
}

/// Polls the workflow's status (draining spans meanwhile) until `done`
/// says yes; panics after `timeout`.
async fn until(
    api: &Api,
    spans: &mut Spans,
    wf: &str,
    what: &str,
    timeout: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let ids = vec![wf.to_string()];
    let deadline = Instant::now() + timeout;
    loop {
        spans.drain().await;
        if let Some(w) = api.status(&ids).await.pop() {
            if done(&w) {
                return w;
            }
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Drains spans until `enough` holds or `timeout` passes.
async fn collect_until(spans: &mut Spans, timeout: Duration, enough: impl Fn(&Spans) -> bool) {
    let deadline = Instant::now() + timeout;
    loop {
        spans.drain().await;
        if enough(spans) || Instant::now() > deadline {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn completed(w: &Value) -> u64 {
    w["progress"]["completed"].as_u64().unwrap_or(0)
}

/// Tasks dispatched at least once (a gate never is).
fn dispatched(w: &Value) -> usize {
    w["tasks"].as_object().map_or(0, |tasks| {
        tasks
            .values()
            .filter(|t| t["attempt"].as_u64().unwrap_or(0) >= 1)
            .count()
    })
}

fn open_review(w: &Value) -> bool {
    w["open_gates"]
        .as_array()
        .is_some_and(|g| g.iter().any(|x| x == "review"))
}

fn start(stack: &Stack, env: &[(&'static str, String)]) -> Service {
    coordinator(stack, &borrowed(env))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_workflow_is_one_trace_across_a_coordinator_restart() {
    let collector = FakeCollectorServer::start().await.expect("collector");
    let env = otlp(&collector.endpoint());
    let mut spans = Spans {
        collector,
        all: Vec::new(),
    };
    let stack = Stack::start();
    let mut c1 = start(&stack, &env);
    let _f = crate::facilitator_common::facilitator(&stack, &[]);
    // Slow tasks, so the coordinator dies with the workflow half done: the
    // kill waits for the first spans to be exported, which took longer than
    // 400 ms analysts on a loaded CI machine (the gate opened first).
    let mut w = worker(&stack, AGENTS, 2, "sleep:1500", &borrowed(&env));
    let api = Api::connect(&stack).await;

    let wf = submit_traced(&api).await;
    let minute = Duration::from_secs(60);
    until(&api, &mut spans, &wf, "a first task", minute, |w| {
        completed(w) >= 1
    })
    .await;
    // Every dispatch of the first coordinator is exported (100 ms batches)
    // before the kill: a SIGKILL loses its export queue, and the test
    // expects all six dispatches. `status` can say a task completed before
    // the pump that dispatches the next ones, so the count of dispatched
    // tasks is read again once their spans are in, until it holds still
    // (the next dispatch is then a 1.5 s task away).
    let mut wanted = 0;
    loop {
        let w = until(&api, &mut spans, &wf, "the workflow", minute, |_| true).await;
        let now = dispatched(&w);
        if now == wanted {
            break;
        }
        wanted = now;
        collect_until(&mut spans, Duration::from_secs(10), |s| {
            s.in_trace("dispatch").len() >= wanted && !s.in_trace("submit").is_empty()
        })
        .await;
        assert!(
            spans.in_trace("dispatch").len() >= wanted && !spans.in_trace("submit").is_empty(),
            "the first coordinator's {wanted} dispatch span(s) and its submit span were not exported:\n{}",
            spans.tree()
        );
    }
    // The dispatches are in the record's next write (up to
    // `persist_delay` later): killed before it, the successor would
    // dispatch them again (JetStream drops the copies, but each gets a
    // second `dispatch` span).
    crate::common::eventually_stored(&api, &wf, "the dispatches stored", minute, |r| {
        dispatched(r) >= wanted
    })
    .await;
    c1.kill();
    let killed_at = now_nanos();
    let mut reminding = env.clone();
    reminding.push(("CAUCUS_COORDINATOR_GATE_REMINDERS", "150ms".to_string()));
    let mut c2 = start(&stack, &reminding);
    let before = until(&api, &mut spans, &wf, "a new leader", minute, |_| true).await;
    assert!(
        completed(&before) < 5 && !open_review(&before),
        "the restart must land before the gate: {before}"
    );

    until(
        &api,
        &mut spans,
        &wf,
        "the review gate",
        minute,
        open_review,
    )
    .await;
    collect_until(&mut spans, minute, |s| {
        s.in_trace("gate")
            .iter()
            .any(|g| g.events.iter().any(|e| e.name == "gate.reminded"))
    })
    .await;
    call(
        &api,
        "gate_decide",
        json!({"workflow_id": wf, "action": "approve", "reviewer": "ana", "rationale": "fine"}),
    )
    .await
    .expect("approve");
    until(&api, &mut spans, &wf, "completion", minute, |w| {
        w["state"] == "completed"
    })
    .await;

    // Stopping flushes what is left in the exporters.
    c2.sigterm();
    w.sigterm();
    c2.wait_exit(Duration::from_secs(20));
    w.wait_exit(Duration::from_secs(20));
    collect_until(&mut spans, Duration::from_secs(10), |s| {
        s.in_trace("task").len() >= 6 && s.in_trace("dispatch").len() >= 6
    })
    .await;
    let tree = spans.tree();

    // The caller → api → submit chain.
    let submits = spans.in_trace("submit");
    assert_eq!(submits.len(), 1, "one submit span:\n{tree}");
    let submit = submits[0];
    let api_span = spans
        .in_trace("api")
        .into_iter()
        .find(|s| s.span_id == submit.parent_span_id)
        .unwrap_or_else(|| panic!("submit's parent is no api span:\n{tree}"));
    assert_eq!(api_span.parent_span_id, CALLER_SPAN);

    // Six dispatches, one per stage, all under the submit span: those of the
    // second coordinator too.
    let dispatches = spans.in_trace("dispatch");
    assert_eq!(dispatches.len(), 6, "{tree}");
    let mut stages = BTreeSet::new();
    for d in &dispatches {
        assert_eq!(d.parent_span_id, submit.span_id, "{d:?}");
        assert_eq!(d.kind, "SPAN_KIND_PRODUCER", "{d:?}");
        assert_eq!(attr_str(d, "caucus.workflow_id"), wf, "{d:?}");
        assert_eq!(attr_str(d, "caucus.item"), "MSFT", "{d:?}");
        let stage = attr_str(d, "caucus.stage");
        assert_eq!(attr_str(d, "caucus.agent_type"), stage, "{d:?}");
        assert_eq!(
            attr_str(d, "caucus.task_id"),
            format!("{wf}/{stage}"),
            "{d:?}"
        );
        assert!(
            attr(d, "caucus.attempt").contains("IntValue(1)"),
            "first attempt: {d:?}"
        );
        assert!(
            attr(d, "caucus.queue_wait_ms").contains("IntValue("),
            "{d:?}"
        );
        stages.insert(stage.to_string());
    }
    let expected: BTreeSet<String> = STAGES.iter().map(|s| s.to_string()).collect();
    assert_eq!(stages, expected);
    let after: Vec<_> = dispatches
        .iter()
        .filter(|d| d.start_time_unix_nano > killed_at)
        .collect();
    assert!(
        !after.is_empty() && after.len() < 6,
        "dispatches on both sides of the restart: {dispatches:?}"
    );

    // Each task span is the child of its dispatch, with its attributes.
    let by_id: BTreeMap<&str, &ExportedSpan> = dispatches
        .iter()
        .map(|d| (d.span_id.as_str(), *d))
        .collect();
    let tasks = spans.in_trace("task");
    assert_eq!(tasks.len(), 6, "{tree}");
    for t in &tasks {
        let d = by_id
            .get(t.parent_span_id.as_str())
            .unwrap_or_else(|| panic!("task span without its dispatch: {t:?}"));
        assert_eq!(t.kind, "SPAN_KIND_CONSUMER", "{t:?}");
        for k in [
            "caucus.task_id",
            "caucus.workflow_id",
            "caucus.item",
            "caucus.stage",
            "caucus.agent_type",
        ] {
            assert_eq!(attr(t, k), attr(d, k), "{k} of {t:?}");
        }
        assert_eq!(number(t, "caucus.attempt"), 1, "{t:?}");
        assert!(!attr_str(t, "caucus.worker_id").is_empty(), "{t:?}");
    }

    // The gate: opened and decided, each in a gate span under the root.
    let gates = spans.in_trace("gate");
    let mut events = BTreeMap::new();
    for g in &gates {
        for e in &g.events {
            events.insert(e.name.clone(), (*g, e));
        }
    }
    for name in ["gate.opened", "gate.reminded", "gate.decided"] {
        let (g, _) = events
            .get(name)
            .unwrap_or_else(|| panic!("no {name} event:\n{tree}\n{gates:?}"));
        assert_eq!(g.parent_span_id, submit.span_id, "{g:?}");
        assert_eq!(attr_str(g, "caucus.gate"), "review", "{g:?}");
    }
    let (_, reminded) = events["gate.reminded"];
    assert!(
        reminded.attributes["decision"].contains("\"reminder 1\""),
        "{reminded:?}"
    );
    let (_, decided) = events["gate.decided"];
    assert!(
        decided.attributes["decision"].contains("\"approve\"")
            && decided.attributes["by"].contains("\"ana\""),
        "{decided:?}"
    );
    // Nothing of this workflow started a trace of its own.
    let strays: Vec<_> = spans
        .named("dispatch")
        .into_iter()
        .chain(spans.named("task"))
        .filter(|s| s.trace_id != TRACE_ID)
        .collect();
    assert!(strays.is_empty(), "spans outside the trace: {strays:?}");
    eprintln!("trace {TRACE_ID}:\n{tree}");
}

/// A workflow whose record holds no root (created while spans were off:
/// `telemetry.trace_level = off`) gets a `workflow`
/// root at its first traced dispatch, stored with the record: after the
/// next coordinator restart its dispatches and gate are still under it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_without_a_root_gets_one_at_dispatch_and_keeps_it() {
    let collector = FakeCollectorServer::start().await.expect("collector");
    let env = otlp(&collector.endpoint());
    let mut spans = Spans {
        collector,
        all: Vec::new(),
    };
    let stack = Stack::start();
    let mut quiet = env.clone();
    quiet.push(("CAUCUS_TELEMETRY_TRACE_LEVEL", "off".to_string()));
    let mut c1 = start(&stack, &quiet);
    let _f = crate::facilitator_common::facilitator(&stack, &[]);
    let mut w = worker(&stack, AGENTS, 2, "sleep:400", &borrowed(&env));
    let api = Api::connect(&stack).await;
    let wf = call(
        &api,
        "submit",
        json!({"items": ["MSFT"], "pipeline": "stock-analysis"}),
    )
    .await
    .expect("submit")["workflow_ids"][0]
        .as_str()
        .unwrap()
        .to_string();
    let minute = Duration::from_secs(60);
    until(&api, &mut spans, &wf, "screening", minute, |w| {
        completed(w) >= 1
    })
    .await;
    c1.kill();

    // The second coordinator traces: its first dispatch makes the root.
    let mut c2 = start(&stack, &env);
    collect_until(&mut spans, minute, |s| !s.named("dispatch").is_empty()).await;
    // The root goes into the record's next write (up to `persist_delay`
    // after the dispatch, which may be exported first): the SIGKILL must
    // come after that write, or the third coordinator rightly makes a
    // root of its own.
    crate::common::eventually_stored(&api, &wf, "the root stored with the record", minute, |r| {
        r["trace_parent"].is_string()
    })
    .await;
    c2.kill();
    let c2_killed_at = now_nanos();
    let mut c3 = start(&stack, &env);
    until(
        &api,
        &mut spans,
        &wf,
        "the review gate",
        minute,
        open_review,
    )
    .await;
    call(
        &api,
        "gate_decide",
        json!({"workflow_id": wf, "action": "approve", "reviewer": "ana", "rationale": "fine"}),
    )
    .await
    .expect("approve");
    until(&api, &mut spans, &wf, "completion", minute, |w| {
        w["state"] == "completed"
    })
    .await;
    c3.sigterm();
    w.sigterm();
    c3.wait_exit(Duration::from_secs(20));
    w.wait_exit(Duration::from_secs(20));
    collect_until(&mut spans, Duration::from_secs(10), |s| {
        s.named("dispatch")
            .iter()
            .any(|d| attr_str(d, "caucus.stage") == "report")
    })
    .await;

    let roots = spans.named("workflow");
    assert_eq!(roots.len(), 1, "one root, made once: {roots:?}");
    let root = roots[0];
    assert_eq!(root.parent_span_id, "", "{root:?}");
    assert_eq!(attr_str(root, "caucus.workflow_id"), wf);
    assert!(spans.named("submit").is_empty(), "spans were off at submit");
    let dispatches = spans.named("dispatch");
    let stages: BTreeSet<&str> = dispatches
        .iter()
        .map(|d| attr_str(d, "caucus.stage"))
        .collect();
    // Only the report is certain to be dispatched after the second
    // coordinator's kill (its gate is decided after that): what the killed
    // one dispatched later than its first exported span (the valuation,
    // when the analysts were quick) died in its export queue.
    assert!(stages.contains("report"), "{stages:?}");
    for d in &dispatches {
        assert_eq!(d.trace_id, root.trace_id, "{d:?}");
        assert_eq!(d.parent_span_id, root.span_id, "{d:?}");
    }
    assert!(
        dispatches
            .iter()
            .any(|d| d.start_time_unix_nano < c2_killed_at)
            && dispatches
                .iter()
                .any(|d| d.start_time_unix_nano > c2_killed_at),
        "dispatches by the coordinator that made the root and by the next: {dispatches:?}"
    );
    let decided = spans
        .named("gate")
        .into_iter()
        .find(|g| g.events.iter().any(|e| e.name == "gate.decided"))
        .expect("a gate.decided event");
    assert_eq!(decided.trace_id, root.trace_id);
    assert_eq!(decided.parent_span_id, root.span_id);
}
