//! The six coordination patterns over real worker processes whose agents
//! are `exec:` scripts: result counts and orders from the seed, consensus
//! early exit, a crashing agent, a missing agent, records, traces and the
//! `caucus run` CLI.

use std::time::Duration;

use crate::common::{caucus, coordinator, worker};
use caucus_harness::{Service, Stack};
use caucus_shared::nats::{api_request, ApiError};
use caucus_shared::subjects::Subjects;
use serde_json::{json, Value};

/// One script plays every agent type: it echoes what it was given, agrees
/// or disagrees for the consensus agents, and `crasher` dies in round 2.
const AGENT: &str = r#"
import json, sys
t = json.load(sys.stdin)
a = t["agent_type"]
p = t.get("params") or {}
ctx = t.get("inputs") or {}
rnd, phase, prompt = p.get("round"), p.get("phase"), p.get("prompt", "")
if a == "crasher" and rnd == 2:
    sys.stderr.write("crasher: segmentation fault in round 2\n")
    sys.exit(3)
if a.startswith("agree"):
    text = "I AGREE. The query binds its parameters so it is safe."
elif a == "dissent":
    text = "I DISAGREE: round %s shows user input concatenated into the SQL." % rnd
else:
    text = "%s %s r%s [%s] %s" % (a, phase, rnd, ",".join(sorted(ctx)), prompt[:40])
print(json.dumps({"text": text}))
"#;

const AGENTS: &str = "alpha,beta,gamma,lead,crasher,agree1,agree2,agree3,dissent";

struct Rig {
    stack: Stack,
    _coordinator: Service,
    _worker: Service,
    _dir: tempfile::TempDir,
    nats: async_nats::Client,
}

fn rig(
    coordinator_env: &[(&str, &str)],
    worker_env: &[(&str, &str)],
) -> (Stack, Service, Service, tempfile::TempDir) {
    let stack = Stack::start();
    let c = coordinator(&stack, coordinator_env);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("agent.py");
    std::fs::write(&script, AGENT).unwrap();
    let w = worker(
        &stack,
        AGENTS,
        3,
        &format!("exec:python3 {}", script.display()),
        worker_env,
    );
    (stack, c, w, dir)
}

impl Rig {
    async fn start() -> Rig {
        let (stack, c, w, dir) = rig(&[], &[]);
        let nats = async_nats::connect(stack.nats.url()).await.unwrap();
        Rig {
            stack,
            _coordinator: c,
            _worker: w,
            _dir: dir,
            nats,
        }
    }

    async fn call(&self, op: &str, body: Value) -> Result<Value, ApiError> {
        call(&self.nats, op, body).await
    }

    async fn run(&self, body: Value) -> Value {
        let v = self
            .call("run_pattern", body.clone())
            .await
            .expect("run_pattern");
        assert_eq!(v["state"], "completed", "{v}");
        v
    }
}

async fn call(nats: &async_nats::Client, op: &str, body: Value) -> Result<Value, ApiError> {
    api_request(
        nats,
        &Subjects::default(),
        "coordinator",
        op,
        &body,
        Duration::from_secs(60),
    )
    .await
}

/// `(round, phase, label, success)` of every result, in order.
fn shape(v: &Value) -> Vec<(u64, String, String, bool)> {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["round"].as_u64().unwrap(),
                r["phase"].as_str().unwrap().to_string(),
                r["label"].as_str().unwrap().to_string(),
                r["success"].as_bool().unwrap(),
            )
        })
        .collect()
}

fn rows(spec: &[(u64, &str, &str)]) -> Vec<(u64, String, String, bool)> {
    spec.iter()
        .map(|(r, p, l)| (*r, p.to_string(), l.to_string(), true))
        .collect()
}

