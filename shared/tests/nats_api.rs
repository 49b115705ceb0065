//! The control API on a real nats-server: routes, error replies instead of
//! time-outs, health, queue-group sharing and "no responders".

use std::collections::HashSet;
use std::time::Duration;

use bytes::Bytes;
use caucus_harness::Nats;
use caucus_shared::nats::{self, api, api_request, ApiError, ApiServer};
use caucus_shared::subjects::Subjects;
use caucus_shared::Config;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

const T: Duration = Duration::from_secs(5);

async fn server(
    cfg: &Config,
    instance: &str,
    shutdown: &CancellationToken,
    tracker: &TaskTracker,
) -> anyhow::Result<()> {
    let client = nats::connect(&cfg.nats, instance).await?;
    let mut api =
        ApiServer::new(client, Subjects::default(), "coordinator").with_instance_id(instance);
    api.route("echo", |v: Value| async move { Ok(json!({ "echo": v })) })
        .route("missing", |_| async move {
            Err::<Value, _>(ApiError::not_found("workflow wf-9 does not exist"))
        })
        .route("typed", |v: Value| async move {
            #[derive(serde::Deserialize)]
            struct Req {
                n: u32,
            }
            let r: Req = serde_json::from_value(v)?;
            Ok(json!({ "double": r.n * 2 }))
        })
        .route("boom", |_| async move {
            if std::hint::black_box(true) {
                panic!("handler bug");
            }
            Ok(Value::Null)
        });
    assert_eq!(
        api.operations(),
        vec!["boom", "echo", "health", "missing", "typed"]
    );
    api.start(shutdown.clone(), tracker).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_errors_health_and_sharing() -> anyhow::Result<()> {
    let nats_server = Nats::start();
    let mut cfg = Config::default();
    cfg.nats.url = nats_server.url();
    let shutdown = CancellationToken::new();
    let tracker = TaskTracker::new();
    server(&cfg, "coordinator-a", &shutdown, &tracker).await?;
    server(&cfg, "coordinator-b", &shutdown, &tracker).await?;

    let client = nats::connect(&cfg.nats, "api-client").await?;
    let s = Subjects::default();
    let call = |op: &'static str, body: Value| {
        let client = client.clone();
        let s = s.clone();
        async move { api_request(&client, &s, "coordinator", op, &body, T).await }
    };

    assert_eq!(
        call("echo", json!({"a": 1})).await?,
        json!({"echo": {"a": 1}})
    );
    assert_eq!(
        call("typed", json!({"n": 21})).await?,
        json!({"double": 42})
    );

    let e = call("missing", json!({})).await.unwrap_err();
    assert_eq!(e, ApiError::not_found("workflow wf-9 does not exist"));
    let e = call("typed", json!({"n": "x"})).await.unwrap_err();
    assert_eq!(e.code, api::CODE_BAD_REQUEST);
    assert!(e.message.contains("invalid type"), "{e}");
    let e = call("nope", json!({})).await.unwrap_err();
    assert_eq!(e.code, api::CODE_UNKNOWN_OPERATION);
    assert!(e.message.contains("`nope`"), "{e}");
    let e = call("boom", json!({})).await.unwrap_err();
    assert_eq!(e.code, api::CODE_INTERNAL);

    // A body that is not JSON, sent by a plain client.
    let reply = client
        .request(
            s.api("coordinator", "echo"),
            Bytes::from_static(b"{not json"),
        )
        .await?;
    let reply: Value = serde_json::from_slice(&reply.payload)?;
    assert_eq!(reply["error"]["code"], "bad_request");
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("not JSON"),
        "{reply}"
    );

    // Health, shared between both instances of the queue group.
    let mut instances = HashSet::new();
    for _ in 0..40 {
        let h = call("health", Value::Null).await?;
        assert_eq!(h["service"], "coordinator");
        assert_eq!(h["status"], "ok");
        assert_eq!(h["version"], env!("CARGO_PKG_VERSION"));
        assert!(h["uptime_ms"].is_u64(), "{h}");
        instances.insert(h["instance_id"].as_str().unwrap_or_default().to_string());
    }
    assert_eq!(
        instances,
        HashSet::from(["coordinator-a".to_string(), "coordinator-b".to_string()])
    );

    // Nobody serves `facilitator`: a clear error, not a time-out.
    let e = api_request(&client, &s, "facilitator", "debates", &json!({}), T)
        .await
        .unwrap_err();
    assert_eq!(e.code, api::CODE_NO_RESPONDERS);
    assert!(e.message.contains("`facilitator`"), "{e}");

    // After shutdown the servers stop answering and their tasks finish.
    shutdown.cancel();
    tracker.close();
    tokio::time::timeout(T, tracker.wait()).await?;
    let e = call("health", Value::Null).await.unwrap_err();
    assert_eq!(e.code, api::CODE_NO_RESPONDERS);
    Ok(())
}
