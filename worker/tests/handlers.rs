//! exec handlers against real processes, http handlers against a wiremock
//! agent endpoint that checks what the worker sends.

use std::time::{Duration, Instant};

use caucus_shared::task::{ErrorClass, TaskDispatch};
use caucus_worker::handler::{Handler, HandlerSpec};
use serde_json::json;
use wiremock::matchers::{body_json, header, header_exists, method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

fn task(timeout_ms: u64) -> TaskDispatch {
    serde_json::from_value(serde_json::json!({
        "task_id": "wf/valuation", "workflow_id": "wf", "item": "BRK.B",
        "pipeline": "stock-analysis", "stage": "valuation", "agent_type": "valuation",
        "attempt": 1, "dispatched_at": "2025-11-16T10:30:00Z", "timeout_ms": timeout_ms,
        "inputs": {"financial": {"margin": 0.25}}
    }))
    .unwrap()
}

fn exec(cmd: &str) -> Handler {
    Handler::new(HandlerSpec::Exec(cmd.into()), None)
}

#[tokio::test]
async fn exec_reads_stdin_and_returns_stdout_json() {
    // The command echoes back a field of the task it got on stdin.
    let h = exec(
        r#"python3 -c 'import json,sys; t=json.load(sys.stdin); print(json.dumps({"item": t["item"], "m": t["inputs"]["financial"]["margin"], "findings": [{"finding": "x", "confidence": 0.5}]}))'"#,
    );
    let out = h.run(&task(0)).await.unwrap();
    assert_eq!(out.output, serde_json::json!({"item": "BRK.B", "m": 0.25}));
    assert_eq!(out.findings.len(), 1);
}

#[tokio::test]
async fn exec_failure_keeps_stderr_and_classifies() {
    let e = exec("echo boom >&2; exit 3")
        .run(&task(0))
        .await
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::Permanent);
    assert!(
        e.message.contains("exited with 3") && e.message.contains("boom"),
        "{}",
        e.message
    );
    let e = exec("exit 75").run(&task(0)).await.unwrap_err();
    assert_eq!(e.class, ErrorClass::Transient);
    let e = exec(r#"echo '{"error":{"class":"transient","error_type":"quota_exceeded","message":"Koyfin quota 1000/1000","data_source":"koyfin"}}'; exit 1"#)
        .run(&task(0))
        .await
        .unwrap_err();
    assert_eq!(e.error_type, "quota_exceeded");
    assert_eq!(e.data_source.as_deref(), Some("koyfin"));
    let e = exec("echo not-json").run(&task(0)).await.unwrap_err();
    assert_eq!(e.error_type, "bad_output");
}

#[tokio::test]
async fn exec_timeout_is_transient() {
    let e = exec("sleep 5").run(&task(100)).await.unwrap_err();
    assert_eq!(e.error_type, "timeout");
    assert_eq!(e.class, ErrorClass::Transient);
}

/// A mock agent endpoint at `/run` answering every POST of the task with
/// `reply`, and expecting exactly one such request: the task as JSON, with
/// `content-type: application/json` and a `content-length` (not a chunked
/// body, which small agent servers often do not read). The server verifies
/// the expectation when it is dropped at the end of the test.
async fn agent(reply: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/run"))
        .and(header("content-type", "application/json"))
        .and(header_exists("content-length"))
        .and(|r: &Request| !r.headers.contains_key("transfer-encoding"))
        .and(body_json(task(0)))
        .respond_with(reply)
        .expect(1)
        .named("POST /run with the task")
        .mount(&server)
        .await;
    server
}

fn http(server: &MockServer) -> Handler {
    Handler::new(HandlerSpec::Http(format!("{}/run", server.uri())), None)
}

#[tokio::test]
async fn http_posts_task_and_reads_result() {
    let server = agent(ResponseTemplate::new(200).set_body_json(json!({
        "target_price": 95.0,
        "findings": [{"finding": "x", "confidence": 0.5}]
    })))
    .await;
    let out = http(&server).run(&task(0)).await.unwrap();
    assert_eq!(out.output, json!({"target_price": 95.0}));
    assert_eq!(out.findings.len(), 1);
}

#[tokio::test]
async fn http_statuses_are_classified() {
    for (status, class) in [
        (503, ErrorClass::Transient),
        (500, ErrorClass::Transient),
        (429, ErrorClass::Transient),
        (400, ErrorClass::Permanent),
        (404, ErrorClass::Permanent),
    ] {
        let server = agent(ResponseTemplate::new(status).set_body_string("down")).await;
        let e = http(&server).run(&task(0)).await.unwrap_err();
        assert_eq!(e.class, class, "{status}: {e:?}");
        assert_eq!(e.error_type, "http_status", "{status}: {e:?}");
        assert!(
            e.message.contains(&status.to_string()) && e.message.contains("down"),
            "{}",
            e.message
        );
    }
    // Nothing listening: a transient connection error.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = Handler::new(
        HandlerSpec::Http(format!("http://127.0.0.1:{port}/x")),
        None,
    )
    .run(&task(0))
    .await
    .unwrap_err();
    assert_eq!(e.error_type, "connection_error");
    assert_eq!(e.class, ErrorClass::Transient);
}

