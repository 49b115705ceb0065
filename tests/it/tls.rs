//! TLS end to end (#11): certificates made at run time (rcgen), nats-server
//! with a `tls {}` block and redis-server on a TLS port only, both
//! requiring client certificates; coordinator and workers configured with
//! the CA and a client certificate (`nats.tls_*`, `rediss://` +
//! `redis.tls_*`) running a workflow; and an `http:` agent served over https
//! by a private CA (`worker.http_ca_file`).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use caucus_harness::{free_port, wait_until, Nats, Pki, Service, ServiceBuilder};
use caucus_shared::subjects::Subjects;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;

use crate::common::{fast_env, pipeline, Api};

/// nats-server whose clients must speak TLS and present a certificate
/// signed by the CA (`verify: true`).
fn tls_nats(pki: &Pki) -> Nats {
    Nats::start_with_config(&format!(
        "tls {{\n  cert_file: \"{}\"\n  key_file: \"{}\"\n  ca_file: \"{}\"\n  verify: true\n}}\n",
        pki.file("server.pem"),
        pki.file("server-key.pem"),
        pki.file("ca.pem"),
    ))
}

/// redis-server listening on a TLS port only and requiring client
/// certificates signed by the CA; killed on Drop.
struct TlsRedis {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl TlsRedis {
    fn start(pki: &Pki) -> TlsRedis {
        let bin = caucus_harness::find_binary(
            "CAUCUS_REDIS_SERVER",
            "redis-server",
            "apt-get install -y redis-server",
        );
        let dir = tempfile::Builder::new()
            .prefix("caucus-redis-tls-")
            .tempdir()
            .expect("tempdir");
        // A parallel test can take the free port first: our server then
        // exits, and we try another one.
        for _ in 0..5 {
            let port = free_port();
            let log = dir.path().join(format!("redis-{port}.log"));
            let mut child = Command::new(&bin)
                .args(["--port", "0", "--tls-port", &port.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--tls-cert-file", &pki.file("server.pem")])
                .args(["--tls-key-file", &pki.file("server-key.pem")])
                .args(["--tls-ca-cert-file", &pki.file("ca.pem")])
                .args(["--tls-auth-clients", "yes"])
                .arg("--dir")
                .arg(dir.path())
                .arg("--logfile")
                .arg(&log)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            if ready(&mut child, port, &log) {
                return TlsRedis {
                    child,
                    port,
                    _dir: dir,
                };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "redis-server did not start with a TLS port (built without TLS?); logs in {}",
            dir.keep().display()
        )
    }

    fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.port)
    }
}

/// The server's log said ready and its port takes connections before it
/// exited (`false`: it exited, e.g. its port was taken).
fn ready(child: &mut Child, port: u16, log: &Path) -> bool {
    wait_until(
        &format!("TLS redis-server ready (log {})", log.display()),
        Duration::from_secs(20),
        || {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return Some(false);
            }
            let text = std::fs::read_to_string(log).unwrap_or_default();
            (text.contains("Ready to accept connections")
                && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok())
            .then_some(true)
        },
    )
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a plain-text client sees: the first bytes the server sends,
/// after writing `say` (if any); empty when it closes or stays silent.
fn plain_exchange(port: u16, say: Option<&[u8]>) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    if let Some(bytes) = say {
        let _ = s.write_all(bytes);
    }
    let mut buf = [0u8; 4096];
    let n = s.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Env of a caucus process reaching both servers over TLS with `pki`'s CA.
fn tls_env(pki: &Pki, nats: &Nats, redis: &TlsRedis) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = fast_env()
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.extend([
        ("CAUCUS_NATS_URL".into(), nats.url()),
        ("CAUCUS_NATS_TLS_REQUIRED".into(), "true".into()),
        ("CAUCUS_NATS_TLS_CA_FILE".into(), pki.file("ca.pem")),
        ("CAUCUS_NATS_TLS_CERT_FILE".into(), pki.file("client.pem")),
        (
            "CAUCUS_NATS_TLS_KEY_FILE".into(),
            pki.file("client-key.pem"),
        ),
        ("CAUCUS_REDIS_URL".into(), redis.url()),
        ("CAUCUS_REDIS_TLS_CA_FILE".into(), pki.file("ca.pem")),
        ("CAUCUS_REDIS_TLS_CERT_FILE".into(), pki.file("client.pem")),
        (
            "CAUCUS_REDIS_TLS_KEY_FILE".into(),
            pki.file("client-key.pem"),
        ),
    ]);
    env
}

fn service(bin: &str, env: &[(String, String)], args: &[&str]) -> Service {
    let mut b = ServiceBuilder::new(bin).args(args.iter().copied());
    for (k, v) in env {
        b = b.env(k, v);
    }
    b.start()
}

/// The test's own NATS client: verifies the server with the CA, presents
/// the client certificate.
async fn tls_api(pki: &Pki, nats: &Nats) -> Api {
    let client = async_nats::ConnectOptions::new()
        .require_tls(true)
        .add_root_certificates(pki.path("ca.pem"))
        .add_client_certificate(pki.path("client.pem"), pki.path("client-key.pem"))
        .connect(nats.url())
        .await
        .expect("connect to NATS over TLS");
    Api {
        nats: client,
        subjects: Subjects::default(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workflow_runs_over_tls_to_nats_and_redis() {
    let pki = Pki::generate();
    let nats = tls_nats(&pki);
    let redis = TlsRedis::start(&pki);
    // Both servers really speak TLS only: NATS announces it requires TLS,
    // Redis does not answer a plain-text PING.
    let (nats_hello, redis_reply) = (
        plain_exchange(nats.port(), None),
        plain_exchange(redis.port, Some(b"PING\r\n")),
    );
    assert!(nats_hello.contains("\"tls_required\":true"), "{nats_hello}");
    assert!(!redis_reply.contains("PONG"), "{redis_reply}");
    let env = tls_env(&pki, &nats, &redis);
    let _c = service("caucus-coordinator", &env, &[]);
    let _a = service(
        "caucus-worker",
        &env,
        &["--agent", "alpha", "--slots", "1", "--handler", "noop"],
    );
    let _b = service(
        "caucus-worker",
        &env,
        &["--agent", "beta", "--slots", "1", "--handler", "sleep:10"],
    );
    let api = tls_api(&pki, &nats).await;
    let p = pipeline(
        "tls",
        json!([
            {"name": "x", "agent": "alpha", "expected_duration": 1.0},
            {"name": "y", "agent": "beta", "expected_duration": 1.0, "depends_on": ["x"]}
        ]),
    );
    let ids = api.submit(&["TLS"], p, 10).await;
    let wfs = api.wait_completed(&ids, Duration::from_secs(20)).await;
    assert_eq!(wfs[0]["tasks"]["y"]["state"], "completed", "{}", wfs[0]);
}

/// A one-route https server answering every POST with `{"ok": true}`,
/// counting the requests; its certificate is the CA-signed server one.
async fn https_agent(pki: &Pki, hits: Arc<AtomicUsize>) -> u16 {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![pki.server_cert_der().to_vec().into()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(pki.server_key_der().to_vec().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            let hits = hits.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                if read_request(&mut tls).await.is_some() {
                    hits.fetch_add(1, Ordering::SeqCst);
                    let body = br#"{"ok":true}"#;
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = tls.write_all(head.as_bytes()).await;
                    let _ = tls.write_all(body).await;
                    let _ = tls.shutdown().await;
                }
            });
        }
    });
    port
}

/// Reads one HTTP/1.1 request (head and `content-length` body, at most
/// 1 MiB); `None` on a broken or oversized one.
async fn read_request<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> Option<Vec<u8>> {
    const MAX: usize = 1 << 20;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return Some(buf[end + 4..end + 4 + len].to_vec());
            }
        }
        if buf.len() > MAX {
            return None;
        }
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_http_agent_is_reached_over_https_with_a_private_ca() {
    let pki = Pki::generate();
    let hits = Arc::new(AtomicUsize::new(0));
    let port = https_agent(&pki, hits.clone()).await;
    let stack = caucus_harness::Stack::start();
    let _c = crate::common::coordinator(&stack, &[]);
    let handler = format!("http:https://localhost:{port}/run");
    let ca = pki.file("ca.pem");
    let _w = crate::common::worker(
        &stack,
        "alpha",
        1,
        &handler,
        &[("CAUCUS_WORKER_HTTP_CA_FILE", ca.as_str())],
    );
    let api = Api::connect(&stack).await;
    let p = pipeline(
        "https",
        json!([{"name": "x", "agent": "alpha", "expected_duration": 1.0}]),
    );
    let ids = api.submit(&["HTTPS"], p, 10).await;
    let wfs = api.wait_completed(&ids, Duration::from_secs(20)).await;
    assert_eq!(wfs[0]["tasks"]["x"]["state"], "completed", "{}", wfs[0]);
    assert_eq!(
        hits.load(Ordering::SeqCst),
        1,
        "the https agent ran the task"
    );
}
