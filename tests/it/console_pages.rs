//! The console's overview, workflow and plan pages and its live updates
//! over HTTP against a real stack (issue 13): a coordinator, noop workers
//! and a `caucus-console` process on a free loopback port with a page size
//! of 5.
//!
//! - `/`: every workflow held across the pages (no row twice), filters by
//!   state, pipeline and item, the counts, the agents section and the live
//!   bottleneck (an agent type without workers), the table fragment; a bad
//!   state and a bad cursor are 400s naming them;
//! - `/workflows/<id>`: the task table, the Gantt's actual bars, the
//!   actions; an unknown id is a 404 naming it; pause, resume and re-run
//!   from its forms (403 without the CSRF token);
//! - `/plan`: the planner's makespan, critical path, bottleneck and Gantt;
//!   bad capacities are a 400;
//! - `/events`: an `event: workflow` naming a workflow that completed.

use std::time::{Duration, Instant};

use caucus_harness::{free_port, Service, Stack};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{call, coordinator, eventually, pipeline, wait_state, worker, Api};

use crate::console_actions::http::Http;

/// The console's page size in these tests.
const PAGE: usize = 5;

async fn console(stack: &Stack) -> (Service, Http, String) {
    let listen = format!("127.0.0.1:{}", free_port());
    let svc = stack
        .service("caucus-console")
        .env("CAUCUS_CONSOLE_LISTEN", &listen)
        .env("CAUCUS_CONSOLE_PAGE_SIZE", PAGE.to_string())
        .env("CAUCUS_TELEMETRY_LOG_LEVEL", "info")
        .spawn();
    let http = Http::connect(&listen).await;
    (svc, http, listen)
}

