//! The control API's server and request function: JSON request/reply on `caucus.api.<service>.<operation>`.
//!
//! Every instance of a service joins one queue group, so requests are shared
//! among them. Errors always come back as
//! `{"error": {"code": "...", "message": "..."}}`, never as a time-out, and
//! every service answers `health`.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::client::{Request, RequestErrorKind};
use async_nats::Client;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::nats::connect::round_trip;
use crate::nats::trace;
use crate::subjects::{decode_token, encode_token, Subjects};
use crate::Error;

pub use super::error::*;

/// Longest wait for the server to confirm a (un)subscription.
const ROUND_TRIP_TIMEOUT: Duration = Duration::from_secs(2);

/// A route handler: JSON in, JSON (or an [`ApiError`]) out.
pub type Handler = Arc<dyn Fn(Value) -> BoxFuture<'static, Result<Value, ApiError>> + Send + Sync>;

/// One operation served: its handler and what the identity rules need.
#[derive(Clone)]
struct Route {
    handler: Handler,
    /// [`super::Operation::MUTATES`]: also served on `….<op>.as.<identity>`.
    mutates: bool,
    /// [`super::Operation::ACTOR_FIELD`]: set from the caller's identity.
    actor_field: Option<&'static str>,
}

/// What serving a request needs besides the message.
struct Served {
    service: String,
    /// `<prefix>.api.<service>.`, stripped from request subjects.
    base: String,
    routes: HashMap<String, Route>,
    /// `security.require_identity`.
    require_identity: bool,
}

/// Routes of one service, served once [`ApiServer::start`] is called.
pub struct ApiServer {
    client: Client,
    subjects: Subjects,
    service: String,
    instance_id: String,
    started: Instant,
    routes: HashMap<String, Route>,
    health: crate::health::Health,
    require_identity: bool,
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut ops: Vec<&String> = self.routes.keys().collect();
        ops.sort();
        f.debug_struct("ApiServer")
            .field("service", &self.service)
            .field("instance_id", &self.instance_id)
            .field("operations", &ops)
            .finish()
    }
}

impl ApiServer {
    /// A server for `service` with only `health`; the instance id is a
    /// random UUID until [`ApiServer::with_instance_id`] sets it.
    pub fn new(client: Client, subjects: Subjects, service: &str) -> Self {
        ApiServer {
            client,
            subjects,
            service: service.to_string(),
            instance_id: uuid::Uuid::new_v4().to_string(),
            started: Instant::now(),
            routes: HashMap::new(),
            health: crate::health::Health::new(),
            require_identity: false,
        }
    }

    /// `security.require_identity`: a bare request to a mutating operation
    /// acts as the shared `operator` role instead of the name its body
    /// gives (see [`super::identity`]).
    pub fn with_require_identity(mut self, require: bool) -> Self {
        self.require_identity = require;
        self
    }

    /// The state `health` reports (`ok` until a component is degraded).
    pub fn with_health(mut self, health: crate::health::Health) -> Self {
        self.health = health;
        self
    }

    /// Sets the instance id `health` reports.
    pub fn with_instance_id(mut self, id: impl Into<String>) -> Self {
        self.instance_id = id.into();
        self
    }

    /// Adds (or replaces) an operation, served on the bare subject only
    /// (typed mutating operations go through [`ApiServer::op`]). `health`
    /// is built in and cannot be replaced.
    pub fn route<F, Fut>(&mut self, operation: &str, handler: F) -> &mut Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Value, ApiError>> + Send + 'static,
    {
        self.insert(operation, handler, false, None)
    }

    fn insert<F, Fut>(
        &mut self,
        operation: &str,
        handler: F,
        mutates: bool,
        actor_field: Option<&'static str>,
    ) -> &mut Self
    where
        F: Fn(Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<Value, ApiError>> + Send + 'static,
    {
        let handler: Handler = Arc::new(move |v| handler(v).boxed());
        let route = Route {
            handler,
            mutates,
            actor_field,
        };
        self.routes.insert(encode_token(operation), route);
        self
    }

    /// Adds (or replaces) the typed operation `O`: the body is read as
    /// `O::Request` (an empty body as `{}`; a mismatch is `bad_request`
    /// naming the field) and the reply written from `O::Reply`. A mutating
    /// `O` is also served on `….<op>.as.<identity>`, and its
    /// `O::ACTOR_FIELD` is set from the caller's identity before decoding
    /// (see [`super::identity`]).
    pub fn op<O, F, Fut>(&mut self, handler: F) -> &mut Self
    where
        O: super::Operation,
        F: Fn(O::Request) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<O::Reply, ApiError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let serve = move |body| {
            let handler = handler.clone();
            async move {
                let request = super::decode::decode_request::<O>(body)?;
                let reply = handler(request).await?;
                serde_json::to_value(reply)
                    .map_err(|e| ApiError::internal(format!("reply not serialisable: {e}")))
            }
        };
        self.insert(O::NAME, serve, O::MUTATES, O::ACTOR_FIELD)
    }

