//! Messages addressed to a built-in agent type (`caucus.msg.<agent_type>`),
//! read through one durable consumer per type (`agents-<agent_type>`), so
//! each message is handled once whichever worker process takes it.
//!
//! * `request` `flush_working_memory` (the facilitator's pre-debate sync):
//!   built-in agents publish their findings when a task ends and hold
//!   nothing else, so they confirm at once on `parameters.reply_to`,
//!   correlated with the request.
//! * Any other `request`: the coordinator's (it reads `caucus.msg.>` too and
//!   turns a request into a one-stage workflow for this agent type, whose
//!   task a worker runs like any other); acknowledged here and logged at
//!   debug.
//! * `confirmation` (e.g. a service's answer to one of this agent type's
//!   findings; the coordinator tracks answers) and `alert` (the coordinator
//!   turns it into an alert card): acknowledged and logged at debug.
//! * `challenge` (stamped by the facilitator with `debate_id` and
//!   `snapshot_id`): see [`super::debates`].
//! * `debate_resolution`, `debate_escalation` and other notices are logged.
//! * Bodies that do not decode, flush requests without `reply_to` and
//!   challenges not handed out by the facilitator go to the DLQ.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::AckKind;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use caucus_shared::envelope::{Envelope, MessageType};
use caucus_shared::messages::{Challenge, Confirmation, Request};
use caucus_shared::nats::dlq::{decode_or_dead_letter, Dlq};
use caucus_shared::nats::trace;
use caucus_shared::service::Tasks;

use super::debates::{DebateAgent, HandleError};

/// The `query` of the facilitator's flush request.
pub const FLUSH_QUERY: &str = "flush_working_memory";

/// Durable consumer name of an agent type's inbox (created by the
/// coordinator or `caucus init`, bound by the worker: see
/// [`caucus_shared::nats::consumers::inbox_consumer`]).
pub use caucus_shared::nats::consumers::inbox_consumer_name;

/// Reads the inbox until `shutdown`.
pub async fn run(
    consumer: PullConsumer,
    agent: Arc<DebateAgent>,
    dlq: Dlq,
    max_bytes: usize,
    shutdown: CancellationToken,
    tracker: Tasks,
) {
    loop {
        let mut messages = match consumer.messages().await {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(agent_type = %agent.agent_type, error = %e, "inbox unavailable; retrying");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(500)) => continue,
                }
            }
        };
        loop {
            let next = tokio::select! {
                _ = shutdown.cancelled() => return,
                m = messages.next() => m,
            };
            let msg = match next {
                Some(Ok(m)) => m,
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "inbox message error");
                    continue;
                }
                None => break,
            };
            let Some(env) = decode_or_dead_letter(&dlq, &msg, max_bytes, Envelope::decode).await
            else {
                continue;
            };
            // In the sender's trace (the facilitator's debate): the
            // answers, evidence and verdicts published here carry it on.
            let span = trace::consumer_span(&msg.subject, msg.headers.as_ref());
            let handled = handle(&agent, &env, &tracker, &shutdown)
                .instrument(span)
                .await;
            match handled {
                Ok(()) => {
                    let _ = msg.ack().await;
                }
                Err(HandleError::Transient(e)) => {
                    tracing::warn!(subject = %msg.subject, error = %e, "inbox message will be retried");
                    let _ = msg
                        .ack_with(AckKind::Nak(Some(Duration::from_millis(500))))
                        .await;
                }
                Err(HandleError::Refused { code, reason }) => {
                    match dlq.dead_letter_message(&msg, code, &reason).await {
                        Ok(()) => {
                            let _ = msg.ack().await;
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "cannot dead-letter; will retry");
                            let _ = msg
                                .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                                .await;
                        }
                    }
                }
            }
        }
    }
}

