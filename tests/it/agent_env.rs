//! `exec:` agents get none of the worker's secrets (#11): their environment
//! is the allowlist (PATH, HOME, LANG, TZ, TRACEPARENT and
//! `worker.exec_env_passthrough`), and a failure message echoing a secret
//! the worker holds is stored scrubbed.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{coordinator, eventually, pipeline, worker, Api};
use caucus_harness::Stack;

/// The worker's own credentials. The test servers run without auth, which
/// ignores them, but the worker holds them as it would in production.
const SECRET: &str = "s3cret-value";

/// An agent answering with its whole environment.
const ENV_DUMP: &str = "exec:python3 -c 'import json,os,sys; sys.stdin.read(); \
    print(json.dumps({\"env\": dict(os.environ)}))'";

/// Env of every worker here: credentials, a variable an agent may be given,
/// and one it may not.
fn worker_env<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut env = vec![
        ("CAUCUS_NATS_USER", "worker"),
        ("CAUCUS_NATS_PASSWORD", SECRET),
        ("AGENT_ENV_PASSED", "visible"),
        ("AGENT_ENV_OTHER", "hidden"),
        // Nothing is exported here: trace context is asked for by name
        // (`auto` builds none without an exporter), so the agent gets one.
        ("CAUCUS_TELEMETRY_TRACE_LEVEL", "info"),
    ];
    env.extend_from_slice(extra);
    env
}

/// The environment an `env` task's agent reported.
fn env_of(task: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(task["output"]["env"].clone()).expect("env object")
}

#[tokio::test(flavor = "multi_thread")]
async fn exec_agents_get_no_secrets_and_their_errors_are_scrubbed() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let _plain = worker(&stack, "plain", 1, ENV_DUMP, &worker_env(&[]));
    let pass = [("CAUCUS_WORKER_EXEC_ENV_PASSTHROUGH", "AGENT_ENV_PASSED")];
    let _passing = worker(&stack, "passing", 1, ENV_DUMP, &worker_env(&pass));
    // Fails echoing the worker's password (in prose and in a URL) on stderr;
    // the command line builds it, so it is in no argument the worker logs.
    let leaky = "exec:cat >/dev/null; s=s3cret; \
        echo \"login refused for password $s-value at nats://worker:$s-value@nats:4222\" >&2; exit 1";
    let _leaky = worker(&stack, "leaky", 1, leaky, &worker_env(&[]));
    let api = Api::connect(&stack).await;
    // Three independent stages: the failure does not stop the others.
    let p = pipeline(
        "env",
        json!([
            {"name": "plain", "agent": "plain", "expected_duration": 1.0},
            {"name": "passing", "agent": "passing", "expected_duration": 1.0},
            {"name": "leaky", "agent": "leaky", "expected_duration": 1.0}
        ]),
    );
    let ids = api.submit(&["E"], p, 10).await;
    let tasks = eventually("the three tasks to finish", Duration::from_secs(60), || {
        let (api, ids) = (&api, &ids);
        async move {
            let t = api.status(ids).await[0]["tasks"].clone();
            let done = |s: &str| t[s]["state"] == "completed";
            (done("plain") && done("passing") && t["leaky"]["state"] == "failed").then_some(t)
        }
    })
    .await;

    let plain = env_of(&tasks["plain"]);
    let caucus: Vec<&String> = plain.keys().filter(|k| k.starts_with("CAUCUS_")).collect();
    assert!(
        caucus.is_empty(),
        "worker variables reached the agent: {caucus:?}"
    );
    assert!(
        plain.get("PATH").is_some_and(|p| !p.is_empty()),
        "{plain:?}"
    );
    assert!(!plain.contains_key("AGENT_ENV_PASSED"), "{plain:?}");
    assert!(!plain.contains_key("AGENT_ENV_OTHER"), "{plain:?}");
    assert!(!plain.values().any(|v| v.contains(SECRET)), "{plain:?}");
    // The task's trace, W3C-shaped: 00-<trace id>-<span id>-<flags>.
    let tp: Vec<&str> = plain
        .get("TRACEPARENT")
        .expect("TRACEPARENT")
        .split('-')
        .collect();
    assert_eq!(
        tp.iter().map(|p| p.len()).collect::<Vec<_>>(),
        [2, 32, 16, 2],
        "{tp:?}"
    );

    let passing = env_of(&tasks["passing"]);
    assert_eq!(
        passing.get("AGENT_ENV_PASSED").map(String::as_str),
        Some("visible")
    );
    assert!(!passing.contains_key("AGENT_ENV_OTHER"), "{passing:?}");
    assert!(
        !passing.keys().any(|k| k.starts_with("CAUCUS_")),
        "{passing:?}"
    );

    let error = &tasks["leaky"]["error"];
    let message = error["message"].as_str().expect("error message");
    assert!(!message.contains(SECRET), "{message}");
    assert!(
        message.contains("login refused for password *** at nats://worker:***@nats:4222"),
        "{message}"
    );
    assert_eq!(error["error_type"], "exit_status", "{error}");
}
