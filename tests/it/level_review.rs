//! The level review gate (seed 002) on real servers with real worker
//! processes: `exec:` agents that report the resources they modified and
//! echo their inputs, the worker's built-in reviewer or an `exec:` reviewer
//! answering with the seed's field names.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::common::{
    call, coordinator, eventually, pipeline, starts, task_events, wait_state, worker, Api,
};
use caucus_harness::{Service, Stack};
use chrono::{DateTime, Utc};
use serde_json::{json, Value};

/// A development agent: sleeps `params.sleep_ms`, reports
/// `params.resources` as modified and echoes the inputs it was given.
const DEV: &str = r#"
import json, sys, time
t = json.load(sys.stdin)
p = t.get("params") or {}
time.sleep(p.get("sleep_ms", 0) / 1000.0)
print(json.dumps({
    "summary": "%s done" % t["stage"],
    "modified_resources": p.get("resources", []),
    "seen_inputs": t.get("inputs") or {},
}))
"#;

/// A reviewer answering in the seed's shape (`review_summary`,
/// `conflicts_detected` with `file_path`, `duration_seconds`).
const SEED_REVIEWER: &str = r#"
import json, sys
t = json.load(sys.stdin)
p = t["params"]
names = ",".join(sorted(x["task"] for x in p["context"]["tasks"]))
print(json.dumps({
    "level_number": p["level"],
    "review_summary": "reviewed level %d (%s)" % (p["level"], names),
    "conflicts_detected": [{"file_path": c["resource"], "resolved": True} for c in p["conflicts"]],
    "warnings": ["level %d checked" % p["level"]],
    "duration_seconds": 0.25,
    "seen_inputs": sorted(t.get("inputs") or {}),
}))
"#;

struct Rig {
    stack: Stack,
    api: Api,
    coordinator: Service,
    workers: Vec<Service>,
    dir: tempfile::TempDir,
}

impl Rig {
    /// A stack, a coordinator with `env`, and a `dev` worker (2 slots).
    async fn start(env: &[(&str, &str)]) -> Rig {
        let stack = Stack::start();
        let c = coordinator(&stack, env);
        let dir = tempfile::tempdir().unwrap();
        for (name, body) in [("dev.py", DEV), ("reviewer.py", SEED_REVIEWER)] {
            std::fs::write(dir.path().join(name), body).unwrap();
        }
        let api = Api::connect(&stack).await;
        let mut rig = Rig {
            stack,
            api,
            coordinator: c,
            workers: Vec::new(),
            dir,
        };
        let dev = rig.script("dev.py");
        rig.add_worker("dev", 2, &dev);
        rig
    }

    fn script(&self, name: &str) -> String {
        format!("exec:python3 {}", self.dir.path().join(name).display())
    }

    fn add_worker(&mut self, agent: &str, slots: u32, handler: &str) {
        let w = worker(&self.stack, agent, slots, handler, &[]);
        self.workers.push(w);
    }
}

fn ts(v: &Value) -> DateTime<Utc> {
    v.as_str()
        .unwrap_or_else(|| panic!("timestamp expected, got {v}"))
        .parse()
        .expect("rfc3339")
}

fn dev_stage(name: &str, deps: &[&str], resources: &[&str], sleep_ms: u64) -> Value {
    json!({
        "name": name,
        "agent": "dev",
        "depends_on": deps,
        "expected_duration": 1.0,
        "params": {"resources": resources, "sleep_ms": sleep_ms},
    })
}

/// Distinct task ids that completed, and the agent types that ran tasks.
async fn dispatched(api: &Api) -> (BTreeSet<String>, BTreeSet<String>) {
    let events = task_events(&api.nats).await;
    let completed = events
        .iter()
        .filter(|e| e["status"] == "completed")
        .map(|e| e["task_id"].as_str().unwrap().to_string())
        .collect();
    let agents = events
        .iter()
        .map(|e| e["agent_type"].as_str().unwrap().to_string())
        .collect();
    (completed, agents)
}

fn task_keys(w: &Value) -> Vec<String> {
    w["tasks"].as_object().unwrap().keys().cloned().collect()
}