/// What the inbox does with a decoded message, decided before any I/O.
#[derive(Debug)]
enum Route {
    /// The facilitator's flush request: confirm on `reply_to`.
    Flush {
        /// `content.parameters.reply_to`.
        reply_to: String,
    },
    /// A request the coordinator turns into work: acknowledged only.
    LeftToCoordinator {
        /// The request's query, for the log.
        query: String,
    },
    /// A challenge handed out by the facilitator.
    Challenge {
        /// The challenge.
        challenge: Box<Challenge>,
        /// Its debate.
        debate_id: String,
        /// The facilitator's snapshot it cites.
        snapshot_id: String,
    },
    /// A debate resolution or escalation: logged at info.
    DebateNotice,
    /// Anything else (confirmations, alerts, findings): logged at debug.
    Noted,
}

fn route(env: &Envelope) -> Result<Route, HandleError> {
    let refused = |code: &'static str, reason: String| HandleError::Refused { code, reason };
    match env.message_type {
        MessageType::Request => {
            let req: Request = env
                .content_as()
                .map_err(|e| refused(e.code(), e.to_string()))?;
            if req.query != FLUSH_QUERY {
                return Ok(Route::LeftToCoordinator { query: req.query });
            }
            let reply_to = req
                .parameters
                .get("reply_to")
                .and_then(|v| v.as_str())
                .filter(|s| !s.is_empty())
                .ok_or_else(|| {
                    refused(
                        "missing_field",
                        "flush request without content.parameters.reply_to".into(),
                    )
                })?;
            Ok(Route::Flush {
                reply_to: reply_to.to_string(),
            })
        }
        MessageType::Challenge => {
            let c: Challenge = env
                .content_as()
                .map_err(|e| refused(e.code(), e.to_string()))?;
            let (Some(debate_id), Some(snapshot_id)) = (c.debate_id.clone(), c.snapshot_id.clone())
            else {
                return Err(refused(
                    "not_from_facilitator",
                    "a challenge without debate_id and snapshot_id: publish challenges on caucus.debates.<debate_id>.challenge; the facilitator hands them to the agents".into(),
                ));
            };
            Ok(Route::Challenge {
                challenge: Box::new(c),
                debate_id,
                snapshot_id,
            })
        }
        MessageType::DebateResolution | MessageType::DebateEscalation => Ok(Route::DebateNotice),
        _ => Ok(Route::Noted),
    }
}

async fn handle(
    agent: &Arc<DebateAgent>,
    env: &Envelope,
    tracker: &Tasks,
    shutdown: &CancellationToken,
) -> Result<(), HandleError> {
    match route(env)? {
        Route::Flush { reply_to } => confirm_flush(agent, env, &reply_to).await,
        Route::LeftToCoordinator { query } => {
            // The coordinator turns it into a workflow for this agent type.
            tracing::debug!(agent_type = %agent.agent_type, from = %env.from_agent,
                request_id = %env.id, query = %query, "request left to the coordinator");
            Ok(())
        }
        Route::Challenge {
            challenge: c,
            debate_id,
            snapshot_id,
        } => {
            if c.challenged == agent.agent_type {
                agent.answer(&c, &debate_id, &snapshot_id).await
            } else if c.challenger == agent.agent_type {
                let agent = agent.clone();
                let shutdown = shutdown.clone();
                // Waiting for the evidence must not hold up the inbox.
                let judge = async move {
                    agent.judge(&c, &debate_id, &snapshot_id, shutdown).await;
                };
                // Its verdict stays in the challenge's trace.
                tracker.spawn_named("debate-judge", judge.instrument(tracing::Span::current()));
                Ok(())
            } else {
                tracing::info!(debate_id, agent_type = %agent.agent_type, "challenge names neither side as this agent; ignored");
                Ok(())
            }
        }
        Route::DebateNotice => {
            tracing::info!(agent_type = %agent.agent_type, message_type = %env.message_type, content = %env.content, "debate notice");
            Ok(())
        }
        Route::Noted => {
            // Confirmations and alerts are the coordinator's to track and
            // raise; nothing for the agent to do.
            tracing::debug!(agent_type = %agent.agent_type, message_type = %env.message_type,
                from = %env.from_agent, correlation_id = ?env.correlation_id, "message noted");
            Ok(())
        }
    }
}

