//! exec and http handlers against real processes and a real socket.

use caucus_shared::task::{ErrorClass, TaskDispatch};
use caucus_worker::handler::{Handler, HandlerSpec};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

/// A one-shot HTTP server answering `status` with `body`; returns its URL
/// and a handle yielding the request it received.
async fn serve_once(
    status: &'static str,
    body: &'static str,
) -> (String, tokio::task::JoinHandle<String>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/run", l.local_addr().unwrap());
    let h = tokio::spawn(async move {
        let (mut s, _) = l.accept().await.unwrap();
        let mut req = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = s.read(&mut buf).await.unwrap();
            req.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&req).to_string();
            if let Some(i) = text.find("\r\n\r\n") {
                let len: usize = text
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                if req.len() >= i + 4 + len {
                    break;
                }
            }
            if n == 0 {
                break;
            }
        }
        let resp = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(resp.as_bytes()).await.unwrap();
        String::from_utf8_lossy(&req).to_string()
    });
    (url, h)
}

#[tokio::test]
async fn http_posts_task_and_reads_result() {
    let (url, req) = serve_once("200 OK", r#"{"target_price": 95.0}"#).await;
    let h = Handler::new(HandlerSpec::Http(url), None);
    let out = h.run(&task(0)).await.unwrap();
    assert_eq!(out.output["target_price"], 95.0);
    let req = req.await.unwrap();
    assert!(req.starts_with("POST /run"), "{req}");
    assert!(req.contains("\"item\":\"BRK.B\""), "{req}");
}

#[tokio::test]
async fn http_statuses_are_classified() {
    let (url, _r) = serve_once("503 Service Unavailable", "down").await;
    let e = Handler::new(HandlerSpec::Http(url), None)
        .run(&task(0))
        .await
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::Transient);
    assert!(e.message.contains("503"), "{}", e.message);
    let (url, _r) = serve_once("400 Bad Request", "nope").await;
    let e = Handler::new(HandlerSpec::Http(url), None)
        .run(&task(0))
        .await
        .unwrap_err();
    assert_eq!(e.class, ErrorClass::Permanent);
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
    let (url, _r) = serve_once("200 OK", r#"{"target_price": 95.0, "notes": "0123456789"}"#).await;
    let e = Handler::new(HandlerSpec::Http(url), None)
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