    /// Operations served, sorted (including `health`).
    pub fn operations(&self) -> Vec<String> {
        let mut ops: Vec<String> = self
            .routes
            .keys()
            .filter_map(|k| decode_token(k).ok())
            .chain(std::iter::once("health".to_string()))
            .collect();
        ops.sort();
        ops.dedup();
        ops
    }

    /// Subscribes (and flushes, so the server knows before this returns)
    /// and serves requests until `shutdown` is cancelled. The serving loop
    /// and every request in flight are tracked by `tracker`.
    pub async fn start(
        mut self,
        shutdown: CancellationToken,
        tracker: &TaskTracker,
    ) -> Result<(), Error> {
        let health = health(
            &self.service,
            &self.instance_id,
            self.started,
            self.health.clone(),
        );
        self.routes.insert(
            "health".into(),
            Route {
                handler: health,
                mutates: false,
                actor_field: None,
            },
        );
        let base = format!(
            "{}.api.{}.",
            self.subjects.prefix(),
            encode_token(&self.service)
        );
        let group = format!(
            "{}-api-{}",
            self.subjects.prefix(),
            encode_token(&self.service)
        );
        // Bare operations, and mutating ones (if any: a service without
        // them needs no permission for more) called as an identity.
        let mut wildcards = vec![format!("{base}*")];
        if self.routes.values().any(|r| r.mutates) {
            wildcards.push(format!("{base}*.{}.*", super::identity::AS));
        }
        let mut subs = Vec::with_capacity(wildcards.len());
        for wildcard in wildcards {
            let sub = self
                .client
                .queue_subscribe(wildcard.clone(), group.clone())
                .await
                .map_err(|e| Error::nats(format!("subscribe {wildcard}: {e}")))?;
            subs.push(sub);
        }
        // Ready means reachable: the server must know the subscriptions.
        round_trip(&self.client, ROUND_TRIP_TIMEOUT).await;
        tracing::debug!(subject = %format!("{base}*"), operations = ?self.operations(), require_identity = self.require_identity, "API serving");
        let served = Arc::new(Served {
            service: self.service,
            base,
            routes: self.routes,
            require_identity: self.require_identity,
        });
        let client = self.client;
        let inner = tracker.clone();
        tracker.spawn(async move {
            let mut both = futures::stream::select_all(subs.iter_mut());
            loop {
                let msg = tokio::select! {
                    _ = shutdown.cancelled() => break,
                    m = both.next() => match m { Some(m) => m, None => break },
                };
                let served = served.clone();
                let client = client.clone();
                inner.spawn(async move { answer(&client, &served, msg).await });
            }
            drop(both);
            // Confirmed, so other clients see "no responders" once the drain is over.
            for mut sub in subs {
                let _ = sub.unsubscribe().await;
            }
            round_trip(&client, ROUND_TRIP_TIMEOUT).await;
        });
        Ok(())
    }
}

