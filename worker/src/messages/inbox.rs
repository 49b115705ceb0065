//! Messages addressed to a built-in agent type (`caucus.msg.<agent_type>`),
//! read through one durable consumer per type (`agents-<agent_type>`), so
//! each message is handled once whichever worker process takes it.
//!
//! * `request` `flush_working_memory` (the facilitator's pre-debate sync):
//!   built-in agents publish their findings when a task ends and hold
//!   nothing else, so they confirm at once on `parameters.reply_to`,
//!   correlated with the request.
//! * `challenge` (stamped by the facilitator with `debate_id` and
//!   `snapshot_id`): see [`super::debates`].
//! * `debate_resolution`, `debate_escalation` and other notices are logged.
//! * Bodies that do not decode, requests the agent cannot serve and
//!   challenges not handed out by the facilitator go to the DLQ.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy, PullConsumer};
use async_nats::jetstream::{self, AckKind};
use backon::{ConstantBuilder, Retryable};
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use caucus_shared::envelope::{Envelope, MessageType};
use caucus_shared::messages::{Challenge, Confirmation, Request};
use caucus_shared::nats::dlq::{decode_or_dead_letter, Dlq};
use caucus_shared::service::Tasks;
use caucus_shared::subjects::{encode_token, StreamKind, Subjects};

use super::debates::{DebateAgent, HandleError};

/// The `query` of the facilitator's flush request.
pub const FLUSH_QUERY: &str = "flush_working_memory";

/// Durable consumer name of an agent type's inbox.
pub fn inbox_consumer_name(agent_type: &str) -> String {
    format!("agents-{}", encode_token(agent_type))
}

/// Creates (or updates) the inbox consumer of `agent_type`.
pub async fn ensure_consumer(
    js: &jetstream::Context,
    subjects: &Subjects,
    agent_type: &str,
    ack_wait: Duration,
) -> Result<PullConsumer, caucus_shared::Error> {
    let stream = subjects.stream(StreamKind::Messages);
    let name = inbox_consumer_name(agent_type);
    let cfg = pull::Config {
        durable_name: Some(name.clone()),
        description: Some(format!("messages to built-in agent {agent_type}")),
        filter_subject: subjects.msg(agent_type),
        ack_policy: AckPolicy::Explicit,
        deliver_policy: DeliverPolicy::All,
        ack_wait,
        ..Default::default()
    };
    // Three quick tries: several workers starting at once may race to
    // create the same consumer.
    let tries = ConstantBuilder::default()
        .with_delay(Duration::ZERO)
        .with_max_times(2);
    (|| js.create_consumer_on_stream(cfg.clone(), &stream))
        .retry(tries)
        .await
        .map_err(|e| caucus_shared::Error::consumer(&name, &stream, e))
}

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
            match handle(&agent, &env, &tracker, &shutdown).await {
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

async fn handle(
    agent: &Arc<DebateAgent>,
    env: &Envelope,
    tracker: &Tasks,
    shutdown: &CancellationToken,
) -> Result<(), HandleError> {
    let refused = |code: &'static str, reason: String| HandleError::Refused { code, reason };
    match env.message_type {
        MessageType::Request => {
            let req: Request = env
                .content_as()
                .map_err(|e| refused(e.code(), e.to_string()))?;
            if req.query != FLUSH_QUERY {
                return Err(refused(
                    "unsupported_request",
                    format!(
                        "built-in agent `{}` answers only `{FLUSH_QUERY}` requests, not `{}`",
                        agent.agent_type, req.query
                    ),
                ));
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
            confirm_flush(agent, env, reply_to).await
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
            if c.challenged == agent.agent_type {
                agent.answer(&c, &debate_id, &snapshot_id).await
            } else if c.challenger == agent.agent_type {
                let agent = agent.clone();
                let shutdown = shutdown.clone();
                // Waiting for the evidence must not hold up the inbox.
                tracker.spawn_named("debate-judge", async move {
                    agent.judge(&c, &debate_id, &snapshot_id, shutdown).await;
                });
                Ok(())
            } else {
                tracing::info!(debate_id, agent_type = %agent.agent_type, "challenge names neither side as this agent; ignored");
                Ok(())
            }
        }
        MessageType::DebateResolution | MessageType::DebateEscalation => {
            tracing::info!(agent_type = %agent.agent_type, message_type = %env.message_type, content = %env.content, "debate notice");
            Ok(())
        }
        other => {
            tracing::debug!(agent_type = %agent.agent_type, message_type = %other, "message noted");
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
        .publish(reply_to.to_string(), answer.to_bytes())
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
