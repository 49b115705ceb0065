//! [`RequestIntake`]: a `request` envelope becomes a one-stage workflow,
//! created through the `submit` machinery with the idempotency key
//! `request:<envelope id>`.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};

use caucus_shared::api::coordinator::submit::SubmitRequest;
use caucus_shared::clock::SharedClock;
use caucus_shared::envelope::Envelope;
use caucus_shared::messages::Request;
use caucus_shared::nats::api::ApiError;
use caucus_shared::subjects::Subjects;

use super::answer::{confirmation, confirmation_msg_id};
use super::params::{pipeline_for, RequestParams};
use super::RequestError;
use crate::runtime::api::{submit_with, SubmitSettings};
use crate::runtime::publish::publish;
use crate::runtime::store::WorkflowStore;
use crate::runtime::submissions::{Submissions, MAX_KEY_LEN};
use crate::runtime::CoordinatorDeps;

/// Turns `request` envelopes into tasks.
#[derive(Clone)]
pub struct RequestIntake {
    inner: Arc<Inner>,
}

struct Inner {
    js: async_nats::jetstream::Context,
    subjects: Subjects,
    clock: SharedClock,
    store: WorkflowStore,
    target: crate::runtime::submit_to::SubmitTo,
    subs: Submissions,
    settings: SubmitSettings,
}