/// `status` is `ok` or `degraded`; `degraded` names each component that
/// cannot do its work and why (`{"redis": "Redis unreachable: …"}`).
fn health(
    service: &str,
    instance_id: &str,
    started: Instant,
    state: crate::health::Health,
) -> Handler {
    let (service, instance_id) = (service.to_string(), instance_id.to_string());
    Arc::new(move |_| {
        let reply = super::HealthReply {
            service: service.clone(),
            instance_id: instance_id.clone(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            uptime_ms: started.elapsed().as_millis() as u64,
            status: state.status().to_string(),
            degraded: state.problems(),
        };
        async move {
            serde_json::to_value(reply)
                .map_err(|e| ApiError::internal(format!("reply not serialisable: {e}")))
        }
        .boxed()
    })
}

async fn answer(client: &Client, served: &Served, msg: async_nats::Message) {
    let Some(reply_to) = msg.reply.clone() else {
        tracing::debug!(subject = %msg.subject, "API message without a reply subject ignored");
        return;
    };
    let service = served.service.as_str();
    let rest = msg
        .subject
        .strip_prefix(served.base.as_str())
        .unwrap_or_default();
    let addressed = super::identity::parse(rest);
    let op = match &addressed {
        Ok(a) => a.op.clone(),
        Err(_) => rest.split('.').next().unwrap_or_default().to_string(),
    };
    let caller = match &addressed {
        Ok(a) => a.identity.clone().unwrap_or_default(),
        Err(_) => String::new(),
    };
    let span = tracing::info_span!("api", otel.kind = "server", service, operation = %op, caller = %caller);
    trace::set_remote_parent(&span, msg.headers.as_ref());
    let result = async {
        let addressed = addressed?;
        let Some(route) = served.routes.get(&op) else {
            return Err(ApiError::new(
                CODE_UNKNOWN_OPERATION,
                format!("service `{service}` has no operation `{op}`"),
            ));
        };
        let mut body = if msg.payload.iter().all(u8::is_ascii_whitespace) {
            Value::Null
        } else {
            serde_json::from_slice(&msg.payload)
                .map_err(|e| ApiError::bad_request(format!("request body is not JSON: {e}")))?
        };
        super::identity::apply(
            &mut body,
            route.mutates,
            route.actor_field,
            addressed.identity.as_deref(),
            served.require_identity,
        )
        .map_err(|e| ApiError::new(e.code, format!("`{service}.{op}`: {}", e.message)))?;
        match AssertUnwindSafe((route.handler)(body)).catch_unwind().await {
            Ok(r) => r,
            Err(_) => Err(ApiError::internal(format!("operation `{op}` panicked"))),
        }
    }
    .instrument(span.clone())
    .await;
    let reply = match result {
        Ok(v) => v,
        Err(e) => {
            span.in_scope(|| tracing::info!(code = %e.code, message = %e.message, "API error"));
            e.to_reply()
        }
    };
    let mut bytes = serde_json::to_vec(&reply).unwrap_or_else(|e| {
        serde_json::to_vec(&ApiError::internal(format!("reply not serialisable: {e}")).to_reply())
            .unwrap_or_default()
    });
    let max = client.server_info().max_payload;
    if let Some(e) = too_large(&op, bytes.len(), max) {
        span.in_scope(
            || tracing::warn!(code = %e.code, message = %e.message, "API reply too large"),
        );
        bytes = serde_json::to_vec(&e.to_reply()).unwrap_or_default();
    }
    if let Err(e) = client.publish(reply_to, Bytes::from(bytes)).await {
        tracing::warn!(error = %e, "cannot send API reply");
    }
}

/// Room left under `max_payload` for the reply's protocol overhead.
const REPLY_HEADROOM: usize = 1024;

/// The error that replaces a reply of `len` bytes that the server (whose
/// `max_payload` is `max`) would refuse; `None` when it fits.
fn too_large(op: &str, len: usize, max: usize) -> Option<ApiError> {
    if max == 0 || len + REPLY_HEADROOM <= max {
        return None;
    }
    Some(ApiError::new(
        CODE_REPLY_TOO_LARGE,
        format!(
            "the `{op}` reply would be {len} bytes; the NATS server's max_payload is {max} bytes; \
             narrow the request (a smaller `limit`, fewer `ids`, no `tasks`, or one workflow at a time)"
        ),
    ))
}

/// Calls `caucus.api.<service>.<operation>` with `body` and the current
/// trace context. Error replies become [`ApiError`]s; nobody listening is
/// [`CODE_NO_RESPONDERS`] naming the service; no answer in `timeout` is
/// [`CODE_TIMEOUT`].
pub async fn api_request(
    client: &Client,
    subjects: &Subjects,
    service: &str,
    operation: &str,
    body: &Value,
    timeout: Duration,
) -> Result<Value, ApiError> {
    let subject = subjects.api(service, operation);
    api_request_on(client, subject, service, body, timeout).await
}

/// [`api_request`] on a subject of `service` given whole, e.g. a mutating
/// operation's `….<op>.as.<identity>` ([`super::identity::subject_as`]).
pub async fn api_request_on(
    client: &Client,
    subject: String,
    service: &str,
    body: &Value,
    timeout: Duration,
) -> Result<Value, ApiError> {
    let payload = serde_json::to_vec(body)
        .map_err(|e| ApiError::bad_request(format!("request not serialisable: {e}")))?;
    let request = Request::new()
        .payload(Bytes::from(payload))
        .headers(trace::headers())
        .timeout(Some(timeout));
    let msg = client
        .send_request(subject.clone(), request)
        .await
        .map_err(|e| match e.kind() {
            RequestErrorKind::NoResponders => ApiError::new(
                CODE_NO_RESPONDERS,
                format!("no `{service}` service is running (nobody answers {subject})"),
            ),
            RequestErrorKind::TimedOut => ApiError::new(
                CODE_TIMEOUT,
                format!("`{service}` did not answer {subject} within {timeout:?}"),
            ),
            _ => ApiError::internal(format!("request {subject}: {e}")),
        })?;
    let reply: Value = serde_json::from_slice(&msg.payload).map_err(|e| {
        ApiError::new(
            CODE_BAD_REPLY,
            format!("reply on {subject} is not JSON: {e}"),
        )
    })?;
    match ApiError::from_reply(&reply) {
        Some(e) => Err(e),
        None => Ok(reply),
    }
}

/// One page of a list by position, as `coordinator.gates` and
/// `facilitator.debates` page: `limit` items from `cursor`, an offset a
/// previous reply returned as `next_cursor`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetPage {
    /// Items skipped before the page.
    pub offset: usize,
    /// Items in the page.
    pub limit: usize,
}

