//! The console's authentication and process against real servers (issue
//! 13 item 3):
//!
//! - `console.auth = "users"`: a user added by `caucus console add-user`
//!   logs in; a wrong password and an unknown name get the same 401; the
//!   session cookie is HttpOnly and SameSite=Lax, names the person on the
//!   page and ends after `session_ttl` (checked by the server) or at
//!   logout; POSTs without the CSRF token are 403, without a session 401;
//!   `/healthz`, `caucus health console`, a clean drain on SIGTERM;
//! - `"header"`: the trusted header names the person; without it, 403;
//! - `"none"`: the console refuses a non-loopback listen address (exit 2);
//! - with `caucus auth init` credentials, the console runs as the
//!   `console` NATS user, a gate approved through it is recorded under the
//!   person's name, its live updates (`/events`) see the workflow change,
//!   and the server logged no permission violation.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use caucus_harness::{bin_path, free_port, read_env_file, SecuredStack, Service, Stack};
use caucus_shared::auth::{init, InitOptions};
use caucus_shared::subjects::Subjects;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{call, caucus, coordinator, eventually, fast_env, Api};

/// One HTTP answer.
#[derive(Debug)]
struct Answer {
    status: u16,
    /// Lower-case name → every value, in order.
    headers: BTreeMap<String, Vec<String>>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.last())
            .map(String::as_str)
            .unwrap_or("")
    }

    fn set_cookie(&self, name: &str) -> Option<&str> {
        self.headers
            .get("set-cookie")?
            .iter()
            .find(|c| c.starts_with(&format!("{name}=")))
            .map(String::as_str)
    }

    /// The `csrf` field of the page's first form.
    fn csrf(&self) -> String {
        let marker = "name=\"csrf\" value=\"";
        let at = self
            .body
            .find(marker)
            .unwrap_or_else(|| panic!("no CSRF field: {}", self.body))
            + marker.len();
        self.body[at..].split('"').next().unwrap().to_string()
    }
}

/// A cookie-keeping client over fresh HTTP/1.1 connections.
struct Browser {
    addr: String,
    cookies: BTreeMap<String, String>,
    headers: Vec<(String, String)>,
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Browser {
    fn new(addr: &str) -> Browser {
        Browser {
            addr: addr.to_string(),
            cookies: BTreeMap::new(),
            headers: Vec::new(),
        }
    }

    async fn get(&mut self, path: &str) -> Answer {
        self.send("GET", path, None).await
    }

    async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Answer {
        let body = fields
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        self.send("POST", path, Some(body)).await
    }

    async fn send(&mut self, method: &str, path: &str, body: Option<String>) -> Answer {
        let mut req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.addr
        );
        if !self.cookies.is_empty() {
            let c: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            req.push_str(&format!("Cookie: {}\r\n", c.join("; ")));
        }
        for (k, v) in &self.headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        let body = body.unwrap_or_default();
        if method == "POST" {
            req.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        req.push_str(&body);
        let mut s = TcpStream::connect(&self.addr).await.expect("connect");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut raw))
            .await
            .expect("answer within 30 s")
            .unwrap();
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, rest) = text.split_once("\r\n\r\n").expect("HTTP head");
        let mut lines = head.lines();
        let status: u16 = lines
            .next()
            .unwrap()
            .split(' ')
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for l in lines {
            if let Some((k, v)) = l.split_once(':') {
                headers
                    .entry(k.trim().to_ascii_lowercase())
                    .or_default()
                    .push(v.trim().to_string());
            }
        }
        let body = if headers
            .get("transfer-encoding")
            .is_some_and(|v| v.iter().any(|v| v.contains("chunked")))
        {
            dechunk(rest)
        } else {
            rest.to_string()
        };
        for c in headers.get("set-cookie").into_iter().flatten() {
            let pair = c.split(';').next().unwrap();
            let (k, v) = pair.split_once('=').unwrap();
            let gone = c.to_ascii_lowercase().contains("max-age=0") || v.is_empty();
            if gone {
                self.cookies.remove(k);
            } else {
                self.cookies.insert(k.to_string(), v.to_string());
            }
        }
        Answer {
            status,
            headers,
            body,
        }
    }
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
    out
}

