//! How built-in agents take part in debates the facilitator hands them
//! (challenge stamped with `debate_id` and `snapshot_id`, on
//! `caucus.msg.<agent>`). Every message they send cites that snapshot.
//!
//! * The **challenged** agent acknowledges at once, then gives its evidence:
//!   its margin computation year by year
//!   ([`caucus_agents::analysts::margin_debate::evidence`]). For a challenge
//!   it has no evidence for (another metric, an unknown item) it acknowledges
//!   with a note saying so and sends none; the facilitator's evidence
//!   deadline then escalates the debate.
//! * The **challenger** reads the challenged agent's evidence from
//!   `caucus.debates.<debate_id>.evidence` (from the stream's start, so it
//!   cannot miss evidence sent before it looked) for at most
//!   `worker.debate_evidence_wait`, and gives its verdict by the rule of
//!   [`caucus_agents::analysts::margin_debate::verdict`]. A verdict lost to
//!   a crash becomes the facilitator's `verdict_timeout` (level 2).
//!
//! Publishes carry `Nats-Msg-Id` `<debate_id>:<event>:<agent>`, so a
//! redelivered challenge does not answer twice.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::consumer::push::OrderedConfig;
use async_nats::jetstream::consumer::DeliverPolicy;
use async_nats::jetstream::{self};
use async_nats::HeaderMap;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use caucus_shared::envelope::{Envelope, MessageType};
use caucus_shared::messages::Challenge;
use caucus_shared::nats::trace;
use caucus_shared::subjects::{StreamKind, Subjects};

use caucus_agents::analysts::margin_debate::{self, METRIC};
use caucus_agents::analysts::Dataset;

/// Why an inbox message was not handled.
#[derive(Debug, thiserror::Error)]
pub enum HandleError {
    /// NATS trouble: the message is redelivered.
    #[error("{0}")]
    Transient(String),
    /// The message cannot be served: dead-lettered with `code`.
    #[error("{code}: {reason}")]
    Refused {
        /// DLQ code.
        code: &'static str,
        /// The specific reason.
        reason: String,
    },
}

/// One built-in agent type taking part in debates.
pub struct DebateAgent {
    /// The agent type (its name in challenges).
    pub agent_type: String,
    /// Core NATS (flush confirmations).
    pub nats: async_nats::Client,
    /// JetStream (debate messages).
    pub js: jetstream::Context,
    /// Subject builders.
    pub subjects: Subjects,
    /// The data set the analysts use.
    pub data: Arc<Dataset>,
    /// Longest wait for the challenged agent's evidence.
    pub evidence_wait: Duration,
}

impl std::fmt::Debug for DebateAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DebateAgent")
            .field("agent_type", &self.agent_type)
            .finish_non_exhaustive()
    }
}

/// True when the challenge disputes the operating margin (a position or the
/// context names it).
fn disputes_margin(c: &Challenge, raw: Option<&Value>) -> bool {
    let named = [&c.challenger_position, &c.challenged_position]
        .into_iter()
        .flatten()
        .any(|p| p.metric.as_deref() == Some(METRIC));
    named
        || raw
            .and_then(|r| r.pointer("/context/metric"))
            .and_then(Value::as_str)
            == Some(METRIC)
}

impl DebateAgent {
    async fn publish(
        &self,
        debate_id: &str,
        event: &str,
        env: Envelope,
    ) -> Result<(), HandleError> {
        let mut headers = HeaderMap::new();
        let id = format!("{debate_id}:{event}:{}", self.agent_type);
        headers.insert("Nats-Msg-Id", id.as_str());
        trace::inject(&mut headers);
        self.js
            .publish_with_headers(
                self.subjects.debates(debate_id, event),
                headers,
                env.to_bytes(),
            )
            .await
            .map_err(|e| HandleError::Transient(format!("{event} for {debate_id}: {e}")))?
            .await
            .map_err(|e| HandleError::Transient(format!("{event} for {debate_id}: {e}")))?;
        Ok(())
    }

