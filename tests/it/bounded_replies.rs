//! API replies stay under the server's max_payload: `status` lists are
//! paged and never inline task outputs, a request whose reply would still
//! be too large gets a `reply_too_large` error (not a time-out), and the
//! CLI's `status`, `status --tasks <id>` and `result <id>` answer after a
//! run whose outputs together are far over the limit.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::common::{caucus, coordinator, pipeline, worker, Api};
use caucus_harness::Stack;
use serde_json::{json, Value};

/// Workflows in the run.
const N: usize = 500;
/// Bytes of each task's output.
const OUTPUT: usize = 100_000;

/// Answers a ~100 KB report naming its item (a shell, not an
/// interpreter, so 500 of them start fast).
fn big_report_handler() -> String {
    format!(
        "exec:t=$(cat); item=$(printf '%s' \"$t\" | sed -n 's/.*\"item\":\"\\([^\"]*\\)\".*/\\1/p'); \
         pad=$(head -c {OUTPUT} /dev/zero | tr '\\0' x); \
         printf '{{\"markdown\":\"# report %s %s\"}}' \"$item\" \"$pad\""
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn status_and_result_answer_when_all_outputs_exceed_max_payload() {
    // The harness runs NATS with its defaults, as in production: a 1 MiB
    // max_payload.
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let api = Api::connect(&stack).await;
    let _w = worker(&stack, "reporter", 16, &big_report_handler(), &[]);
    let p = pipeline(
        "big-report",
        json!([{"name": "report", "agent": "reporter", "expected_duration": 1.0}]),
    );
    let items: Vec<String> = (0..N).map(|i| format!("I{i:03}")).collect();
    let items: Vec<&str> = items.iter().map(String::as_str).collect();
    let ids = api.submit(&items, p, 1).await;
    assert_eq!(ids.len(), N);

    // Wait for the run through the paged list (no outputs, so it is small).
    let started = Instant::now();
    let all = loop {
        let all = list_all(&api, json!({})).await;
        let done = all.iter().filter(|w| w["state"] == "completed").count();
        if done == N {
            break all;
        }
        assert!(
            started.elapsed() < Duration::from_secs(45),
            "{done} of {N} completed"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let seen: HashSet<&str> = all
        .iter()
        .map(|w| w["workflow_id"].as_str().unwrap())
        .collect();
    assert_eq!(seen.len(), N, "every workflow once across the pages");

    // A list with `tasks` shows task state but no outputs.
    let page = api
        .call(
            "coordinator",
            "status",
            json!({"tasks": true, "limit": 1000}),
        )
        .await
        .expect("a list with tasks fits");
    let wfs = page["workflows"].as_array().unwrap();
    assert_eq!(wfs.len(), N);
    assert!(page["next_cursor"].is_null(), "one page of 1,000 holds all");
    assert_eq!(
        wfs[0]["tasks"]["report"]["state"], "completed",
        "{}",
        wfs[0]
    );
    assert!(wfs[0]["tasks"]["report"].get("output").is_none());
    assert_eq!(wfs[0]["outputs_omitted"], true);

    // Exactly one id with `tasks`: the output is there.
    let one = api
        .call(
            "coordinator",
            "status",
            json!({"ids": [ids[7]], "tasks": true}),
        )
        .await
        .expect("one workflow");
    let md = one["workflows"][0]["tasks"]["report"]["output"]["markdown"]
        .as_str()
        .expect("output");
    assert!(md.len() > OUTPUT, "{}", md.len());

    // Many ids with outputs: ~50 MB; a clear error instead of a time-out.
    let asked = Instant::now();
    let err = api
        .call("coordinator", "status", json!({"ids": ids, "tasks": true}))
        .await
        .expect_err("50 MB does not fit in 1 MB");
    assert_eq!(err.code, "reply_too_large", "{err:?}");
    assert!(
        err.message.contains("1048576") && err.message.contains("limit"),
        "{}",
        err.message
    );
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "answered, not timed out"
    );

    // Bad paging parameters are refused.
    let err = api
        .call("coordinator", "status", json!({"limit": 5000}))
        .await
        .expect_err("limit over 1,000");
    assert_eq!(err.code, "bad_request", "{err:?}");
    let err = api
        .call("coordinator", "status", json!({"cursor": "nope"}))
        .await
        .expect_err("not a cursor");
    assert_eq!(err.code, "bad_request", "{err:?}");

    // The CLI: a first page and how to get more; all pages; one workflow's
    // tasks; a report by id and by item; the too-large error named.
    let (code, out, err) = caucus(&stack, &["status"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().filter(|l| l.contains("completed")).count(), 100);
    assert!(out.contains("caucus status --cursor "), "{out}");
    let (code, out, err) = caucus(&stack, &["status", "--all", "--limit", "300"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().filter(|l| l.contains("completed")).count(), N);
    assert!(!out.contains("--cursor"), "{out}");
    let (code, out, err) = caucus(&stack, &["--json", "status", "--all", "--limit", "200"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).expect("one JSON document");
    assert_eq!(v["workflows"].as_array().map(Vec::len), Some(N));
    assert!(v["next_cursor"].is_null(), "{}", v["next_cursor"]);
    let (code, out, err) = caucus(&stack, &["status", "--tasks", &ids[3]]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("I003") && out.contains("report"), "{out}");
    let (code, out, err) = caucus(&stack, &["result", &ids[42]]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("# report I042 xxx"),
        "{}",
        &out[..80.min(out.len())]
    );
    let (code, out, err) = caucus(&stack, &["result", "I499"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("# report I499 xxx"),
        "{}",
        &out[..80.min(out.len())]
    );
    let mut args = vec!["status", "--tasks"];
    args.extend(ids[..20].iter().map(String::as_str));
    let (code, _, err) = caucus(&stack, &args);
    assert_ne!(code, 0);
    assert!(err.contains("reply_too_large"), "{err}");
}

/// Every workflow of a list, following `next_cursor` in pages of 100.
async fn list_all(api: &Api, mut body: Value) -> Vec<Value> {
    let mut out = Vec::new();
    loop {
        let page = api
            .call("coordinator", "status", body.clone())
            .await
            .expect("a page");
        out.extend(page["workflows"].as_array().cloned().unwrap_or_default());
        match page["next_cursor"].as_str() {
            Some(c) => body["cursor"] = json!(c),
            None => return out,
        }
    }
}