/// `caucus console add-user NAME --users-file FILE --password-stdin`.
fn add_user(file: &std::path::Path, name: &str, password: &str) -> (i32, String) {
    let mut child = Command::new(bin_path("caucus"))
        .args([
            "console",
            "add-user",
            name,
            "--password-stdin",
            "--users-file",
        ])
        .arg(file)
        .env("CAUCUS_HOME", "/nonexistent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run caucus");
    writeln!(child.stdin.take().unwrap(), "{password}").unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn console(stack: &Stack, listen: &str, env: &[(&str, &str)]) -> Service {
    let mut b = stack
        .service("caucus-console")
        .env("CAUCUS_CONSOLE_LISTEN", listen)
        .env("CAUCUS_TELEMETRY_LOG_LEVEL", "info");
    for (k, v) in env {
        b = b.env(*k, *v);
    }
    b.start()
}

const TTL: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_log_in_sessions_expire_and_posts_need_the_csrf_token() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let tmp = tempfile::tempdir().unwrap();
    let users = tmp.path().join("users");
    let (code, out) = add_user(&users, "alice", "correct horse");
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("added alice"), "{out}");
    let (code, out) = add_user(&users, "bad.name", "x");
    assert_ne!(code, 0, "a name that is no subject token is refused: {out}");
    let text = std::fs::read_to_string(&users).unwrap();
    assert!(text.contains("alice:$argon2id$") && !text.contains("correct horse"));

    let listen = format!("127.0.0.1:{}", free_port());
    let users_path = users.display().to_string();
    let mut svc = console(
        &stack,
        &listen,
        &[
            ("CAUCUS_CONSOLE_AUTH", "users"),
            ("CAUCUS_CONSOLE_USERS_FILE", &users_path),
            ("CAUCUS_CONSOLE_SESSION_TTL", "3s"),
            ("CAUCUS_SHUTDOWN_GRACE", "5s"),
        ],
    );
    let mut b = Browser::new(&listen);

    // Not logged in: pages lead to the login form, actions are 401.
    let r = b.get("/gates").await;
    assert_eq!((r.status, r.header("location")), (303, "/login"), "{r:?}");
    let r = b.post("/gates/W-1/decide", &[("action", "approve")]).await;
    assert_eq!(r.status, 401, "{r:?}");
    let form = b.get("/login").await;
    assert_eq!(form.status, 200, "{form:?}");
    assert!(b.cookies.contains_key("caucus_browser"), "{form:?}");
    let csrf = form.csrf();

    // Wrong password and unknown name: the same answer.
    let wrong = b
        .post(
            "/login",
            &[("name", "alice"), ("password", "wrong"), ("csrf", &csrf)],
        )
        .await;
    let unknown = b
        .post(
            "/login",
            &[("name", "mallory"), ("password", "wrong"), ("csrf", &csrf)],
        )
        .await;
    assert_eq!(wrong.status, 401, "{wrong:?}");
    assert_eq!(unknown.status, 401, "{unknown:?}");
    assert!(
        wrong.body.contains("wrong name or password"),
        "{}",
        wrong.body
    );
    assert_eq!(
        wrong.body.replace("alice", "NAME"),
        unknown.body.replace("mallory", "NAME"),
        "the page must not tell which names exist"
    );
    assert!(!b.cookies.contains_key("caucus_session"));
    // The login form itself needs its CSRF token.
    let r = b
        .post(
            "/login",
            &[("name", "alice"), ("password", "correct horse")],
        )
        .await;
    assert_eq!(r.status, 403, "{r:?}");
    assert!(r.body.contains("missing or wrong CSRF token"), "{}", r.body);

    let before_login = Instant::now();
    let ok = b
        .post(
            "/login",
            &[
                ("name", "alice"),
                ("password", "correct horse"),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!((ok.status, ok.header("location")), (303, "/"), "{ok:?}");
    let cookie = ok.set_cookie("caucus_session").expect("session cookie");
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Lax"), "{cookie}");
    assert!(
        !cookie.contains("alice.") || cookie.len() > 80,
        "signed: {cookie}"
    );

    let page = b.get("/gates").await;
    assert_eq!(page.status, 200, "{page:?}");
    assert!(
        page.body.contains("alice"),
        "the page names who is logged in"
    );
    let session_csrf = page.csrf();
    assert_ne!(session_csrf, csrf, "the token is bound to the session");
    // A POST without (or with the login form's) token is refused before
    // anything reaches the services.
    for token in ["", csrf.as_str()] {
        let r = b
            .post(
                "/gates/W-nope/decide",
                &[("action", "approve"), ("rationale", "ok"), ("csrf", token)],
            )
            .await;
        assert_eq!(r.status, 403, "token {token:?}: {r:?}");
        assert!(r.body.contains("missing or wrong CSRF token"), "{}", r.body);
    }
    // With it, the request passes the console's checks and reaches the
    // services (whose answer about the unknown workflow is another
    // module's business).
    let r = b
        .post(
            "/gates/W-nope/decide",
            &[
                ("action", "approve"),
                ("rationale", "ok"),
                ("csrf", &session_csrf),
            ],
        )
        .await;
    assert!(![401, 403].contains(&r.status), "{r:?}");
    assert!(!r.body.contains("CSRF"), "{}", r.body);
    // A forged session cookie is no session.
    let mut forged = Browser::new(&listen);
    forged.cookies = b.cookies.clone();
    let s = forged.cookies.get_mut("caucus_session").unwrap();
    *s = s.replacen("alice", "admin", 1);
    let r = forged.get("/gates").await;
    assert_eq!(r.header("location"), "/login", "{r:?}");

    // The server ends the session after its lifetime, whatever the
    // browser keeps.
    let expired_at = eventually("the session to expire", Duration::from_secs(15), || {
        let addr = listen.clone();
        let cookies = b.cookies.clone();
        async move {
            let mut probe = Browser::new(&addr);
            probe.cookies = cookies;
            let r = probe.get("/gates").await;
            (r.status == 303).then(Instant::now)
        }
    })
    .await;
    assert!(
        expired_at.duration_since(before_login) >= TTL,
        "expired after {:?}, before the {TTL:?} lifetime",
        expired_at.duration_since(before_login)
    );
    let r = b
        .post("/gates/W-nope/decide", &[("csrf", &session_csrf)])
        .await;
    assert_eq!(r.status, 401, "an expired session cannot act: {r:?}");
    assert!(r.body.contains("expired"), "{}", r.body);

    // Log in again, then out: the cookie is dropped.
    let csrf = b.get("/login").await.csrf();
    let ok = b
        .post(
            "/login",
            &[
                ("name", "alice"),
                ("password", "correct horse"),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(ok.status, 303);
    let session_csrf = b.get("/gates").await.csrf();
    let r = b.post("/logout", &[]).await;
    assert_eq!(r.status, 403, "logout needs the token too: {r:?}");
    let r = b.post("/logout", &[("csrf", &session_csrf)]).await;
    assert_eq!((r.status, r.header("location")), (303, "/login"), "{r:?}");
    assert!(!b.cookies.contains_key("caucus_session"), "{r:?}");
    assert_eq!(b.get("/gates").await.header("location"), "/login");
    let r = b.get("/events").await;
    assert_eq!(r.header("location"), "/login", "live events need a login");

    // The process: health over HTTP and NATS, then a clean drain.
    let r = b.get("/healthz").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body.contains("\"status\":\"ok\""), "{}", r.body);
    let (code, out, err) = caucus(&stack, &["health", "console"]);
    assert_eq!(code, 0, "caucus health console: {out}{err}");
    // An open page's event stream ends with the drain instead of holding
    // it for the whole grace (5 s here).
    let csrf = b.get("/login").await.csrf();
    let ok = b
        .post(
            "/login",
            &[
                ("name", "alice"),
                ("password", "correct horse"),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(ok.status, 303);
    let cookies: Vec<String> = b.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let who = format!("Cookie: {}", cookies.join("; "));
    let stream = events_until(&listen, &who, "\r\n0\r\n\r\n".into()).await;
    let t = Instant::now();
    svc.sigterm();
    let status = svc.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "{}", svc.output());
    assert!(
        t.elapsed() < Duration::from_secs(4),
        "drained in {:?}",
        t.elapsed()
    );
    let text = stream.await.unwrap();
    assert!(
        text.ends_with("\r\n0\r\n\r\n"),
        "the stream ended cleanly: {text:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_header_names_the_person() {
    let stack = Stack::start();
    let _c = coordinator(&stack, &[]);
    let listen = format!("127.0.0.1:{}", free_port());
    let _svc = console(
        &stack,
        &listen,
        &[
            ("CAUCUS_CONSOLE_AUTH", "header"),
            ("CAUCUS_CONSOLE_TRUSTED_HEADER", "X-Remote-User"),
        ],
    );
    let mut anon = Browser::new(&listen);
    let r = anon.get("/gates").await;
    assert_eq!(r.status, 403, "{r:?}");
    assert!(r.body.contains("X-Remote-User"), "{}", r.body);

    let mut bob = Browser::new(&listen);
    bob.headers.push(("X-Remote-User".into(), "bob".into()));
    let r = bob.get("/login").await;
    assert_eq!(
        (r.status, r.header("location")),
        (303, "/"),
        "no login page"
    );
    let page = bob.get("/gates").await;
    assert_eq!(page.status, 200, "{page:?}");
    assert!(page.body.contains("bob"), "{}", page.body);
    let r = bob
        .post(
            "/gates/W-nope/decide",
            &[("action", "approve"), ("rationale", "ok")],
        )
        .await;
    assert_eq!(r.status, 403, "{r:?}");

    let mut odd = Browser::new(&listen);
    odd.headers
        .push(("X-Remote-User".into(), "bob.smith".into()));
    let r = odd.get("/gates").await;
    assert_eq!(r.status, 403, "a name that is no subject token: {r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_authentication_it_listens_on_loopback_only() {
    let stack = Stack::start();
    let mut svc = stack
        .service("caucus-console")
        .env("CAUCUS_CONSOLE_LISTEN", format!("0.0.0.0:{}", free_port()))
        .spawn();
    let status = svc.wait_exit(Duration::from_secs(20));
    let out = svc.output();
    assert_eq!(status.code(), Some(2), "{out}");
    assert!(out.contains("refusing to listen on 0.0.0.0"), "{out}");
    assert!(out.contains("console.auth"), "says how to fix it: {out}");

    // On loopback without authentication, forms still carry a token.
    let listen = format!("127.0.0.1:{}", free_port());
    let _c = coordinator(&stack, &[]);
    let _svc = console(&stack, &listen, &[]);
    let mut b = Browser::new(&listen);
    let page = b.get("/gates").await;
    assert_eq!(page.status, 200, "{page:?}");
    let r = b
        .post(
            "/gates/W-nope/decide",
            &[("action", "approve"), ("rationale", "ok")],
        )
        .await;
    assert_eq!(r.status, 403, "{r:?}");
}

/// Opens `GET /events` with the header line `who` (the trusted header or
/// the session cookie); returns once the stream says it is live, and a
/// task that ends with the stream's text once it holds `needle` (or at
/// its end, or after 20 s).
async fn events_until(addr: &str, who: &str, needle: String) -> tokio::task::JoinHandle<String> {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let req = format!(
        "GET /events HTTP/1.1\r\nHost: {addr}\r\n{who}\r\nAccept: text/event-stream\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(20);
    while !text.contains(": live") {
        let left = deadline.saturating_duration_since(Instant::now());
        let n = tokio::time::timeout(left, s.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("/events never said it is live: {text}"))
            .unwrap();
        assert!(n > 0, "/events closed: {text}");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    tokio::spawn(async move {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !text.contains(&needle) {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, s.read(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => text.push_str(&String::from_utf8_lossy(&buf[..n])),
                _ => break,
            }
        }
        text
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_ends_a_draining_console_at_once() {
    let stack = Stack::start();
    let listen = format!("127.0.0.1:{}", free_port());
    let mut svc = console(&stack, &listen, &[("CAUCUS_SHUTDOWN_GRACE", "60s")]);
    // A request whose body never completes keeps the drain waiting.
    let mut slow = TcpStream::connect(&listen).await.unwrap();
    slow.write_all(
        format!(
            "POST /login HTTP/1.1\r\nHost: {listen}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\nname="
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    slow.flush().await.unwrap();
    // By the time a request on another connection, sent after it, is
    // answered, the server has read this one's head and its handler
    // waits for the rest of the body.
    assert_eq!(Browser::new(&listen).get("/healthz").await.status, 200);
    svc.sigterm();
    svc.wait_for_output("shutting down", Duration::from_secs(10));
    assert!(svc.running(), "still draining: {}", svc.output());
    let t = Instant::now();
    svc.sigterm();
    let status = svc.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(130), "{}", svc.output());
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    drop(slow);
}

/// Publish or subscription violations the NATS server logged.
fn violations(stack: &SecuredStack) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(stack.nats.dir()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".log") {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            out.extend(
                text.lines()
                    .filter(|l| l.contains("Violation"))
                    .map(String::from),
            );
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_roles_the_console_records_decisions_under_the_persons_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("auth");
    init(&InitOptions {
        dir: dir.clone(),
        prefix: "caucus".into(),
        operators: vec![],
        rotate: false,
    })
    .expect("caucus auth init");
    let env = read_env_file(&dir.join("console.env"));
    assert!(
        env.iter()
            .any(|(k, v)| k == "CAUCUS_CONSOLE_SESSION_SECRET" && v.len() >= 32),
        "console.env carries the session key"
    );
    let stack = SecuredStack::start(&dir);
    let start = |bin: &str, file: &str, extra: &[(&str, &str)]| {
        let mut b = stack.service(bin, file);
        for (k, v) in fast_env().into_iter().chain(extra.iter().copied()) {
            b = b.env(k, v);
        }
        b.start()
    };
    let _c = start("caucus-coordinator", "coordinator.env", &[]);
    let _f = start("caucus-facilitator", "facilitator.env", &[]);
    let listen = format!("127.0.0.1:{}", free_port());
    let _k = start(
        "caucus-console",
        "console.env",
        &[
            ("CAUCUS_CONSOLE_LISTEN", &listen),
            ("CAUCUS_CONSOLE_AUTH", "header"),
        ],
    );

    let admin_env = read_env_file(&dir.join("operator.env"));
    let get = |k: &str| {
        admin_env
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    let nats = async_nats::ConnectOptions::with_user_and_password(
        get("CAUCUS_NATS_USER"),
        get("CAUCUS_NATS_PASSWORD"),
    )
    .connect(stack.nats.url())
    .await
    .expect("connect as operator");
    let api = Api {
        nats,
        subjects: Subjects::default(),
    };
    let pipeline = json!({
        "name": "signed",
        "capacities": {"gated": 1},
        "stages": [
            {"name": "signoff", "kind": "gate"},
            {"name": "after", "agent": "gated", "depends_on": ["signoff"]}
        ]
    });
    let r = call(
        &api,
        "submit",
        json!({"items": ["ACME"], "pipeline": pipeline, "time_unit_ms": 20}),
    )
    .await
    .expect("submit");
    let wf = r["workflow_ids"][0].as_str().unwrap().to_string();
    eventually("the gate to open", Duration::from_secs(30), || {
        let (api, wf) = (&api, wf.clone());
        async move {
            let g = call(api, "gate", json!({"workflow_id": wf})).await.ok()?;
            Some(g)
        }
    })
    .await;

    // Live updates follow the workflow records under the console role.
    let live = events_until(
        &listen,
        "X-Forwarded-User: carol",
        format!("\"workflow_id\":\"{wf}\""),
    )
    .await;
    let mut carol = Browser::new(&listen);
    carol
        .headers
        .push(("X-Forwarded-User".into(), "carol".into()));
    let page = carol.get(&format!("/gates/{wf}")).await;
    assert_eq!(page.status, 200, "{page:?}");
    let csrf = page.csrf();
    let r = carol
        .post(
            &format!("/gates/{wf}/decide"),
            &[
                ("action", "approve"),
                ("rationale", "figures tie out"),
                ("csrf", &csrf),
            ],
        )
        .await;
    assert_eq!(r.status, 303, "{r:?}");
    let gate: Value = eventually("the decision to be stored", Duration::from_secs(10), || {
        let (api, wf) = (&api, wf.clone());
        async move {
            let r = call(api, "status", json!({"ids": [wf], "tasks": true}))
                .await
                .ok()?;
            let t = r["workflows"][0]["tasks"]["signoff"].clone();
            t["gate"]["decision"].is_object().then_some(t)
        }
    })
    .await;
    assert_eq!(gate["gate"]["decision"]["decided_by"], "carol", "{gate}");
    // The record the decision changed reached the page's stream.
    let seen = live.await.unwrap();
    assert!(
        seen.contains(&format!("\"workflow_id\":\"{wf}\"")),
        "the decided workflow's change reached /events: {seen}"
    );
    let refused = violations(&stack);
    assert!(
        refused.is_empty(),
        "permission violations:\n{}",
        refused.join("\n")
    );
}