/// Default mode (`conflicts`): two level-0 tasks that modified different
/// resources → no review task at all (three tasks dispatched, none to the
/// reviewer), yet level 1 waits for the whole of level 0.
#[tokio::test(flavor = "multi_thread")]
async fn no_conflict_dispatches_no_review_task() {
    let mut rig = Rig::start(&[]).await;
    rig.add_worker("reviewer", 1, "builtin");
    let p = pipeline(
        "no-conflict",
        json!([
            dev_stage("a", &[], &["src/a.py"], 0),
            dev_stage("b", &[], &["src/b.py"], 400),
            dev_stage("c", &["a"], &[], 0),
        ]),
    );
    let ids = rig.api.submit(&["NC"], p, 100).await;
    let w = rig
        .api
        .wait_completed(&ids, Duration::from_secs(60))
        .await
        .remove(0);
    assert_eq!(task_keys(&w), vec!["a", "b", "c"], "{w}");
    let (completed, agents) = dispatched(&rig.api).await;
    assert_eq!(completed.len(), 3, "{completed:?}");
    assert!(!agents.contains("reviewer"), "{agents:?}");
    let t = &w["tasks"];
    assert!(
        ts(&t["c"]["started_at"]) >= ts(&t["b"]["finished_at"]),
        "level 1 starts after all of level 0: {t}"
    );
    let seen = &t["c"]["output"]["seen_inputs"];
    assert!(
        seen.get("a").is_some() && seen.get("level_review").is_none(),
        "{seen}"
    );
    let lr = &w["level_review"];
    assert_eq!(lr["policy"]["mode"], "conflicts", "{lr}");
    assert_eq!(lr["policy"]["agent"], "reviewer");
    let levels = lr["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 2, "{lr}");
    assert!(
        levels.iter().all(|l| l.get("review_task").is_none()),
        "{lr}"
    );
}

/// Two level-0 tasks modified `src/app.py`: a review task goes to the
/// review agent (the worker's built-in reviewer), and its warnings and
/// resolved conflicts appear in the next level's task inputs.
#[tokio::test(flavor = "multi_thread")]
async fn conflict_dispatches_a_review_whose_warnings_reach_the_next_level() {
    let mut rig = Rig::start(&[]).await;
    rig.add_worker("reviewer", 1, "builtin");
    let p = pipeline(
        "conflict",
        json!([
            dev_stage("a", &[], &["src/app.py", "src/a.py"], 0),
            dev_stage("b", &[], &["./src/app.py"], 200),
            dev_stage("c", &["a"], &[], 0),
        ]),
    );
    let ids = rig.api.submit(&["CF"], p, 100).await;
    let w = rig
        .api
        .wait_completed(&ids, Duration::from_secs(60))
        .await
        .remove(0);
    let t = &w["tasks"];
    assert_eq!(task_keys(&w), vec!["a", "b", "c", "review@level-0"], "{w}");
    let r = &t["review@level-0"];
    assert_eq!(r["agent_type"], "reviewer", "{r}");
    assert_eq!(r["state"], "completed");
    assert_eq!(r["output"]["reviewer"], "builtin", "{r}");
    assert!(
        ts(&t["c"]["started_at"]) >= ts(&r["finished_at"]),
        "c waits for the review"
    );

    let lr = &t["c"]["output"]["seen_inputs"]["level_review"];
    assert_eq!(lr["level"], 0, "{lr}");
    assert_eq!(
        lr["conflicts"],
        json!([{
            "resource": "src/app.py",
            "tasks": ["a", "b"],
            "resolved": true,
            "resolution": "kept the change of `b` (finished last) over a"
        }]),
        "{lr}"
    );
    let warnings = lr["warnings_for_next_level"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{lr}");
    assert!(
        warnings[0].as_str().unwrap().contains("`src/app.py`"),
        "{lr}"
    );
    assert_eq!(
        lr["fixes_applied"],
        json!(["src/app.py: kept the version of b"])
    );
    assert!(
        lr["summary"]
            .as_str()
            .unwrap()
            .starts_with("level 0: 2 task(s)"),
        "{lr}"
    );
    assert!(t["c"]["output"]["seen_inputs"].get("a").is_some());

    let (completed, agents) = dispatched(&rig.api).await;
    assert_eq!(completed.len(), 4, "{completed:?}");
    assert!(agents.contains("reviewer"));
    let stored = &w["level_review"]["levels"][0];
    assert_eq!(stored["review_task"], "review@level-0", "{stored}");
    assert_eq!(stored["conflicts"][0]["tasks"], json!(["a", "b"]));
    assert_eq!(&stored["review"], lr, "status shows the review handed on");
}

/// `always` (set by the pipeline, with its own review agent `qa`, an
/// `exec:` script answering in the seed's shape): every level is reviewed,
/// the last one too, and each level sees the review of the one before.
#[tokio::test(flavor = "multi_thread")]
async fn always_reviews_every_level() {
    let mut rig = Rig::start(&[]).await;
    let reviewer = rig.script("reviewer.py");
    rig.add_worker("qa", 1, &reviewer);
    let mut p = pipeline(
        "always",
        json!([
            dev_stage("a", &[], &[], 0),
            dev_stage("b", &["a"], &[], 0),
            dev_stage("c", &["b"], &[], 0),
        ]),
    );
    // A bad mode and an undeclared review agent are refused at submit.
    for (lr, needle) in [
        (
            json!({"mode": "sometimes"}),
            "unknown variant `sometimes`, expected one of `conflicts`, `always`, `off`",
        ),
        (
            json!({"mode": "always", "agent": "qa"}),
            "review agent type `qa` has no entry in [capacities]",
        ),
        (
            json!({"mode": "always"}),
            "review agent type `reviewer` (coordinator.level_review_agent)",
        ),
    ] {
        let mut bad = p.clone();
        bad["level_review"] = lr;
        let e = call(&rig.api, "submit", json!({"items": ["X"], "pipeline": bad}))
            .await
            .unwrap_err();
        assert_eq!(e.code, "invalid_pipeline", "{e:?}");
        assert!(e.message.contains(needle), "{}", e.message);
    }
    p["capacities"]["qa"] = json!(1);
    p["level_review"] = json!({"mode": "always", "agent": "qa"});
    let ids = rig.api.submit(&["AL"], p, 100).await;
    let w = rig
        .api
        .wait_completed(&ids, Duration::from_secs(60))
        .await
        .remove(0);
    assert_eq!(
        task_keys(&w),
        vec![
            "a",
            "b",
            "c",
            "review@level-0",
            "review@level-1",
            "review@level-2"
        ],
        "{w}"
    );
    let t = &w["tasks"];
    for (stage, prev, level) in [("b", "a", 0), ("c", "b", 1)] {
        let lr = &t[stage]["output"]["seen_inputs"]["level_review"];
        assert_eq!(lr["level"], level, "{lr}");
        assert_eq!(
            lr["summary"],
            format!("reviewed level {level} ({prev})"),
            "{lr}"
        );
        assert_eq!(
            lr["warnings_for_next_level"],
            json!([format!("level {level} checked")])
        );
        assert_eq!(lr["duration_ms"], 250, "the reviewer's figure: {lr}");
        let review = &t[format!("review@level-{level}").as_str()];
        assert_eq!(review["agent_type"], "qa");
        assert_eq!(
            review["output"]["seen_inputs"],
            json!([prev]),
            "the level's outputs"
        );
    }
    let (completed, agents) = dispatched(&rig.api).await;
    assert_eq!(completed.len(), 6, "{completed:?}");
    assert!(agents.contains("qa"));
    assert_eq!(w["level_review"]["levels"].as_array().unwrap().len(), 3);
}

/// `off` (from `coordinator.level_review_mode`): a conflict is not
/// reviewed and levels are no barrier: `c` (needs `a` only) runs while the
/// slow `b` still works.
#[tokio::test(flavor = "multi_thread")]
async fn off_never_reviews() {
    let mut rig = Rig::start(&[("CAUCUS_COORDINATOR_LEVEL_REVIEW_MODE", "off")]).await;
    rig.add_worker("reviewer", 1, "builtin");
    let p = pipeline(
        "off",
        json!([
            dev_stage("a", &[], &["src/app.py"], 0),
            dev_stage("b", &[], &["src/app.py"], 2000),
            dev_stage("c", &["a"], &[], 0),
        ]),
    );
    let ids = rig.api.submit(&["OF"], p, 100).await;
    let w = rig
        .api
        .wait_completed(&ids, Duration::from_secs(60))
        .await
        .remove(0);
    assert_eq!(task_keys(&w), vec!["a", "b", "c"], "{w}");
    let t = &w["tasks"];
    assert!(
        ts(&t["c"]["finished_at"]) < ts(&t["b"]["finished_at"]),
        "no barrier with reviews off: {t}"
    );
    assert!(t["c"]["output"]["seen_inputs"]
        .get("level_review")
        .is_none());
    let (completed, agents) = dispatched(&rig.api).await;
    assert_eq!(completed.len(), 3);
    assert!(!agents.contains("reviewer"), "{agents:?}");
    assert_eq!(w["level_review"]["policy"]["mode"], "off");
    assert!(w["level_review"].get("levels").is_none(), "{w}");
}

/// The review task lives in the stored workflow record: with no reviewer
/// running it waits; the workflow pauses and resumes around it, the
/// coordinator is killed and replaced, and once a reviewer starts the
/// review runs and the next level gets it. Nothing ran twice.
#[tokio::test(flavor = "multi_thread")]
async fn a_pending_review_survives_pause_resume_and_a_coordinator_restart() {
    let mut rig = Rig::start(&[]).await;
    let p = pipeline(
        "restart",
        json!([
            dev_stage("a", &[], &["db/users"], 0),
            dev_stage("b", &[], &["db/users"], 0),
            dev_stage("c", &["a", "b"], &[], 0),
        ]),
    );
    let ids = rig.api.submit(&["RS"], p, 100).await;
    let id = ids[0].clone();
    eventually(
        "the review task to be ready",
        Duration::from_secs(30),
        || async {
            let w = rig.api.status(&ids).await.pop()?;
            (w["tasks"]["review@level-0"]["state"] == "ready").then_some(())
        },
    )
    .await;

    let r = call(&rig.api, "pause", json!({"workflow_id": id}))
        .await
        .unwrap();
    assert_eq!(r["outcome"], "paused", "{r}");
    let w = wait_state(&rig.api, &id, "paused").await;
    assert_eq!(w["tasks"]["review@level-0"]["state"], "ready", "{w}");
    let r = call(&rig.api, "resume", json!({"workflow_id": id}))
        .await
        .unwrap();
    assert_eq!(r["state"], "running", "{r}");

    // The control API answers before the record is written: wait for KV
    // to hold the resumed record before killing the coordinator.
    let kv = async_nats::jetstream::new(rig.api.nats.clone())
        .get_key_value("caucus_workflows")
        .await
        .expect("workflows bucket");
    eventually(
        "the resumed record in KV",
        Duration::from_secs(20),
        || async {
            let raw = kv.get(&id).await.ok()??;
            let stored: Value = serde_json::from_slice(&raw).ok()?;
            (stored["state"] == "running").then_some(())
        },
    )
    .await;
    rig.coordinator.kill();
    rig.coordinator = coordinator(&rig.stack, &[]);
    let w = rig.api.status(&ids).await.remove(0);
    assert_eq!(w["tasks"]["review@level-0"]["state"], "ready", "{w}");
    assert_eq!(w["tasks"]["c"]["state"], "waiting", "{w}");

    rig.add_worker("reviewer", 1, "builtin");
    let w = rig
        .api
        .wait_completed(&ids, Duration::from_secs(60))
        .await
        .remove(0);
    let lr = &w["tasks"]["c"]["output"]["seen_inputs"]["level_review"];
    assert_eq!(lr["conflicts"][0]["resource"], "db/users", "{lr}");
    assert_eq!(lr["conflicts"][0]["resolved"], true);
    let s = starts(&rig.api).await;
    for k in ["a", "b", "c", "review@level-0"] {
        assert_eq!(
            s.get(&format!("{id}/{k}")),
            Some(&1),
            "{k} started once: {s:?}"
        );
    }
}