impl OffsetPage {
    /// The page a request asks for: `limit` (default `default`, within
    /// 1..=`max`) from `cursor`; an unreadable cursor is an error, not the
    /// first page.
    pub fn of(
        limit: Option<usize>,
        cursor: Option<&str>,
        default: usize,
        max: usize,
    ) -> Result<OffsetPage, ApiError> {
        let offset = match cursor {
            None => 0,
            Some(c) => c.parse().map_err(|_| {
                ApiError::bad_request(format!("cursor '{c}' is not one this operation returned"))
            })?,
        };
        Ok(OffsetPage {
            offset,
            limit: limit.unwrap_or(default).clamp(1, max),
        })
    }

    /// The page of `items` and the cursor of the next one, if any.
    pub fn take<T>(&self, items: impl IntoIterator<Item = T>) -> (Vec<T>, Option<String>) {
        let mut rest = items.into_iter().skip(self.offset);
        let page: Vec<T> = rest.by_ref().take(self.limit).collect();
        let next = rest
            .next()
            .is_some()
            .then(|| (self.offset + self.limit).to_string());
        (page, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn error_replies_round_trip() {
        let e = ApiError::bad_request("missing field `items`");
        let wire = e.to_reply();
        assert_eq!(wire["error"]["code"], "bad_request");
        assert_eq!(ApiError::from_reply(&wire), Some(e));
        assert_eq!(ApiError::from_reply(&json!({"status": "ok"})), None);
        assert_eq!(ApiError::from_reply(&json!([1])), None);
    }

    #[test]
    fn replies_over_max_payload_become_an_error() {
        assert_eq!(too_large("status", 1000, 1_048_576), None);
        assert_eq!(too_large("status", 5_000_000, 0), None, "no limit known");
        let e = too_large("status", 2_000_000, 1_048_576).expect("too large");
        assert_eq!(e.code, CODE_REPLY_TOO_LARGE);
        assert!(e.message.contains("2000000") && e.message.contains("1048576"));
        assert!(e.message.contains("limit"), "{}", e.message);
    }

    #[test]
    fn offset_pages_bound_their_size_and_name_the_next_page() {
        let p = OffsetPage::of(Some(2), Some("3"), 200, 500).unwrap();
        assert_eq!(p.take(0..10), (vec![3, 4], Some("5".to_string())));
        let last = OffsetPage::of(Some(5), Some("5"), 200, 500).unwrap();
        assert_eq!(last.take(0..10), (vec![5, 6, 7, 8, 9], None));
        assert_eq!(OffsetPage::of(Some(0), None, 200, 500).unwrap().limit, 1);
        assert_eq!(
            OffsetPage::of(Some(9999), None, 200, 500).unwrap().limit,
            500
        );
        assert_eq!(OffsetPage::of(None, None, 200, 500).unwrap().limit, 200);
        let bad = OffsetPage::of(None, Some("x"), 200, 500).unwrap_err();
        assert_eq!(bad.code, "bad_request");
    }
}
