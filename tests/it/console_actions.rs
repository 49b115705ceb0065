//! The console's actions over HTTP against a real stack (issue 13): a
//! coordinator, a facilitator or a correlator, workers and a
//! `caucus-console` process on a free loopback port, driven by plain HTTP
//! requests (no browser).
//!
//! - gates and debates: the expert queue and a level-3 debate on
//!   `/debates`, a person's "I cannot decide" making it a provisional
//!   decision, the gate's decision package with it on `/gates/<id>`,
//!   approval refused while it is unreviewed, the override's downstream
//!   impact step committing nothing, the confirmation, then approval with
//!   a rationale completing the workflow with the decision recorded; bad
//!   input: a rationale over the limit (400 naming it), unknown workflow
//!   and debate ids (404 naming them), a missing CSRF token (403), a
//!   decision that is not one (400);
//! - alerts and batches: a correlated quota failure's alert cards and
//!   root cause on `/alerts`, "Resume all" from the page finishing the
//!   paused workflows, and a batch paused and resumed from the page.

use std::time::Duration;

use caucus_harness::{free_port, Service, Stack};
use serde_json::{json, Value};

use crate::common::{
    call, coordinator, eventually, one_correlation, quota_handler, wait_state, worker, Api,
};

/// The HTTP client, shared with the other console tests (`crate::console_actions::http`).
pub(crate) mod http;

use http::Http;

/// The largest rationale the tests' console accepts.
const MAX_RATIONALE: usize = 200;

/// Starts `caucus-console` on a free loopback port (no login: loopback
/// only) and returns it with a client.
async fn console(stack: &Stack) -> (Service, Http) {
    let listen = format!("127.0.0.1:{}", free_port());
    let svc = stack
        .service("caucus-console")
        .env("CAUCUS_CONSOLE_LISTEN", &listen)
        .env(
            "CAUCUS_CONSOLE_MAX_RATIONALE_BYTES",
            MAX_RATIONALE.to_string(),
        )
        .env("CAUCUS_TELEMETRY_LOG_LEVEL", "info")
        .spawn();
    let http = Http::connect(&listen).await;
    (svc, http)
}

/// An exec agent answering `params.output`.
const AGENT: &str = r#"
import json, sys
t = json.load(sys.stdin)
print(json.dumps((t.get("params") or {}).get("output") or {}))
"#;

/// An analysis, a valuation using its operating margin (described by its
/// `params.impact`, so an override's impact is estimated on its target
/// price), a review gate, a report.
fn valued_pipeline() -> Value {
    let mut p = gated_pipeline();
    p["name"] = json!("console-valued");
    p["stages"][1]["depends_on"] = json!(["dcf_valuation"]);
    p["stages"].as_array_mut().unwrap().insert(
        1,
        json!({"name": "dcf_valuation", "agent": "analyst", "depends_on": ["financial"],
               "params": {"output": {"target_price": 85.0},
                          "impact": {"kind": "valuation", "output_metric": "target_price",
                                     "result": "/target_price", "rerun_minutes": 5,
                                     "inputs": ["operating_margin"]}}}),
    );
    p
}

/// What an override's first step must leave as it was: the workflow's
/// record (its last change, re-runs, settled assumptions, tasks' attempts).
fn untouched(w: &Value) -> Value {
    let attempts: serde_json::Map<String, Value> = w["tasks"]
        .as_object()
        .map(|t| {
            t.iter()
                .map(|(k, v)| (k.clone(), v["attempt"].clone()))
                .collect()
        })
        .unwrap_or_default();
    json!({
        "updated_at": w["updated_at"],
        "reruns": w["reruns"],
        "resolved_assumptions": w["resolved_assumptions"],
        "attempts": attempts,
    })
}

/// An analysis, a review gate, a report.
fn gated_pipeline() -> Value {
    json!({
        "name": "console-gate",
        "capacities": {"analyst": 2},
        "stages": [
            {"name": "financial", "agent": "analyst", "params": {"output": {
                "operating_margin": 0.25,
                "findings": [{"finding": "Operating margin holds at 25%", "confidence": 0.8,
                              "key": "AAPL:operating_margin", "metric": "operating_margin",
                              "value": 0.25, "evidence": ["10-K p.47"]}]}}},
            {"name": "review", "kind": "gate", "depends_on": ["financial"]},
            {"name": "report", "agent": "analyst", "depends_on": ["review"],
             "params": {"output": {"done": true}}}
        ]
    })
}