    /// The challenged side: acknowledge, then give the evidence.
    pub async fn answer(
        &self,
        c: &Challenge,
        debate_id: &str,
        snapshot_id: &str,
    ) -> Result<(), HandleError> {
        let evidence = match (&c.item, disputes_margin(c, None)) {
            (Some(item), true) => match self.data.company(item) {
                Ok(company) => {
                    margin_debate::evidence(&self.agent_type, company).map_err(|e| e.message)
                }
                Err(e) => Err(e.to_string()),
            },
            (None, _) => Err("the challenge names no item".into()),
            (_, false) => Err(format!(
                "built-in agents give evidence on `{METRIC}` only; this challenge disputes `{}`",
                c.disputed_finding
            )),
        };
        let note = match &evidence {
            Ok(_) => "evidence follows: the computation year by year".to_string(),
            Err(why) => format!(
                "no evidence from built-in agent `{}`: {why}",
                self.agent_type
            ),
        };
        let ack = json!({
            "debate_id": debate_id,
            "challenge_id": c.challenge_id,
            "note": note,
            "snapshot_id": snapshot_id,
        });
        let env = Envelope::new(MessageType::DebateAck, self.agent_type.clone(), ack)
            .to(c.challenger.clone())
            .with_correlation_id(debate_id.to_string());
        self.publish(debate_id, "ack", env).await?;
        tracing::info!(debate_id, agent_type = %self.agent_type, "challenge acknowledged");
        let Ok(ev) = evidence else {
            tracing::warn!(debate_id, "{note}");
            return Ok(());
        };
        let mut content = ev.content;
        content["debate_id"] = json!(debate_id);
        content["snapshot_id"] = json!(snapshot_id);
        let env = Envelope::new(
            MessageType::DebateEvidence,
            self.agent_type.clone(),
            content,
        )
        .to(c.challenger.clone())
        .with_correlation_id(debate_id.to_string());
        self.publish(debate_id, "evidence", env).await?;
        tracing::info!(debate_id, agent_type = %self.agent_type, "evidence given");
        Ok(())
    }

    /// The challenger side: wait for the evidence, then give the verdict.
    pub async fn judge(
        &self,
        c: &Challenge,
        debate_id: &str,
        snapshot_id: &str,
        shutdown: CancellationToken,
    ) {
        let evidence = tokio::select! {
            _ = shutdown.cancelled() => return,
            e = tokio::time::timeout(self.evidence_wait, self.evidence_of(debate_id, &c.challenged)) => e,
        };
        let evidence = match evidence {
            Ok(Ok(e)) => e,
            Ok(Err(e)) => {
                tracing::warn!(debate_id, error = %e, "cannot read the debate's evidence; no verdict");
                return;
            }
            Err(_) => {
                tracing::warn!(debate_id, "no evidence within debate_evidence_wait; no verdict (the facilitator escalates)");
                return;
            }
        };
        let verdict = match margin_debate::verdict(&self.agent_type, &c.challenged, &evidence) {
            Ok(v) => v,
            Err(why) => {
                tracing::info!(debate_id, "{why}; no verdict");
                return;
            }
        };
        let content = json!({
            "debate_id": debate_id,
            "accepted": verdict.accepted,
            "reason": verdict.reason,
            "snapshot_id": snapshot_id,
        });
        let env = Envelope::new(MessageType::DebateVerdict, self.agent_type.clone(), content)
            .to(c.challenged.clone())
            .with_correlation_id(debate_id.to_string());
        // A publish failure is retried a few times; the facilitator's
        // verdict deadline covers the rest.
        for attempt in 1..=5u32 {
            match self.publish(debate_id, "verdict", env.clone()).await {
                Ok(()) => {
                    tracing::info!(
                        debate_id,
                        accepted = verdict.accepted,
                        "verdict given: {}",
                        verdict.reason
                    );
                    return;
                }
                Err(e) => {
                    tracing::warn!(debate_id, attempt, error = %e, "verdict not published");
                    tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
                }
            }
        }
    }

    /// The first evidence `from` sent in `debate_id` (its content).
    async fn evidence_of(&self, debate_id: &str, from: &str) -> Result<Value, String> {
        let name = self.subjects.stream(StreamKind::Debates);
        let stream = self
            .js
            .get_stream(&name)
            .await
            .map_err(|e| format!("stream {name}: {e}"))?;
        let consumer = stream
            .create_consumer(OrderedConfig {
                deliver_subject: self.js.client().new_inbox(),
                filter_subject: self.subjects.debates(debate_id, "evidence"),
                deliver_policy: DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .map_err(|e| format!("evidence watch: {e}"))?;
        let mut messages = consumer
            .messages()
            .await
            .map_err(|e| format!("evidence watch: {e}"))?;
        while let Some(m) = messages.next().await {
            let Ok(m) = m else { continue };
            // Someone else's bad body is not ours to dead-letter: the
            // facilitator's consumer does that.
            let Ok(env) = Envelope::decode(&m.payload, 1 << 20) else {
                continue;
            };
            if env.message_type == MessageType::DebateEvidence
                && env.from_agent == from
                && env.content.get("debate_id").and_then(Value::as_str) == Some(debate_id)
            {
                return Ok(env.content);
            }
        }
        Err("evidence watch ended".into())
    }
}
