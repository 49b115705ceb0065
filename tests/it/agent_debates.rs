//! Built-in agents in real debates: a stock-analysis run over the bundled
//! data opens the margin debate for the tickers whose financial and
//! strategy margins disagree, the facilitator's flush requests are answered
//! by the worker processes, the challenged agent acknowledges and gives its
//! evidence, the challenger gives its verdict by the documented rule, and
//! every resolution record holds the seed's documentation requirements.

use std::time::Duration;

use crate::common::*;
use caucus_harness::Stack;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

/// The built-in stock-analysis pipeline's shape (inline, without gates).
fn stock_pipeline() -> Value {
    pipeline(
        "stock-debates",
        json!([
            {"name": "screening", "agent": "screening", "expected_duration": 2.0},
            {"name": "business", "agent": "business", "expected_duration": 2.0, "depends_on": ["screening"]},
            {"name": "financial", "agent": "financial", "expected_duration": 2.0, "depends_on": ["business"]},
            {"name": "strategy", "agent": "strategy", "expected_duration": 2.0, "depends_on": ["screening"]},
            {"name": "valuation", "agent": "valuation", "expected_duration": 1.0, "depends_on": ["financial", "strategy"],
             "params": {"impact": {"kind": "valuation", "output_metric": "target_price", "result": "/target_price",
                                   "inputs": ["operating_margin"], "used": "/operating_margin_used"}}},
            {"name": "report", "agent": "report", "expected_duration": 1.0, "depends_on": ["valuation"]}
        ]),
    )
}

fn facilitator(stack: &Stack) -> caucus_harness::Service {
    // Its buckets and consumers come from the coordinator or `caucus init`.
    crate::topology_admin::init(stack, &[], &[]);
    let mut b = stack.service("caucus-facilitator");
    for (k, v) in [
        ("CAUCUS_FACILITATOR_ACK_TIMEOUT", "10s"),
        ("CAUCUS_FACILITATOR_EVIDENCE_TIMEOUT", "20s"),
        ("CAUCUS_FACILITATOR_VERDICT_GRACE", "10s"),
        ("CAUCUS_FACILITATOR_MEDIATION_TIMEOUT", "2s"),
        ("CAUCUS_FACILITATOR_HUMAN_TIMEOUT", "2s"),
        ("CAUCUS_FACILITATOR_EXPERT_SLOT_TTL", "30s"),
        ("CAUCUS_FACILITATOR_FLUSH_TIMEOUT", "2s"),
        ("CAUCUS_FACILITATOR_TIMER_TICK", "50ms"),
        ("CAUCUS_FACILITATOR_EXPERTS", "expert"),
        ("CAUCUS_SHUTDOWN_GRACE", "5s"),
        ("CAUCUS_NATS_STREAM_MAX_BYTES", "67108864"),
    ] {
        b = b.env(k, v);
    }
    b.start()
}

async fn debate(api: &Api, id: &str) -> Option<Value> {
    api.call("facilitator", "debate", json!({ "debate_id": id }))
        .await
        .ok()
}

async fn wait_debate(api: &Api, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    eventually(what, WAIT, || async {
        debate(api, id).await.filter(|d| pred(d))
    })
    .await
}

/// The seed's documentation requirements for every resolution, plus the
/// provisional ones when `provisional`.
fn assert_documented(r: &Value, provisional: bool) {
    for field in [
        "final_position",
        "level",
        "method",
        "rationale",
        "impact",
        "snapshot_id",
    ] {
        assert!(
            !r[field].is_null() && r[field] != "",
            "resolution lacks {field}: {r}"
        );
    }
    assert!(
        !r["evidence_considered"].as_array().unwrap().is_empty(),
        "no evidence considered: {r}"
    );
    let c = r["confidence"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&c), "{r}");
    let window = r["override_window"]["status"].as_str().unwrap();
    if provisional {
        assert_eq!(window, "open", "{r}");
        let p = &r["provisional_details"];
        assert!(
            p["conservative_rationale"]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{r}"
        );
        assert!(!p["alternatives"].as_array().unwrap().is_empty(), "{r}");
        assert!(p["review_deadline"].as_str().is_some(), "{r}");
        assert_eq!(
            p["downstream_dependencies"],
            json!(["valuation", "report"]),
            "{r}"
        );
    } else {
        assert!(matches!(window, "not_applicable" | "closed"), "{r}");
    }
}