fn output(v: &Value, i: usize) -> String {
    v["results"][i]["output"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Debate 3×3 = 9, peer review of 3 = 9, hierarchical with 3 workers = 5,
/// in the seed's orders; parallel and pipeline; records readable by id;
/// the coordinator's own event consumer acknowledges the pattern events.
#[tokio::test(flavor = "multi_thread")]
async fn the_six_patterns_give_the_seed_counts_and_orders() {
    let rig = Rig::start().await;
    let abc = ["alpha", "beta", "gamma"];

    let debate = rig
        .run(
            json!({"pattern": "debate", "agents": abc, "task": "Migrate to microservices?",
                    "params": {"rounds": 3}}),
        )
        .await;
    let want: Vec<(u64, &str, &str)> = (1..=3)
        .flat_map(|r| abc.iter().map(move |a| (r, "debate", *a)))
        .collect();
    assert_eq!(shape(&debate), rows(&want));
    assert_eq!(debate["params"]["rounds"], 3);
    assert!(output(&debate, 0).contains("[debate_round,total_rounds] Round 1/3: Migrate"));
    assert!(
        output(&debate, 4).contains("[debate_round,previous_responses,total_rounds] Round 2/3"),
        "{}",
        output(&debate, 4)
    );
    let run_id = debate["run_id"].as_str().unwrap();
    assert_eq!(debate["workflow_id"], format!("pattern-{run_id}"));
    assert_eq!(
        debate["summary"],
        json!({"results": 9, "succeeded": 9, "failed": 0})
    );
    assert_eq!(
        debate["results"][4]["task_id"],
        format!("pattern-{run_id}/2-beta-1")
    );
    let stored = rig
        .call("pattern_status", json!({ "run_id": run_id }))
        .await
        .unwrap();
    assert_eq!(stored, debate, "the record is the reply");

    let review = rig
        .run(json!({"pattern": "peer_review", "agents": abc, "task": "An LRU cache"}))
        .await;
    let mut want = Vec::new();
    for (r, p) in [(1, "work"), (2, "review"), (3, "revise")] {
        for a in abc {
            want.push((r, p, a));
        }
    }
    assert_eq!(shape(&review), rows(&want));
    assert!(output(&review, 3).contains("[phase,reviewing,work] Review the work of beta"));
    assert!(output(&review, 6)
        .contains("[feedback,feedback_from,original_work,phase] Revise your work"));

    let hier = rig
        .run(
            json!({"pattern": "hierarchical", "agents": ["alpha", "lead", "beta", "gamma"],
                    "task": "A notification system", "params": {"leader": "lead"}}),
        )
        .await;
    assert_eq!(
        shape(&hier),
        rows(&[
            (1, "plan", "lead"),
            (2, "work", "alpha"),
            (2, "work", "beta"),
            (2, "work", "gamma"),
            (3, "synthesize", "lead")
        ])
    );
    assert!(output(&hier, 1).contains("[leader,phase,plan,role]"));
    assert!(output(&hier, 4).contains("failed_workers,phase,plan,role,worker_outputs"));

    let par = rig
        .run(json!({"pattern": "parallel", "agents": ["alpha", "beta"], "task": "Brainstorm"}))
        .await;
    assert_eq!(
        shape(&par),
        rows(&[(1, "work", "alpha"), (1, "work", "beta")])
    );

    let pipe = rig
        .run(json!({"pattern": "pipeline", "agents": abc, "task": "Research then summarise"}))
        .await;
    assert_eq!(
        shape(&pipe),
        rows(&[
            (1, "work", "alpha"),
            (2, "work", "beta"),
            (3, "work", "gamma")
        ])
    );
    assert!(output(&pipe, 2).contains("[alpha_output,beta_output,pipeline_length,pipeline_step]"));
    assert_eq!(
        pipe["params"],
        json!({"pass_context": true, "stop_on_failure": false,
               "context_truncation": 500, "output_truncation": 1000})
    );

    // Specific errors for bad requests.
    let e = rig
        .call(
            "run_pattern",
            json!({"pattern": "vote", "agents": ["alpha"], "task": "t"}),
        )
        .await
        .unwrap_err();
    assert_eq!(e.code, "bad_request");
    assert!(e.message.contains("unknown pattern `vote`"), "{e:?}");
    let e = rig
        .call(
            "run_pattern",
            json!({"pattern": "debate", "agents": ["alpha"], "task": "t"}),
        )
        .await
        .unwrap_err();
    assert!(e.message.contains("at least 2 agent(s)"), "{e:?}");
    let e = rig
        .call("pattern_status", json!({"run_id": "0193-nope"}))
        .await
        .unwrap_err();
    assert_eq!(e.code, "not_found");

    // The coordinator's durable consumer saw every pattern event and acked it.
    let js = async_nats::jetstream::new(rig.nats.clone());
    let mut consumer = js
        .get_consumer_from_stream::<async_nats::jetstream::consumer::pull::Config, _, _>(
            "coordinator",
            "CAUCUS_EVENTS",
        )
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let i = consumer.info().await.unwrap();
        if i.num_pending == 0 && i.num_ack_pending == 0 && i.delivered.stream_sequence > 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not all acked: {i:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The CLI prints each round and a summary.
    let (code, out, err) = caucus(
        &rig.stack,
        &[
            "run",
            "peer_review",
            "--agents",
            "alpha,beta,gamma",
            "--task",
            "A parser",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("round 2 (review)"), "{out}");
    assert!(
        out.contains("completed: 9 result(s), 9 ok, 0 failed"),
        "{out}"
    );
}

/// All agree in round 1 → one round; a dissenter → all three rounds.
#[tokio::test(flavor = "multi_thread")]
async fn consensus_exits_early_or_runs_to_max_rounds() {
    let rig = Rig::start().await;
    let early = rig
        .run(
            json!({"pattern": "consensus", "agents": ["agree1", "agree2", "agree3"],
                    "task": "Is this SQL query safe from injection?"}),
        )
        .await;
    assert_eq!(early["rounds"].as_array().unwrap().len(), 1);
    assert_eq!(early["results"].as_array().unwrap().len(), 3);
    assert_eq!(early["consensus_reached"], true);
    assert_eq!(early["stopped"], "consensus_reached");
    let c = &early["rounds"][0]["consensus"];
    assert_eq!(
        (c["explicit"].as_f64(), c["similarity"].as_f64()),
        (Some(1.0), Some(1.0))
    );
    assert!(early["results"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["stance"] == "agree"));

    let long = rig
        .run(
            json!({"pattern": "consensus", "agents": ["agree1", "dissent", "agree2"],
                    "task": "Is this SQL query safe from injection?"}),
        )
        .await;
    assert_eq!(long["rounds"].as_array().unwrap().len(), 3);
    assert_eq!(long["results"].as_array().unwrap().len(), 9);
    assert_eq!(long["consensus_reached"], false);
    assert!(long.get("stopped").is_none(), "{long}");
    for r in long["rounds"].as_array().unwrap() {
        let c = &r["consensus"];
        assert_eq!(
            (c["agreed"].as_u64(), c["disagreed"].as_u64()),
            (Some(2), Some(1))
        );
        assert!(c["combined"].as_f64().unwrap() < 0.8, "{c}");
        assert_eq!(c["reached"], false);
    }
    assert_eq!(long["results"][1]["stance"], "disagree");
}

/// An agent whose process exits non-zero in round 2 yields a failed result
/// while the others carry on; an agent with no worker times out; the CLI
/// exits 1 when any call failed.
#[tokio::test(flavor = "multi_thread")]
async fn a_crashing_agent_fails_alone_mid_round() {
    let rig = Rig::start().await;
    let v = rig
        .run(
            json!({"pattern": "debate", "agents": ["alpha", "crasher", "beta"],
                    "task": "Buy or sell?", "params": {"rounds": 3}}),
        )
        .await;
    let ok: Vec<bool> = shape(&v).into_iter().map(|r| r.3).collect();
    assert_eq!(ok, [true, true, true, true, false, true, true, true, true]);
    let crash = &v["results"][4];
    assert_eq!(crash["label"], "crasher");
    assert_eq!(crash["round"], 2);
    assert_eq!(crash["error_type"], "exit_status");
    assert!(
        crash["error"]
            .as_str()
            .unwrap()
            .contains("segmentation fault in round 2"),
        "{crash}"
    );
    assert!(crash["worker_id"].is_string());
    assert_eq!(v["summary"]["failed"], 1);

    // No worker serves `ghost`: its call times out, alpha's does not wait for it.
    let v = rig
        .run(
            json!({"pattern": "parallel", "agents": ["alpha", "ghost"], "task": "t",
                    "call_timeout_ms": 1500}),
        )
        .await;
    assert_eq!(v["results"][0]["success"], true);
    assert_eq!(v["results"][1]["success"], false);
    assert_eq!(v["results"][1]["error_type"], "timeout");
    // The timed-out dispatch was withdrawn: nothing is left to run later.
    let js = async_nats::jetstream::new(rig.nats.clone());
    let mut stream = js.get_stream("CAUCUS_TASKS").await.unwrap();
    let mut n = u64::MAX;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        n = stream.info().await.unwrap().state.messages;
        if n == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(n, 0, "messages left in CAUCUS_TASKS");

    let (code, out, err) = caucus(
        &rig.stack,
        &[
            "run",
            "debate",
            "--agents",
            "alpha,crasher",
            "--task",
            "x",
            "--rounds",
            "2",
        ],
    );
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("FAIL crasher"), "{out}");
    assert!(
        out.contains("completed: 4 result(s), 3 ok, 1 failed"),
        "{out}"
    );
}

/// A run joins the caller's trace: `pattern_run` under the caller's span,
/// one `pattern_round` per round under it, and the workers' `consume`
/// spans under the `pattern_call` spans.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pattern_rounds_are_traced_across_processes() {
    use caucus_shared::nats::trace;
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState,
    };

    let mut collector = fake_opentelemetry_collector::FakeCollectorServer::start()
        .await
        .expect("collector");
    let endpoint = collector.endpoint();
    let otlp = [("CAUCUS_TELEMETRY_OTLP_ENDPOINT", endpoint.as_str())];
    let (stack, mut c, mut w, _dir) = rig(&otlp, &otlp);
    let nats = async_nats::connect(stack.nats.url()).await.unwrap();

    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent_id = "00f067aa0ba902b7";
    let caller = SpanContext::new(
        TraceId::from_hex(trace_id).unwrap(),
        SpanId::from_hex(parent_id).unwrap(),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    let mut headers = async_nats::HeaderMap::new();
    trace::inject_context(
        &opentelemetry::Context::new().with_remote_span_context(caller),
        &mut headers,
    );
    let body = json!({"pattern": "debate", "agents": ["alpha", "beta"], "task": "t"});
    let reply = nats
        .request_with_headers(
            Subjects::default().api("coordinator", "run_pattern"),
            headers,
            body.to_string().into(),
        )
        .await
        .unwrap();
    let reply: Value = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(
        reply["results"].as_array().map(Vec::len),
        Some(4),
        "{reply}"
    );

    // The batch exporters flush on shutdown.
    w.sigterm();
    c.sigterm();
    w.wait_exit(Duration::from_secs(20));
    c.wait_exit(Duration::from_secs(20));
    let spans = collector.exported_spans(10, Duration::from_secs(10)).await;
    let named = |n: &'static str| spans.iter().filter(move |s| s.name == n);
    let run = named("pattern_run").next().unwrap_or_else(|| {
        panic!(
            "no pattern_run among {:?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        )
    });
    assert_eq!(run.trace_id, trace_id);
    let rounds: Vec<_> = named("pattern_round").collect();
    assert_eq!(rounds.len(), 2);
    assert!(rounds
        .iter()
        .all(|r| r.parent_span_id == run.span_id && r.trace_id == trace_id));
    let calls: Vec<_> = named("pattern_call").collect();
    assert_eq!(calls.len(), 4);
    let call_ids: Vec<&String> = calls.iter().map(|s| &s.span_id).collect();
    // The worker runs each call as a task: its `task` span (issue 12).
    let consumed = named("task")
        .filter(|s| call_ids.contains(&&s.parent_span_id))
        .count();
    assert_eq!(consumed, 4, "every worker span hangs under its call");
}
