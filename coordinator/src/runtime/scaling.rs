//! What autoscalers read: one agent type's backlog (queue depth, oldest
//! wait, in flight, capacity), as `GET /scaling/<agent_type>` on the
//! coordinator's HTTP listener and as the `coordinator.scaling` operation.
//!
//! The backlog lives in the leader's ready queues, not in JetStream (the
//! coordinator dispatches no more than live capacity), so only the leader
//! can say it. Every coordinator serves the route: the leader from its
//! scheduler, a standby by calling `scaling` over NATS, which the leader
//! answers. KEDA's `metrics-api` scaler may so poll the coordinator
//! Service without knowing which pod leads.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};

use caucus_shared::api::coordinator::scaling::{Scaling, ScalingRequest, ScalingView};
use caucus_shared::api::{
    ApiClient, CODE_BAD_REQUEST, CODE_NO_RESPONDERS, CODE_STANDBY, CODE_TIMEOUT,
};
use caucus_shared::health::Health;
use caucus_shared::nats::ApiError;
use caucus_shared::redis::{CapacitySemaphore, RedisPool};
use caucus_shared::service::{Service, ServiceContext};

use super::commands::{ask, Command, SchedulerHandle};
use super::SharedScheduler;

/// How long a standby keeps asking for the leader's answer (a `standby`
/// answer means the request reached another standby, or itself). Below
/// KEDA's default HTTP timeout of 3 s, so KEDA gets the 503 rather than
/// its own timeout when no coordinator leads.
const LEADER_SEARCH: Duration = Duration::from_secs(2);

/// Registers the `scaling` operation (the leader answers; a standby
/// answers `standby`, which callers retry on another instance; with
/// several partitions any instance answers, summing every partition's).
pub fn route(svc: &mut Service, router: super::route::Router) {
    let ctx = svc.context().clone();
    svc.op::<Scaling, _, _>(move |req| {
        let leader = super::leader_only(router.schedulers(), &ctx.health);
        let router = router.clone();
        let redis = ctx.redis.clone();
        let prefix = ctx.subjects.prefix().to_string();
        async move {
            if router.schedulers().count() > 1 {
                return partitioned(&router, &redis, &prefix, &req.agent_type).await;
            }
            view(&leader?, &redis, &prefix, &req.agent_type).await
        }
    });
}

/// `agent_type`'s backlog summed over every partition.
async fn partitioned(
    router: &super::route::Router,
    redis: &RedisPool,
    prefix: &str,
    agent_type: &str,
) -> Result<ScalingView, ApiError> {
    let load = super::status_merge::loads(router).await?;
    view_of(&load, redis, prefix, agent_type).await
}

/// The HTTP routes: `GET /scaling/<agent_type>` (add them with
/// [`Service::http_routes`]).
pub fn http(ctx: &ServiceContext, router: super::route::Router) -> Router {
    let state = HttpState {
        slot: router.schedulers().clone(),
        router,
        health: ctx.health.clone(),
        redis: ctx.redis.clone(),
        prefix: ctx.subjects.prefix().to_string(),
        client: ApiClient::new(
            ctx.nats.clone(),
            ctx.subjects.clone(),
            ctx.config.nats.request_timeout.min(LEADER_SEARCH),
        )
        .with_standby_retry(LEADER_SEARCH),
    };
    Router::new()
        .route("/scaling/{agent_type}", get(scaling))
        .with_state(state)
}

/// What the HTTP handler needs.
#[derive(Clone)]
struct HttpState {
    slot: SharedScheduler,
    router: super::route::Router,
    health: Health,
    redis: RedisPool,
    prefix: String,
    client: ApiClient,
}

async fn scaling(State(s): State<HttpState>, Path(agent_type): Path<String>) -> Response {
    if s.slot.count() > 1 {
        return match partitioned(&s.router, &s.redis, &s.prefix, &agent_type).await {
            Ok(v) => Json(v).into_response(),
            Err(e) => (status_of(&e), Json(serde_json::json!({ "error": e }))).into_response(),
        };
    }
    let answer = match super::leader_only(&s.slot, &s.health) {
        Ok(leader) => view(&leader, &s.redis, &s.prefix, &agent_type).await,
        // Not leading (standing by, or cannot lead): the leader answers.
        Err(_) => {
            s.client
                .call::<Scaling>(&ScalingRequest {
                    agent_type: agent_type.clone(),
                })
                .await
        }
    };
    match answer {
        Ok(v) => Json(v).into_response(),
        Err(e) => (status_of(&e), Json(serde_json::json!({ "error": e }))).into_response(),
    }
}

/// The HTTP status of an error: 400 for a name no agent type can have,
/// 503 when no leader answered (KEDA then keeps the replica count), 500
/// otherwise.
fn status_of(e: &ApiError) -> StatusCode {
    match e.code.as_str() {
        CODE_BAD_REQUEST => StatusCode::BAD_REQUEST,
        CODE_STANDBY | CODE_TIMEOUT | "unavailable" | CODE_NO_RESPONDERS => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// `agent_type`'s backlog from the leader's scheduler and its capacity
/// from Redis. A type neither knows reports zeros.
pub async fn view(
    scheduler: &SchedulerHandle,
    redis: &RedisPool,
    prefix: &str,
    agent_type: &str,
) -> Result<ScalingView, ApiError> {
    // The same rule as the Redis keys of the type: a name that could not
    // be an agent type is the caller's mistake, not an idle type.
    // The name is checked before the scheduler is asked.
    CapacitySemaphore::new(redis.clone(), prefix, agent_type)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let load = ask(scheduler, |reply| Command::Load { reply }).await?;
    view_of(&load, redis, prefix, agent_type).await
}

/// `agent_type`'s view from `load` and its capacity from Redis.
async fn view_of(
    load: &std::collections::BTreeMap<String, crate::engine::AgentLoad>,
    redis: &RedisPool,
    prefix: &str,
    agent_type: &str,
) -> Result<ScalingView, ApiError> {
    let sem = CapacitySemaphore::new(redis.clone(), prefix, agent_type)
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    let status = sem.status().await.map_err(|e| {
        ApiError::new(
            "unavailable",
            format!("capacity of {agent_type} unreadable: {e}"),
        )
    })?;
    let l = load.get(agent_type).cloned().unwrap_or_default();
    Ok(ScalingView {
        queue_depth: l.ready as u64,
        oldest_wait_seconds: l.oldest_wait_ms as f64 / 1000.0,
        in_flight: l.in_flight as u64,
        capacity: status.capacity,
        ..ScalingView::idle(agent_type)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_leader_is_503_and_a_bad_name_400() {
        for code in ["standby", "unavailable", "timeout", "no_responders"] {
            assert_eq!(
                status_of(&ApiError::new(code, "x")),
                StatusCode::SERVICE_UNAVAILABLE,
                "{code}"
            );
        }
        assert_eq!(
            status_of(&ApiError::bad_request("x")),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status_of(&ApiError::internal("x")),
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