/// An error status whose body is the agents' error object keeps its class,
/// type and data source, as an exec handler's does.
#[tokio::test]
async fn http_error_body_is_the_task_error() {
    let server = agent(ResponseTemplate::new(502).set_body_json(json!({"error": {
        "class": "transient", "error_type": "quota_exceeded",
        "message": "Koyfin quota 1000/1000", "data_source": "koyfin"
    }})))
    .await;
    let e = http(&server).run(&task(0)).await.unwrap_err();
    assert_eq!(e.class, ErrorClass::Transient);
    assert_eq!(e.error_type, "quota_exceeded");
    assert_eq!(e.data_source.as_deref(), Some("koyfin"));
}

/// A 2xx body that is not JSON is a permanent `bad_output`.
#[tokio::test]
async fn http_success_without_json_is_bad_output() {
    let server = agent(ResponseTemplate::new(200).set_body_string("not-json")).await;
    let e = http(&server).run(&task(0)).await.unwrap_err();
    assert_eq!(e.class, ErrorClass::Permanent);
    assert_eq!(e.error_type, "bad_output");
}

/// An endpoint slower than the task's `timeout_ms` is a transient
/// `timeout`, and the worker does not wait for the reply.
#[tokio::test]
async fn http_timeout_is_transient() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/run"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({}))
                .set_delay(Duration::from_secs(5)),
        )
        .expect(1)
        .mount(&server)
        .await;
    let started = Instant::now();
    let e = http(&server).run(&task(200)).await.unwrap_err();
    assert_eq!(e.error_type, "timeout");
    assert_eq!(e.class, ErrorClass::Transient);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

/// An exec handler printing 600 KiB of JSON fails permanently, naming the
/// size and the limit; the same command under a larger limit succeeds.
#[tokio::test]
async fn exec_output_over_the_limit_is_a_permanent_failure() {
    // {"blob":"xxx…"} is 11 bytes of JSON around the string.
    let cmd = "python3 -c 'import json; print(json.dumps({\"blob\": \"x\" * (614400 - 11)}))'";
    let e = exec(cmd)
        .with_max_output_bytes(262_144)
        .run(&task(0))
        .await
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::Permanent);
    assert_eq!(e.error_type, "output_too_large");
    assert_eq!(
        e.message,
        "output is 614,400 bytes, over worker.max_output_bytes = 262,144"
    );
    let out = exec(cmd)
        .with_max_output_bytes(1 << 20)
        .run(&task(0))
        .await
        .unwrap();
    assert_eq!(out.output["blob"].as_str().unwrap().len(), 614_389);
}

#[tokio::test]
async fn http_output_over_the_limit_is_a_permanent_failure() {
    let server = agent(
        ResponseTemplate::new(200)
            .set_body_json(json!({"target_price": 95.0, "notes": "0123456789"})),
    )
    .await;
    let e = http(&server)
        .with_max_output_bytes(20)
        .run(&task(0))
        .await
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::Permanent);
    assert_eq!(e.error_type, "output_too_large");
    assert!(
        e.message.contains("over worker.max_output_bytes = 20"),
        "{}",
        e.message
    );
}

/// A cancelled exec run (the future dropped, as on a lost lease or a
/// time-out) kills the command's whole process group, not only the shell.
#[tokio::test]
async fn a_cancelled_exec_run_kills_the_commands_children() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    // The shell forks `sleep` (not exec'd) and records the sleeper's pid.
    let cmd = format!(
        "sleep 30 & echo $! > {p}; wait; echo '{{}}'",
        p = pid_file.display()
    );
    let h = exec(&cmd);
    let t = task(0);
    let mut run = Box::pin(h.run(&t));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let pid: i32 = loop {
        tokio::select! {
            r = &mut run => panic!("the command finished: {r:?}"),
            _ = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
        }
        if let Some(p) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            break p;
        }
        assert!(std::time::Instant::now() < deadline, "no pid written");
    };
    drop(run);
    let alive = |pid: i32| {
        // Gone, or a zombie waiting for its reaper (init), is not running.
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => !stat
                .rsplit(')')
                .next()
                .is_some_and(|rest| rest.trim_start().starts_with('Z')),
            Err(_) => false,
        }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while alive(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "the command's child {pid} survived the cancellation"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}
