//! Who decided, at the API server alone (docs/SECURITY.md): a mutating
//! operation's actor field comes from the `.as.<identity>` subject, else
//! from the shared `operator` role when identity is required, else from
//! the body as before. tests/it/identity.rs checks it through a
//! coordinator and its stored records.

use std::time::Duration;

use caucus_harness::Nats;
use caucus_shared::api::coordinator::gates::{
    GateAction, GateDecide, GateDecideReply, GateDecideRequest,
};
use caucus_shared::api::identity::{subject_as, OPERATOR};
use caucus_shared::api::ApiClient;
use caucus_shared::nats::api::api_request_on;
use caucus_shared::nats::{ApiError, ApiServer};
use caucus_shared::subjects::Subjects;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A decision naming `mallory` in its body.
fn approve(wf: &str) -> GateDecideRequest {
    GateDecideRequest {
        workflow_id: wf.to_string(),
        gate: None,
        action: GateAction::Approve,
        reviewer: "mallory".into(),
        rationale: "looks right".into(),
        send_back_to: Vec::new(),
    }
}

/// Who a `gate_decide` served by a bare API server (no coordinator)
/// records: the handler answers the reviewer it was given.
async fn decider_seen(nats: &Nats, require_identity: bool, identity: Option<&str>) -> String {
    let client = async_nats::connect(nats.url()).await.unwrap();
    let mut server = ApiServer::new(client.clone(), Subjects::default(), "coordinator")
        .with_require_identity(require_identity);
    server.op::<GateDecide, _, _>(|r: GateDecideRequest| async move {
        Err::<GateDecideReply, _>(ApiError::new("seen", r.reviewer))
    });
    let (shutdown, tracker) = (CancellationToken::new(), TaskTracker::new());
    server.start(shutdown.clone(), &tracker).await.unwrap();
    let mut api = ApiClient::new(client, Subjects::default(), Duration::from_secs(10));
    if let Some(id) = identity {
        api = api.with_identity(id);
    }
    let e = api.call::<GateDecide>(&approve("w1")).await.unwrap_err();
    shutdown.cancel();
    tracker.close();
    tracker.wait().await;
    assert_eq!(e.code, "seen", "{e:?}");
    e.message
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_api_server_takes_the_actor_from_the_subject() {
    let nats = Nats::start();
    assert_eq!(decider_seen(&nats, true, Some("alice")).await, "alice");
    assert_eq!(decider_seen(&nats, false, Some("alice")).await, "alice");
    assert_eq!(decider_seen(&nats, true, None).await, OPERATOR);
    assert_eq!(
        decider_seen(&nats, false, None).await,
        "mallory",
        "without require_identity a bare call keeps the body's name"
    );
    // An identity that is not one subject token's worth is encoded, and
    // arrives whole.
    assert_eq!(
        decider_seen(&nats, true, Some("ana.m @desk")).await,
        "ana.m @desk"
    );
}

/// A service with no mutating operation does not listen on `.as.`
/// subjects at all (its NATS user needs no permission for them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_without_mutating_operations_serves_no_as_subjects() {
    let nats = Nats::start();
    let client = async_nats::connect(nats.url()).await.unwrap();
    let mut server = ApiServer::new(client.clone(), Subjects::default(), "correlator");
    server.route("echo", |v| async move { Ok(v) });
    let (shutdown, tracker) = (CancellationToken::new(), TaskTracker::new());
    server.start(shutdown.clone(), &tracker).await.unwrap();
    let s = Subjects::default();
    let body = serde_json::json!({"x": 1});
    let t = Duration::from_secs(5);
    let bare = api_request_on(&client, s.api("correlator", "echo"), "correlator", &body, t)
        .await
        .unwrap();
    assert_eq!(bare, body);
    let e = api_request_on(
        &client,
        subject_as(&s, "correlator", "echo", "alice"),
        "correlator",
        &body,
        t,
    )
    .await
    .unwrap_err();
    assert_eq!(e.code, "no_responders", "{e:?}");
    shutdown.cancel();
    tracker.close();
    tracker.wait().await;
}