async fn submit(api: &Api, item: &str, pipeline: Value) -> String {
    let r = call(
        api,
        "submit",
        json!({"items": [item], "pipeline": pipeline, "time_unit_ms": 20}),
    )
    .await
    .expect("submit");
    r["workflow_ids"][0].as_str().unwrap().to_string()
}

/// Polls `/gates` until `wf`'s row is listed.
async fn wait_listed(http: &mut Http, wf: &str) {
    let row = format!("data-workflow-id=\"{wf}\"");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let page = http.get("/gates").await;
        assert_eq!(page.status, 200, "{}", page.body);
        if page.body.contains(&row) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{wf}'s gate never listed on /gates: {}",
            page.body
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A coordinator, a facilitator, an analyst worker and a console.
struct Scene {
    // Dropped in this order: the processes before the servers they use.
    _services: Vec<Service>,
    listen: String,
    api: Api,
    fac: crate::facilitator_common::Client,
    _dir: tempfile::TempDir,
    _stack: Stack,
}

impl Scene {
    async fn start() -> Scene {
        let stack = Stack::start();
        let c = coordinator(&stack, &[]);
        let f = crate::facilitator_common::facilitator(&stack, &[]);
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("agent.py");
        std::fs::write(&script, AGENT).unwrap();
        let w = worker(
            &stack,
            "analyst",
            2,
            &format!("exec:python3 {}", script.display()),
            &[],
        );
        let (console, http) = console(&stack).await;
        Scene {
            _services: vec![console, w, f, c],
            listen: http.addr().to_string(),
            api: Api::connect(&stack).await,
            fac: crate::facilitator_common::Client::connect(&stack).await,
            _dir: dir,
            _stack: stack,
        }
    }

    /// A client of the console with its own cookies.
    fn http(&self) -> Http {
        Http::new(&self.listen)
    }

    /// Debate `id` of `wf` made a provisional decision: nobody answers
    /// level 1, the expert at level 3 cannot decide.
    async fn provisional(&self, wf: &str, id: &str) {
        self.level3(wf, id).await;
        self.fac
            .call(
                "decide",
                json!({"debate_id": id, "expert": "expert", "unavailable": true}),
            )
            .await
            .unwrap();
        self.fac
            .wait_debate(id, "provisional", Duration::from_secs(10), |d| {
                d["state"] == "provisional"
            })
            .await;
    }

    /// Debate `id` of `wf` at level 3 (nobody answers level 1).
    async fn level3(&self, wf: &str, id: &str) {
        let mut ch = crate::facilitator_common::challenge(id, "valuation", "strategy", "financial");
        ch["content"]["workflow_id"] = json!(wf);
        ch["content"]["item"] = json!("AAPL");
        self.fac.publish_debate(id, "challenge", ch).await;
        self.fac
            .wait_debate(id, "level 3", Duration::from_secs(20), |d| {
                d["state"] == "awaiting_human"
            })
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gates_provisional_decisions_and_debates_from_the_console() {
    let scene = Scene::start().await;
    let (api, fac, mut http) = (&scene.api, &scene.fac, scene.http());
    let wf = submit(api, "AAPL", gated_pipeline()).await;

    // A debate of this workflow reaches level 3: nobody answers level 1.
    scene.level3(&wf, "CH-CONSOLE").await;

    // /debates: the expert's queue as "n/cap" and the debate at level 3.
    let page = http.get("/debates").await;
    assert_eq!(page.status, 200, "{}", page.body);
    for want in [
        "id=\"experts\"",
        "data-expert=\"expert\"",
        "id=\"debates\"",
        "data-debate-id=\"CH-CONSOLE\"",
        "awaiting_human",
    ] {
        assert!(
            page.body.contains(want),
            "/debates lacks {want}: {}",
            page.body
        );
    }
    let load = fac.call("expert_load", json!({})).await.unwrap();
    let held = load["expert"].as_str().expect("the expert's load");
    assert!(held.starts_with("1/"), "{load}");
    assert!(
        page.body.contains(held),
        "/debates lacks {held}: {}",
        page.body
    );
    let page = http.get("/debates/CH-CONSOLE").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("id=\"decide-debate\""), "{}", page.body);
    assert!(page.body.contains("id=\"history\""), "{}", page.body);
    let page = http.get("/debates/NO-SUCH-DEBATE").await;
    assert_eq!(page.status, 404, "{}", page.body);
    assert!(page.body.contains("NO-SUCH-DEBATE"), "{}", page.body);

    // The expert cannot decide: the conservative default applies.
    let csrf = http.csrf("/debates/CH-CONSOLE").await;
    let r = http
        .post(
            "/debates/CH-CONSOLE/decide",
            &[("expert", "expert"), ("unavailable", "1")],
        )
        .await;
    assert_eq!(r.status, 403, "no CSRF token: {}", r.body);
    assert_eq!(fac.debate("CH-CONSOLE").await["state"], "awaiting_human");
    let r = http
        .post(
            "/debates/CH-CONSOLE/decide",
            &[("csrf", &csrf), ("expert", "expert"), ("unavailable", "1")],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.location(), "/debates/CH-CONSOLE?done=decided");
    fac.wait_debate("CH-CONSOLE", "provisional", Duration::from_secs(10), |d| {
        d["state"] == "provisional"
    })
    .await;

    // The gate's decision package shows the provisional decision.
    wait_listed(&mut http, &wf).await;
    let gate = format!("/gates/{wf}");
    let page = http.get(&gate).await;
    assert_eq!(page.status, 200, "{}", page.body);
    for want in [
        "id=\"provisional\"",
        "1 provisional decision requires review",
        "conservative default",
        "data-debate-id=\"CH-CONSOLE\"",
        "class=\"confirm",
        "form id=\"decide\"",
        "name=\"rationale\"",
        "value=\"approve\"",
        "Operating margin holds at 25%",
        "10-K p.47",
        "id=\"blocking\"",
    ] {
        assert!(
            page.body.contains(want),
            "{gate} lacks {want}: {}",
            page.body
        );
    }

    // Approval waits for the review.
    let r = http
        .post(
            &format!("{gate}/decide"),
            &[
                ("csrf", &csrf),
                ("action", "approve"),
                ("rationale", "fine"),
            ],
        )
        .await;
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body.contains("CH-CONSOLE"), "{}", r.body);

    // An override first shows its downstream impact and commits nothing.
    let over = "/provisional/CH-CONSOLE/override";
    let r = http
        .post(
            over,
            &[
                ("csrf", &csrf),
                ("workflow_id", &wf),
                ("side", "challenger"),
            ],
        )
        .await;
    assert_eq!(r.status, 400, "an override without a rationale: {}", r.body);
    let r = http
        .post(
            over,
            &[
                ("csrf", &csrf),
                ("workflow_id", &wf),
                ("side", "challenger"),
                ("rationale", "Guidance supports 30%"),
            ],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    for want in [
        "Downstream impact",
        "name=\"confirm\" value=\"1\"",
        "0.25 → 0.3",
        "dcf_valuation",
    ] {
        assert!(
            r.body.contains(want),
            "the impact step lacks {want}: {}",
            r.body
        );
    }
    assert_eq!(fac.debate("CH-CONSOLE").await["state"], "provisional");

    // Confirmed: the conservative default is final.
    let r = http
        .post(
            "/provisional/NO-SUCH-DEBATE/confirm",
            &[("csrf", &csrf), ("workflow_id", &wf)],
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(r.body.contains("NO-SUCH-DEBATE"), "{}", r.body);
    let r = http
        .post(
            "/provisional/CH-CONSOLE/confirm",
            &[("csrf", &csrf), ("workflow_id", &wf)],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.location(), format!("{gate}?done=confirmed"));
    let d = fac.debate("CH-CONSOLE").await;
    assert_eq!(d["state"], "resolved", "{d}");
    let page = http.get(&format!("{gate}?done=confirmed")).await;
    assert!(
        page.body.contains("Provisional decision confirmed"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("0 provisional decisions require review"),
        "{}",
        page.body
    );

    // Bad decisions are refused with the reason, and change nothing.
    let decide = format!("{gate}/decide");
    let long = "x".repeat(MAX_RATIONALE + 1);
    let r = http
        .post(
            &decide,
            &[("csrf", &csrf), ("action", "approve"), ("rationale", &long)],
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(
        r.body.contains(&format!("at most {MAX_RATIONALE} bytes")),
        "{}",
        r.body
    );
    let r = http
        .post(&decide, &[("action", "approve"), ("rationale", "ok")])
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    let r = http
        .post(&decide, &[("csrf", "not-the-token"), ("action", "approve")])
        .await;
    assert_eq!(r.status, 403, "{}", r.body);
    let r = http
        .post(&decide, &[("csrf", &csrf), ("action", "maybe")])
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("maybe"), "{}", r.body);
    let r = http
        .post(&decide, &[("csrf", &csrf), ("action", "reject")])
        .await;
    assert_eq!(r.status, 400, "a rejection without a rationale: {}", r.body);
    let r = http
        .post(
            "/gates/WF-NOT-THERE/decide",
            &[("csrf", &csrf), ("action", "approve")],
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(r.body.contains("WF-NOT-THERE"), "{}", r.body);
    let page = http.get("/gates/WF-NOT-THERE").await;
    assert_eq!(page.status, 404, "{}", page.body);
    assert!(page.body.contains("WF-NOT-THERE"), "{}", page.body);
    assert_eq!(wait_state(api, &wf, "running").await["state"], "running");

    // Approved with a rationale: the workflow completes, the decision kept.
    let rationale = "Margins match the 10-K; provisional margin confirmed";
    let r = http
        .post(
            &decide,
            &[
                ("csrf", &csrf),
                ("action", "approve"),
                ("rationale", rationale),
            ],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.location(), format!("/gates?done=approved&workflow={wf}"));
    let w = wait_state(api, &wf, "completed").await;
    let decision = &w["tasks"]["review"]["gate"]["decision"];
    assert_eq!(decision["action"], "approve", "{w}");
    assert_eq!(decision["rationale"], rationale, "{w}");
    assert_eq!(decision["decided_by"], "console", "{w}");
    let page = http.get(r.location()).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Approved"), "{}", page.body);
    assert!(
        !page.body.contains(&format!("data-workflow-id=\"{wf}\"")),
        "an approved gate is not open: {}",
        page.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provisional_decision_overridden_and_one_re_debated_from_the_gate() {
    let scene = Scene::start().await;
    let mut http = scene.http();
    let wf = submit(&scene.api, "AAPL", valued_pipeline()).await;
    scene.provisional(&wf, "CH-OVER").await;
    scene.provisional(&wf, "CH-AGAIN").await;
    wait_listed(&mut http, &wf).await;
    let gate = format!("/gates/{wf}");
    let page = http.get(&gate).await;
    assert!(
        page.body.contains("2 provisional decisions require review"),
        "{}",
        page.body
    );
    let csrf = http.csrf(&gate).await;
    let before_debate = scene.fac.debate("CH-OVER").await;
    let before_workflow = scene.api.status(std::slice::from_ref(&wf)).await.remove(0);

    // The impact step's form commits the override as the person chose it.
    let rationale = "Q3 guidance supports 30%";
    let step = http
        .post(
            "/provisional/CH-OVER/override",
            &[
                ("csrf", &csrf),
                ("workflow_id", &wf),
                ("side", "challenger"),
                ("rationale", rationale),
            ],
        )
        .await;
    assert_eq!(step.status, 200, "{}", step.body);
    assert!(
        step.body.contains("id=\"override-commit\""),
        "{}",
        step.body
    );
    // Step one is the facilitator's own report (a dry run): the valuation's
    // target price now and estimated after 25% → 30%, the re-run it needs.
    for want in [
        "id=\"impact-report\"",
        "operating_margin</strong> 0.25 → 0.3 (+20.0%)",
        "<tr data-analysis-id=\"dcf_valuation\">",
        "<td class=\"old\">85</td>",
        "<td class=\"new\">102 (linear sensitivity, confidence 0.70)</td>",
        "<td class=\"delta\">20.0%</td>",
        "<td class=\"rerun\"><strong>required</strong></td>",
        "1 analysis affected, 1 re-run required (one after another, about 5 min)",
    ] {
        assert!(
            step.body.contains(want),
            "the impact step lacks {want}: {}",
            step.body
        );
    }
    // … and it changed nothing: the debate is still provisional and the
    // workflow's record is as it was.
    let d = scene.fac.debate("CH-OVER").await;
    assert_eq!(d["state"], "provisional", "{d}");
    assert_eq!(d, before_debate);
    let w = scene.api.status(std::slice::from_ref(&wf)).await.remove(0);
    assert_eq!(untouched(&w), untouched(&before_workflow), "{w}");
    // Only an override has a dry run.
    let e = call(
        &scene.api,
        "gate_review",
        json!({"workflow_id": wf, "debate_id": "CH-AGAIN", "action": "confirm",
               "reviewer": "console", "dry_run": true}),
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, "bad_request", "{e:?}");
    assert!(e.message.contains("dry_run"), "{e:?}");
    assert_eq!(scene.fac.debate("CH-AGAIN").await["state"], "provisional");
    let r = http
        .post(
            "/provisional/CH-OVER/override",
            &[
                ("csrf", &csrf),
                ("workflow_id", &wf),
                ("side", "challenger"),
                ("rationale", rationale),
                ("confirm", "1"),
            ],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.location(), format!("{gate}?done=overridden"));
    let d = scene.fac.debate("CH-OVER").await;
    assert_eq!(d["state"], "resolved", "{d}");
    assert_eq!(d["resolution"]["final_position"]["value"], 0.3, "{d}");
    assert_eq!(d["resolution"]["decided_by"], "console", "{d}");
    assert_eq!(d["resolution"]["rationale"], rationale, "{d}");
    // The commit recorded the report step one showed, and re-ran the
    // valuation as it requires.
    let dcf = &d["resolution"]["impact_report"]["report"]["impacts"][0];
    assert_eq!(dcf["analysis_id"], "dcf_valuation", "{d}");
    assert_eq!(dcf["old_value"], 85.0, "{d}");
    assert_eq!(dcf["estimated_new_value"], 102.0, "{d}");
    assert_eq!(dcf["requires_rerun"], true, "{d}");
    let w = scene.api.status(std::slice::from_ref(&wf)).await.remove(0);
    assert_eq!(w["resolved_assumptions"]["operating_margin"], 0.3, "{w}");
    assert_eq!(w["reruns"][0]["groups"][0][0], "dcf_valuation", "{w}");

    // A re-debate needs its context, then opens the next debate.
    let r = http
        .post(
            "/provisional/CH-AGAIN/redebate",
            &[("csrf", &csrf), ("workflow_id", &wf)],
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = http
        .post(
            "/provisional/CH-AGAIN/redebate",
            &[
                ("csrf", &csrf),
                ("workflow_id", &wf),
                ("context", "Q3 results are out"),
            ],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.location(), format!("{gate}?done=redebated"));
    let next = scene.fac.debate("CH-AGAIN-r1").await;
    assert_eq!(next["redebate_of"], "CH-AGAIN", "{next}");
    let page = http.get(&format!("{gate}?done=redebated")).await;
    assert!(page.body.contains("Re-debate opened"), "{}", page.body);
    assert!(
        page.body.contains("0 provisional decisions require review"),
        "{}",
        page.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_correlations_and_batches_from_the_console() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let _k = stack
        .service("caucus-correlator")
        .env("CAUCUS_CORRELATOR_LEADER_LEASE", "1s")
        .env("CAUCUS_SHUTDOWN_GRACE", "5s")
        .start();
    let dir = tempfile::tempdir().unwrap();
    let named = ["AAPL", "MSFT", "GOOGL"];
    std::fs::write(dir.path().join("named"), named.join("\n") + "\n").unwrap();
    std::fs::write(dir.path().join("broken"), "").unwrap();
    let _s = worker(&stack, "screening", 4, "noop", &[]);
    let handler = format!("exec:{}", quota_handler(dir.path()));
    let _v = worker(&stack, "valuation", 2, &handler, &[]);
    let _r = worker(&stack, "report", 2, "noop", &[]);
    let (_console, mut http) = console(&stack).await;
    let api = &Api::connect(&stack).await;
    let p = crate::common::pipeline(
        "mini-stock",
        json!([
            {"name": "screening", "agent": "screening", "expected_duration": 1.0},
            {"name": "valuation", "agent": "valuation", "expected_duration": 1.0,
             "depends_on": ["screening"]},
            {"name": "report", "agent": "report", "expected_duration": 1.0, "depends_on": ["valuation"]}
        ]),
    );
    let ids = api.submit(&named, p, 20).await;
    // A workflow held at a gate, for a batch the person pauses.
    let held = submit(
        api,
        "HOLD",
        json!({"name": "held", "capacities": {"screening": 1}, "stages": [
            {"name": "screening", "agent": "screening"},
            {"name": "review", "kind": "gate", "depends_on": ["screening"]}]}),
    )
    .await;

    // The correlation of the three quota failures.
    let rec = one_correlation(api, 3).await;
    let batch = rec["batch_id"].as_str().unwrap().to_string();
    eventually("the batch paused", Duration::from_secs(30), || async {
        let s = call(api, "batch_status", json!({"batch_id": batch}))
            .await
            .ok()?;
        (s["paused"] == 3).then_some(())
    })
    .await;
    let cards = eventually("three alert cards", Duration::from_secs(30), || async {
        let v = api.call("correlator", "alerts", json!({})).await.ok()?;
        let n = v["alerts"].as_array()?.len();
        (n == 3).then_some(v)
    })
    .await;

    let page = http.get("/alerts").await;
    assert_eq!(page.status, 200, "{}", page.body);
    for want in [
        "id=\"alerts\"",
        "id=\"correlations\"",
        "Koyfin API quota exceeded",
        &format!("data-batch-id=\"{batch}\""),
        &format!(
            "data-correlation-id=\"{}\"",
            rec["correlation_id"].as_str().unwrap()
        ),
        "class=\"batch-pause",
        "class=\"batch-resume",
        "AAPL paused: Koyfin API quota exceeded",
    ] {
        assert!(
            page.body.contains(want),
            "/alerts lacks {want}: {}",
            page.body
        );
    }
    for a in cards["alerts"].as_array().unwrap() {
        let id = a["msg_id"].as_str().unwrap();
        assert!(
            page.body.contains(&format!("data-msg-id=\"{id}\"")),
            "card {id} missing: {}",
            page.body
        );
    }
    let csrf = http.csrf("/alerts").await;

    // Unknown batch; no CSRF token.
    let r = http
        .post("/batches/no-such-batch/resume", &[("csrf", &csrf)])
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(r.body.contains("no-such-batch"), "{}", r.body);
    let r = http.post(&format!("/batches/{batch}/resume"), &[]).await;
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(wait_state(api, &ids[0], "paused").await["state"], "paused");

    // The vendor recovers; "Resume all" finishes the three.
    std::fs::remove_file(dir.path().join("broken")).unwrap();
    let r = http
        .post(&format!("/batches/{batch}/resume"), &[("csrf", &csrf)])
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.location(), format!("/alerts?done=resumed&batch={batch}"));
    api.wait_completed(&ids, Duration::from_secs(60)).await;

    // A batch the person pauses and resumes from the page.
    wait_state(api, &held, "running").await;
    let r = http
        .post(
            "/batches/console-hold/pause",
            &[
                ("csrf", &csrf),
                ("items", "HOLD"),
                ("reason", "vendor check"),
            ],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.location(), "/alerts?done=paused&batch=console-hold");
    wait_state(api, &held, "paused").await;
    let st = call(api, "batch_status", json!({"batch_id": "console-hold"}))
        .await
        .unwrap();
    assert_eq!(st["reason"], "vendor check", "{st}");
    let page = http.get(r.location()).await;
    assert!(page.body.contains("Batch paused"), "{}", page.body);
    let r = http
        .post("/batches/console-hold/resume", &[("csrf", &csrf)])
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    wait_state(api, &held, "running").await;
}