/// Submits `items` through `pipeline` (gates wait for a person).
async fn submit(api: &Api, items: &[&str], pipeline: Value) -> Vec<String> {
    let r = call(
        api,
        "submit",
        json!({"items": items, "pipeline": pipeline, "time_unit_ms": 20}),
    )
    .await
    .expect("submit");
    r["workflow_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// The workflow ids of a page's `tr[data-workflow-id]` rows, in order.
fn rows(body: &str) -> Vec<String> {
    let marker = "data-workflow-id=\"";
    body.match_indices(marker)
        .map(|(at, _)| {
            let rest = &body[at + marker.len()..];
            rest[..rest.find('"').unwrap()].to_string()
        })
        .collect()
}

/// The `href` of the `#next-page` link, HTML-unescaped.
fn next_link(body: &str) -> Option<String> {
    let at = body.find("id=\"next-page\"")?;
    let tag_start = body[..at].rfind('<')?;
    let tag = &body[tag_start..at + body[at..].find('>')?];
    let h = tag.find("href=\"")? + 6;
    let href = &tag[h..h + tag[h..].find('"')?];
    Some(href.replace("&amp;", "&"))
}

/// Every row of every page from `first`, following "Next page".
async fn all_rows(http: &mut Http, first: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut link = Some(first.to_string());
    while let Some(path) = link {
        let page = http.get(&path).await;
        assert_eq!(page.status, 200, "GET {path}: {}", page.body);
        let r = rows(&page.body);
        assert!(
            r.len() <= PAGE,
            "{path}: {} rows on a page of {PAGE}",
            r.len()
        );
        out.extend(r);
        link = next_link(&page.body);
        assert!(out.len() < 100, "pages never end: {out:?}");
    }
    out
}

/// Reads `/events` until a `workflow` event names `wf` as `state`.
async fn wait_event(stream: &mut TcpStream, wf: &str, state: &str, timeout: Duration) -> String {
    let deadline = Instant::now() + timeout;
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    loop {
        for block in seen.split("\n\n") {
            if block.contains("event: workflow")
                && block.contains(wf)
                && block.contains(&format!("\"state\":\"{state}\""))
            {
                return block.to_string();
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let n = tokio::time::timeout(left, stream.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("no `workflow` event for {wf} {state}: {seen}"))
            .expect("read /events");
        assert!(n > 0, "/events closed: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
}

/// Opens `/events` and waits for its opening comment (the console is
/// subscribed from then on).
async fn open_events(addr: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let req = format!("GET /events HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut head = String::new();
    let mut buf = [0u8; 1024];
    let deadline = Instant::now() + Duration::from_secs(10);
    while !head.contains(": live") {
        let left = deadline.saturating_duration_since(Instant::now());
        let n = tokio::time::timeout(left, s.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("/events never opened: {head}"))
            .unwrap();
        assert!(n > 0, "/events closed: {head}");
        head.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/event-stream"), "{head}");
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overview_workflow_and_plan_pages_and_live_updates() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let _w = worker(&stack, "quick", 4, "noop", &[]);
    let (_console, mut http, addr) = console(&stack).await;
    let api = Api::connect(&stack).await;

    // Live: a workflow's completion reaches an open /events stream.
    let mut events = open_events(&addr).await;
    let quick = pipeline("console-quick", json!([{"name": "one", "agent": "quick"}]));
    let first = submit(&api, &["LIVE"], quick.clone()).await.remove(0);
    let block = wait_event(&mut events, &first, "completed", Duration::from_secs(20)).await;
    let heard = chrono::Utc::now();
    // Within a second of the completion the coordinator recorded (same
    // machine, same clock).
    let w = api.status(std::slice::from_ref(&first)).await.remove(0);
    let finished: chrono::DateTime<chrono::Utc> = w["finished_at"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no finished_at: {w}"));
    let lag = heard - finished;
    println!(
        "live: {block:?} {} ms after the completion",
        lag.num_milliseconds()
    );
    assert!(
        lag < chrono::Duration::seconds(1),
        "the event came {lag} after the completion"
    );

    // More workflows than a page: 6 more quick ones, one at a gate, one
    // whose agent type has no worker (held ready: the bottleneck).
    let items = ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6"];
    let mut quick_ids = submit(&api, &items, quick).await;
    api.wait_completed(&quick_ids, Duration::from_secs(30))
        .await;
    quick_ids.push(first.clone());
    let gated = pipeline(
        "console-gated",
        json!([{"name": "a", "agent": "quick"},
               {"name": "review", "kind": "gate", "depends_on": ["a"]},
               {"name": "b", "agent": "quick", "depends_on": ["review"]}]),
    );
    let gated_id = submit(&api, &["GATED"], gated).await.remove(0);
    let held = pipeline("console-held", json!([{"name": "wait", "agent": "idle"}]));
    let held_id = submit(&api, &["HELD"], held).await.remove(0);
    eventually("the gate to open", Duration::from_secs(20), || async {
        let w = api.status(std::slice::from_ref(&gated_id)).await.pop()?;
        (!w["open_gates"].as_array()?.is_empty()).then_some(())
    })
    .await;

    // The overview: pages of 5 covering all 9 workflows once.
    let page = http.get("/").await;
    assert_eq!(page.status, 200, "{}", page.body);
    for want in [
        "id=\"workflows\"",
        "id=\"agents\"",
        "data-agent-type=\"quick\"",
        "id=\"bottleneck\"",
        "id=\"counts\"",
        "9 workflows held",
        "new EventSource('/events')",
    ] {
        assert!(page.body.contains(want), "/ lacks {want}: {}", page.body);
    }
    assert_eq!(rows(&page.body).len(), PAGE, "{}", page.body);
    let all = all_rows(&mut http, "/").await;
    let mut want: Vec<String> = quick_ids.clone();
    want.push(gated_id.clone());
    want.push(held_id.clone());
    let mut got = all.clone();
    got.sort();
    want.sort();
    assert_eq!(got, want, "the pages: {all:?}");
    // The bottleneck: `idle` has a ready task and no capacity.
    let bottleneck = &page.body[page.body.find("id=\"bottleneck\"").unwrap()..];
    let bottleneck = &bottleneck[..bottleneck.find("</p>").unwrap()];
    assert!(bottleneck.contains("idle"), "{bottleneck}");

    // Filters.
    let completed = all_rows(&mut http, "/?state=completed").await;
    let mut c = completed.clone();
    c.sort();
    let mut q = quick_ids.clone();
    q.sort();
    assert_eq!(c, q, "state=completed");
    let page = http.get("/?state=completed").await;
    assert!(
        page.body.matches("class=\"state\"").count() == PAGE
            && page
                .body
                .matches("<td class=\"state\">completed</td>")
                .count()
                == PAGE,
        "{}",
        page.body
    );
    assert_eq!(
        all_rows(&mut http, "/?pipeline=console-gated").await,
        vec![gated_id.clone()]
    );
    assert_eq!(
        all_rows(&mut http, "/?item=HELD").await,
        vec![held_id.clone()]
    );
    assert_eq!(
        all_rows(&mut http, "/?pipeline=console-quick&item=Q3").await,
        vec![quick_ids[2].clone()]
    );
    assert!(all_rows(&mut http, "/?state=failed").await.is_empty());
    let frag = http.get("/?fragment=workflows&item=GATED").await;
    assert_eq!(frag.status, 200, "{}", frag.body);
    assert!(
        frag.body.starts_with("<div id=\"workflows-region\">"),
        "{}",
        frag.body
    );
    assert!(!frag.body.contains("<html"), "{}", frag.body);
    assert!(frag.body.contains("gate open"), "{}", frag.body);
    let bad = http.get("/?state=bogus").await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("bogus"), "{}", bad.body);
    let bad = http.get("/?cursor=nonsense").await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(bad.body.contains("nonsense"), "{}", bad.body);

    // One workflow's page.
    let path = format!("/workflows/{gated_id}");
    let page = http.get(&path).await;
    assert_eq!(page.status, 200, "{}", page.body);
    for want in [
        gated_id.as_str(),
        "id=\"tasks\"",
        "data-task=\"a\"",
        "data-task=\"review\"",
        "awaiting_approval",
        "<svg class=\"gantt\"",
        "class=\"actual\" data-row=\"a\"",
        "id=\"pause-button\"",
        "id=\"resume-button\"",
        "id=\"rerun-button\"",
        "id=\"failures\"",
    ] {
        assert!(
            page.body.contains(want),
            "{path} lacks {want}: {}",
            page.body
        );
    }
    let page = http.get("/workflows/NO-SUCH-WORKFLOW").await;
    assert_eq!(page.status, 404, "{}", page.body);
    assert!(page.body.contains("NO-SUCH-WORKFLOW"), "{}", page.body);

    // Pause and resume the held workflow from its page.
    let held_path = format!("/workflows/{held_id}");
    let r = http
        .post(&format!("{held_path}/pause"), &[("reason", "x")])
        .await;
    assert_eq!(r.status, 403, "no CSRF token: {}", r.body);
    assert_ne!(
        api.status(std::slice::from_ref(&held_id)).await[0]["state"],
        "paused"
    );
    let csrf = http.csrf(&held_path).await;
    let r = http
        .post(
            &format!("{held_path}/pause"),
            &[("csrf", &csrf), ("reason", "source down")],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.location(), format!("{held_path}?done=paused"));
    let w = wait_state(&api, &held_id, "paused").await;
    assert_eq!(w["pause"]["reason"], "source down", "{w}");
    let page = http.get(&format!("{held_path}?done=paused")).await;
    assert!(page.body.contains("source down"), "{}", page.body);
    let r = http
        .post(&format!("{held_path}/resume"), &[("csrf", &csrf)])
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.location(), format!("{held_path}?done=resumed"));
    eventually(
        "the held workflow to resume",
        Duration::from_secs(20),
        || async {
            let w = api.status(std::slice::from_ref(&held_id)).await.pop()?;
            (w["state"] != "paused" && w["state"] != "resuming").then_some(())
        },
    )
    .await;

    // Re-run the gated workflow's first stage.
    let r = http
        .post(&format!("{path}/rerun"), &[("csrf", &csrf), ("tasks", "a")])
        .await;
    assert_eq!(r.status, 400, "a re-run without a reason: {}", r.body);
    assert!(r.body.contains("reason"), "{}", r.body);
    let r = http
        .post(
            &format!("{path}/rerun"),
            &[("csrf", &csrf), ("tasks", "a"), ("reason", "new data")],
        )
        .await;
    assert_eq!(r.status, 303, "{}", r.body);
    assert_eq!(r.location(), format!("{path}?done=rerun"));
    let w = api.status(std::slice::from_ref(&gated_id)).await.remove(0);
    assert_eq!(w["reruns"].as_array().map(Vec::len), Some(1), "{w}");
    let r = http
        .post(
            "/workflows/NO-SUCH-WORKFLOW/pause",
            &[("csrf", &csrf), ("reason", "x")],
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
    assert!(r.body.contains("NO-SUCH-WORKFLOW"), "{}", r.body);

    // The planner.
    let page = http.get("/plan").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("id=\"plan-form\""), "{}", page.body);
    let csrf = http.csrf("/plan").await;
    let r = http
        .post(
            "/plan",
            &[
                ("csrf", &csrf),
                ("items", "AAPL, MSFT GOOG"),
                ("pipeline", "stock-analysis"),
                ("capacities", "financial=1"),
            ],
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    for want in [
        "Plan for 3 items through stock-analysis",
        "id=\"makespan\"",
        "id=\"critical-path\"",
        "id=\"bottleneck\"",
        "<svg class=\"gantt\"",
        "class=\"planned\"",
        "id=\"utilization\"",
    ] {
        assert!(r.body.contains(want), "the plan lacks {want}: {}", r.body);
    }
    let r = http
        .post(
            "/plan",
            &[
                ("csrf", &csrf),
                ("items", "AAPL"),
                ("pipeline", "stock-analysis"),
                ("capacities", "financial=many"),
            ],
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.body.contains("financial=many"), "{}", r.body);
    let r = http
        .post(
            "/plan",
            &[("items", "AAPL"), ("pipeline", "stock-analysis")],
        )
        .await;
    assert_eq!(r.status, 403, "no CSRF token: {}", r.body);
}