/// The idempotency key of a request: `request:<id>`, or the id's SHA-256
/// when it would be longer than a key may be.
pub fn idempotency_key(request_id: &str) -> String {
    let key = format!("request:{request_id}");
    if key.len() <= MAX_KEY_LEN {
        return key;
    }
    let digest = Sha256::digest(request_id.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("request-sha256:{hex}")
}

fn invalid(reason: impl Into<String>) -> RequestError {
    RequestError::Invalid {
        code: "invalid_request",
        reason: reason.into(),
    }
}

/// A refusal of the submit machinery, as a request error: what the request
/// itself got wrong is dead-lettered, the rest is retried.
fn from_submit(e: ApiError) -> RequestError {
    match e.code.as_str() {
        "bad_request" | "invalid_pipeline" | "unknown_pipeline" => invalid(e.message),
        "idempotency_conflict" => RequestError::Invalid {
            code: "duplicate_request",
            reason: format!(
                "a different request with this id was accepted before: {}",
                e.message
            ),
        },
        _ => RequestError::Transient(format!("{}: {}", e.code, e.message)),
    }
}

impl RequestIntake {
    /// Over the coordinator's deps, its workflow store and where the
    /// requests' workflows go (the scheduler, or the partitions' owners).
    pub fn new(
        deps: &CoordinatorDeps,
        store: WorkflowStore,
        target: crate::runtime::submit_to::SubmitTo,
    ) -> Self {
        let cfg = &deps.config.coordinator;
        RequestIntake {
            inner: Arc::new(Inner {
                js: deps.js.clone(),
                subjects: deps.subjects.clone(),
                clock: deps.clock.clone(),
                store,
                target,
                subs: Submissions::new(
                    deps.js.clone(),
                    deps.subjects.clone(),
                    cfg.submission_ttl,
                    &deps.config.nats,
                ),
                settings: SubmitSettings::from(cfg),
            }),
        }
    }

    /// Makes `env` (a request read on `caucus.msg.<agent_type>`, stored at
    /// `stored_at`) work for `agent_type`. `Ok` once the work is durably
    /// stored (the message is acknowledged then); the same request
    /// accepted twice creates nothing new. A deadline already passed is
    /// answered with a failure confirmation at once (`Ok` once published).
    pub async fn accept(
        &self,
        env: &Envelope,
        stored_at: DateTime<Utc>,
        agent_type: &str,
    ) -> Result<(), RequestError> {
        let i = &self.inner;
        let content: Request = env.content_as().map_err(|e| invalid(e.to_string()))?;
        let (item, parent) = self.item_of(&content).await?;
        let params = RequestParams::new(&env.id, &env.from_agent, env.priority, &content, parent);
        let now = i.clock.now();
        if let Some(deadline) = content.deadline.filter(|d| *d <= now) {
            let note = format!(
                "deadline {} missed: it had passed when the request was read",
                deadline.to_rfc3339()
            );
            let reply = confirmation(&params, agent_type, false, note, now);
            return publish(
                &i.js,
                i.subjects.msg(&params.from_agent),
                &reply,
                &confirmation_msg_id(&params.request_id),
            )
            .await
            .map_err(|e| RequestError::Transient(e.to_string()));
        }
        let unit_ms = (i.settings.default_unit.as_millis() as u64).max(1);
        let spec = pipeline_for(agent_type, &params, stored_at, unit_ms);
        let req = SubmitRequest {
            items: vec![item],
            pipeline: serde_json::to_value(&spec).expect("pipeline specs serialise"),
            time_unit_ms: Some(unit_ms),
            auto_approve_gates: false,
            idempotency_key: Some(idempotency_key(&env.id)),
        };
        let boost = params.boost();
        let target = i.target.clone();
        submit_with(
            req,
            move || Ok(target),
            i.clock.clone(),
            i.settings.clone(),
            i.subs.clone(),
            move |rec| {
                for t in rec.tasks.values_mut() {
                    t.priority += boost;
                }
            },
        )
        .await
        .map_err(from_submit)?;
        tracing::info!(request_id = %env.id, from_agent = %env.from_agent, agent_type, "request accepted as a workflow");
        Ok(())
    }

    /// The request's item, and the unfinished workflow it is linked to: its
    /// `item`, else the item of its `workflow_id`'s workflow.
    async fn item_of(&self, req: &Request) -> Result<(String, Option<String>), RequestError> {
        let named = match &req.workflow_id {
            None => None,
            Some(id) => {
                if uuid::Uuid::parse_str(id).is_err() {
                    return Err(invalid(format!(
                        "`workflow_id` `{id}` is not a workflow id"
                    )));
                }
                let found = self
                    .inner
                    .store
                    .get(id)
                    .await
                    .map_err(|e| RequestError::Transient(e.to_string()))?;
                Some((id.clone(), found.map(|(rec, _)| rec)))
            }
        };
        match (&req.item, named) {
            (None, None) => Err(invalid(
                "a request names its `item` or a `workflow_id` whose item it is about",
            )),
            (None, Some((id, None))) => {
                Err(invalid(format!("no workflow {id} (and no `item` named)")))
            }
            (None, Some((id, Some(rec)))) => {
                let parent = (!rec.state.is_terminal()).then_some(id);
                Ok((rec.item, parent))
            }
            (Some(item), Some((id, Some(rec)))) => {
                if &rec.item != item {
                    return Err(invalid(format!(
                        "workflow {id} is about `{}`, not `{item}`",
                        rec.item
                    )));
                }
                Ok((item.clone(), (!rec.state.is_terminal()).then_some(id)))
            }
            (Some(item), _) => Ok((item.clone(), None)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_bounded_and_stable() {
        assert_eq!(idempotency_key("abc"), "request:abc");
        let long = "x".repeat(400);
        let k = idempotency_key(&long);
        assert!(k.len() <= MAX_KEY_LEN);
        assert_eq!(k, idempotency_key(&long));
        assert_ne!(k, idempotency_key(&"y".repeat(400)));
    }

    #[test]
    fn submit_refusals_map_to_dead_letters_or_retries() {
        let e = from_submit(ApiError::bad_request("item too long"));
        assert!(matches!(
            e,
            RequestError::Invalid {
                code: "invalid_request",
                ..
            }
        ));
        let e = from_submit(ApiError::new("idempotency_conflict", "x"));
        assert!(matches!(
            e,
            RequestError::Invalid {
                code: "duplicate_request",
                ..
            }
        ));
        let e = from_submit(ApiError::new("store_failed", "x"));
        assert!(matches!(e, RequestError::Transient(_)));
        let e = from_submit(ApiError::new("standby", "x"));
        assert!(matches!(e, RequestError::Transient(_)));
    }
}