async fn confirm_flush(
    agent: &DebateAgent,
    env: &Envelope,
    reply_to: &str,
) -> Result<(), HandleError> {
    let content = Confirmation {
        finding: FLUSH_QUERY.into(),
        agrees: Some(true),
        confidence: None,
        evidence: Vec::new(),
        used: None,
        in_reply_to: Some(env.id.clone()),
        note: Some(
            "built-in agent: findings are published when each task ends; no unpublished working memory"
                .into(),
        ),
    };
    let value =
        serde_json::to_value(&content).map_err(|e| HandleError::Transient(e.to_string()))?;
    let answer = env.reply(MessageType::Confirmation, agent.agent_type.clone(), value);
    agent
        .nats
        .publish_with_headers(reply_to.to_string(), trace::headers(), answer.to_bytes())
        .await
        .map_err(|e| HandleError::Transient(format!("flush confirmation: {e}")))?;
    agent
        .nats
        .flush()
        .await
        .map_err(|e| HandleError::Transient(format!("flush confirmation: {e}")))?;
    tracing::info!(agent_type = %agent.agent_type, from = %env.from_agent, "flush request confirmed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(v: serde_json::Value) -> Envelope {
        Envelope::decode(v.to_string().as_bytes(), 1 << 20).unwrap()
    }

    #[test]
    fn requests_other_than_the_flush_are_left_to_the_coordinator() {
        let r = route(&env(json!({"message_type": "request", "from_agent": "svc",
            "content": {"query": "value MSFT", "item": "MSFT"}})));
        assert!(
            matches!(&r, Ok(Route::LeftToCoordinator { query }) if query == "value MSFT"),
            "{r:?}"
        );
    }

    #[test]
    fn the_flush_is_answered_and_needs_reply_to() {
        let r = route(&env(
            json!({"message_type": "request", "from_agent": "facilitator",
            "content": {"query": FLUSH_QUERY, "parameters": {"reply_to": "_INBOX.x"}}}),
        ));
        assert!(
            matches!(&r, Ok(Route::Flush { reply_to }) if reply_to == "_INBOX.x"),
            "{r:?}"
        );
        let r = route(&env(
            json!({"message_type": "request", "from_agent": "facilitator",
            "content": {"query": FLUSH_QUERY}}),
        ));
        assert!(
            matches!(
                &r,
                Err(HandleError::Refused {
                    code: "missing_field",
                    ..
                })
            ),
            "{r:?}"
        );
    }

    #[test]
    fn confirmations_and_alerts_are_only_noted() {
        let c = route(&env(
            json!({"message_type": "confirmation", "from_agent": "svc",
            "correlation_id": "f1", "content": {"finding": "x", "used": true}}),
        ));
        assert!(matches!(c, Ok(Route::Noted)), "{c:?}");
        let a = route(&env(json!({"message_type": "alert", "from_agent": "svc",
            "priority": "critical", "content": {"alert_type": "x", "message": "m"}})));
        assert!(matches!(a, Ok(Route::Noted)), "{a:?}");
    }

    #[test]
    fn raw_challenges_are_refused() {
        let r = route(&env(
            json!({"message_type": "challenge", "from_agent": "x", "content": {
            "challenge_id": "raw", "challenger": "x", "challenged": "strategy",
            "disputed_finding": "f", "challenge_basis": "b", "escalation_timer": 60,
            "priority": "supporting"}}),
        ));
        assert!(
            matches!(
                &r,
                Err(HandleError::Refused {
                    code: "not_from_facilitator",
                    ..
                })
            ),
            "{r:?}"
        );
    }
}