fn stage_output<'a>(w: &'a Value, stage: &str) -> &'a Value {
    &w["tasks"][stage]["output"]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn built_in_agents_debate_the_margin_of_disagreeing_tickers_only() {
    let stack = Stack::start();
    let _f = facilitator(&stack);
    let _c = coordinator(&stack, &[]);
    let _w = worker(
        &stack,
        "screening,business,financial,strategy,valuation,report",
        2,
        "builtin",
        &[],
    );
    let api = Api::connect(&stack).await;
    // NVDA: the margin trend fades (accepted at level 1); AMZN: it holds
    // (rejected → level 2 → person → provisional); AAPL: no disagreement;
    // TSLA: accepted, but valuation had used strategy's lower margin.
    let ids = api
        .submit(&["NVDA", "AMZN", "AAPL", "TSLA"], stock_pipeline(), 10)
        .await;
    let wfs = api.wait_completed(&ids, WAIT).await;
    let by_item = |t: &str| wfs.iter().find(|w| w["item"] == t).unwrap().clone();
    let (nvda, amzn, aapl) = (by_item("NVDA"), by_item("AMZN"), by_item("AAPL"));
    let tsla = by_item("TSLA");

    // Valuation never waited: it used the lower margin, provisionally, and
    // names the debate.
    for w in [&nvda, &amzn] {
        let v = stage_output(w, "valuation");
        let id = format!("margin-{}", w["workflow_id"].as_str().unwrap());
        assert_eq!(v["provisional"], true, "{v}");
        assert_eq!(v["debate_ids"], json!([id]));
        let d = &v["margin_debate"];
        let lower = d["financial_operating_margin"]
            .as_f64()
            .unwrap()
            .min(d["strategy_operating_margin"].as_f64().unwrap());
        assert_eq!(v["operating_margin_used"].as_f64().unwrap(), lower);
    }
    let v = stage_output(&aapl, "valuation");
    assert_eq!(v["provisional"], false);
    assert_eq!(v["debate_ids"], json!([]));
    let none = api
        .call(
            "facilitator",
            "debates",
            json!({"workflow_id": aapl["workflow_id"]}),
        )
        .await
        .unwrap();
    assert_eq!(none["debates"], json!([]), "AAPL must not debate");

    // NVDA: flushed by both worker processes' agents, acknowledged,
    // evidenced and accepted at level 1.
    let nvda_id = format!("margin-{}", nvda["workflow_id"].as_str().unwrap());
    let d = wait_debate(&api, &nvda_id, "NVDA's debate to resolve", |d| {
        d["state"] == "resolved"
    })
    .await;
    assert_eq!(
        d["snapshot"]["unresponsive"],
        json!([]),
        "{}",
        d["snapshot"]
    );
    let mut flushed: Vec<&str> = d["snapshot"]["flushed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    flushed.sort();
    assert_eq!(flushed, ["financial", "strategy"]);
    assert_eq!(d["challenge"]["challenger"], "strategy");
    assert_eq!(d["challenge"]["challenged"], "financial");
    assert_eq!(d["challenge"]["priority"], "valuation");
    let ev = &d["evidence"][0];
    assert_eq!(ev["from"], "financial", "{}", d["evidence"]);
    assert!(ev["evidence"].as_array().unwrap().len() >= 6, "{ev}");
    let r = &d["resolution"];
    assert_eq!(r["level"], 1, "{r}");
    assert_eq!(r["method"], "agent_direct");
    assert_eq!(r["final_position"]["metric"], "operating_margin");
    assert_documented(r, false);
    let snapshot = d["snapshot"]["snapshot_id"].as_str().unwrap();
    let acks = stream_messages(
        &api.nats,
        "CAUCUS_DEBATES",
        &api.subjects.debates(&nvda_id, "ack"),
    )
    .await;
    assert_eq!(acks.len(), 1, "one acknowledgement");
    assert_eq!(acks[0].body["from_agent"], "financial");
    assert_eq!(acks[0].body["content"]["snapshot_id"], snapshot);
    let verdicts = stream_messages(
        &api.nats,
        "CAUCUS_DEBATES",
        &api.subjects.debates(&nvda_id, "verdict"),
    )
    .await;
    assert_eq!(verdicts.len(), 1);
    assert_eq!(verdicts[0].body["from_agent"], "strategy");
    assert_eq!(verdicts[0].body["content"]["accepted"], true);
    assert!(verdicts[0].body["content"]["reason"]
        .as_str()
        .unwrap()
        .contains("fading"));

    // TSLA: the binding level-1 resolution (financial's margin) differs from
    // the conservative one valuation used, so the coordinator re-runs it
    // with the settled margin, and no second debate opens.
    let tsla_ids = vec![tsla["workflow_id"].as_str().unwrap().to_string()];
    // The re-run may be over already: read the first valuation from its
    // completion event.
    let task_id = format!("{}/valuation", tsla_ids[0]);
    let first = task_events(&api.nats)
        .await
        .into_iter()
        .find(|e| {
            e["task_id"] == task_id.as_str() && e["status"] == "completed" && e["attempt"] == 1
        })
        .expect("TSLA's first valuation")["output"]
        .clone();
    let d = &first["margin_debate"];
    assert!(
        d["strategy_operating_margin"].as_f64() < d["financial_operating_margin"].as_f64(),
        "{d}"
    );
    let settled = d["financial_operating_margin"].as_f64().unwrap();
    let rerun = eventually(
        "TSLA's valuation to re-run with the settled margin",
        WAIT,
        || async {
            let w = api.status(&tsla_ids).await.pop()?;
            let v = stage_output(&w, "valuation");
            (w["state"] == "completed"
                && v["assumptions"]["operating_margin_source"] == "resolved_assumptions")
                .then(|| v.clone())
        },
    )
    .await;
    assert!((rerun["operating_margin_used"].as_f64().unwrap() - settled).abs() < 1e-6);
    assert_eq!(rerun["provisional"], false);
    assert_eq!(rerun["debate_ids"], json!([]));

    // AMZN: rejected by the rule, no track records for level 2, the person
    // does not answer in time: the conservative default (the lower margin,
    // financial's) applies provisionally.
    let amzn_id = format!("margin-{}", amzn["workflow_id"].as_str().unwrap());
    let d = wait_debate(&api, &amzn_id, "AMZN's debate to go provisional", |d| {
        d["state"] == "provisional"
    })
    .await;
    assert_eq!(d["snapshot"]["unresponsive"], json!([]));
    let verdicts = stream_messages(
        &api.nats,
        "CAUCUS_DEBATES",
        &api.subjects.debates(&amzn_id, "verdict"),
    )
    .await;
    assert_eq!(verdicts[0].body["content"]["accepted"], false);
    let r = &d["resolution"];
    assert_eq!(r["level"], 4, "{r}");
    assert_eq!(r["method"], "conservative_default");
    assert_eq!(r["winner"], "financial", "{r}");
    assert_documented(r, true);
    // The provisional decision is listed for the next gate.
    let p = api
        .call(
            "facilitator",
            "provisional",
            json!({"workflow_id": amzn["workflow_id"]}),
        )
        .await
        .unwrap();
    assert_eq!(p["count"], 1);
    // A gate confirms it: final, still documented.
    let g = api
        .call(
            "facilitator",
            "gate_review",
            json!({"debate_id": amzn_id, "action": "confirm", "reviewer": "alice"}),
        )
        .await
        .unwrap();
    assert_eq!(g["resolution"]["method"], "gate_confirm");
    assert_documented(&g["resolution"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_valuation_opens_one_debate_and_bad_messages_go_to_the_dlq() {
    let stack = Stack::start();
    let _f = facilitator(&stack);
    let w = worker(&stack, "financial,strategy", 1, "builtin", &[]);
    // An outside agent behind an exec handler answers its debates itself:
    // its worker does not read `caucus.msg.<agent>` (the coordinator or
    // `caucus init` makes the inbox consumer of every type all the same).
    let outside = worker(&stack, "outside", 1, "exec:cat", &[]);
    for s in [&w, &outside] {
        s.wait_for_output("registered", WAIT);
    }
    let api = Api::connect(&stack).await;
    let js = async_nats::jetstream::new(api.nats.clone());
    let stream = js.get_stream("CAUCUS_MESSAGES").await.unwrap();
    assert!(stream.consumer_info("agents-financial").await.is_ok());
    // The same challenge twice (what a re-run valuation task publishes):
    // one debate, opened once.
    let challenge = json!({
        "message_type": "challenge", "from_agent": "valuation", "to_agent": "facilitator",
        "content": {
            "challenge_id": "margin-wf-x", "debate_id": "margin-wf-x",
            "challenger": "strategy", "challenged": "financial",
            "disputed_finding": "INTC operating margin assumption 19.5% (trailing 3-yr average)",
            "challenge_basis": "trend", "escalation_timer": 3600, "priority": "valuation",
            "item": "INTC", "workflow_id": "wf-x",
            "challenger_position": {"statement": "12.3%", "metric": "operating_margin", "value": 0.1225},
            "challenged_position": {"statement": "19.5%", "metric": "operating_margin", "value": 0.1953}
        }
    });
    for _ in 0..2 {
        publish_envelope(
            &api,
            &api.subjects.debates("margin-wf-x", "challenge"),
            challenge.clone(),
        )
        .await;
    }
    // INTC's decline accelerates: strategy rejects financial's average.
    let d = wait_debate(&api, "margin-wf-x", "the verdict", |d| {
        d["level"].as_u64().unwrap_or(0) >= 2
    })
    .await;
    assert_eq!(d["snapshot"]["unresponsive"], json!([]));
    let acks = stream_messages(
        &api.nats,
        "CAUCUS_DEBATES",
        &api.subjects.debates("margin-wf-x", "ack"),
    )
    .await;
    assert_eq!(acks.len(), 1, "the challenge was handed out once");

    // Malformed bodies and challenges not handed out by the facilitator
    // are dead-lettered with the reason; the agent keeps answering. (Other
    // requests are the coordinator's: it turns them into work.)
    js.publish(api.subjects.msg("financial"), "{not json".into())
        .await
        .unwrap()
        .await
        .unwrap();
    publish_envelope(
        &api,
        &api.subjects.msg("strategy"),
        json!({"message_type": "challenge", "from_agent": "x", "content": {
            "challenge_id": "raw", "challenger": "x", "challenged": "strategy",
            "disputed_finding": "f", "challenge_basis": "b", "escalation_timer": 60, "priority": "supporting"}}),
    )
    .await;
    let dead = eventually("two dead letters", WAIT, || async {
        let d = stream_messages(&api.nats, "CAUCUS_DLQ", "caucus.dlq.caucus.msg.>").await;
        (d.len() >= 2).then_some(d)
    })
    .await;
    let codes: Vec<&str> = dead.iter().filter_map(|d| d.dlq_code.as_deref()).collect();
    for c in ["malformed_json", "not_from_facilitator"] {
        assert!(codes.contains(&c), "{c} missing from {codes:?}");
    }
}
