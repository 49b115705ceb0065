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
use backon::{ExponentialBuilder, Retryable};
use futures::StreamExt;
use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use caucus_shared::envelope::{Envelope, MessageType};
use caucus_shared::messages::{Challenge, DebateAck, DebateEvidence, DebateVerdict};
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

/// Why the challenger could not read the debate's evidence.
#[derive(Debug, thiserror::Error)]
pub enum EvidenceWatchError {
    /// The debates stream cannot be read.
    #[error("stream {name}: {source}")]
    Stream {
        /// The stream.
        name: String,
        /// What NATS said.
        #[source]
        source: async_nats::jetstream::context::GetStreamError,
    },
    /// The ordered consumer could not be created.
    #[error("evidence watch: {0}")]
    Consumer(#[source] async_nats::jetstream::stream::ConsumerError),
    /// Its messages could not be read.
    #[error("evidence watch: {0}")]
    Messages(#[source] async_nats::jetstream::consumer::StreamError),
    /// The watch stopped before the evidence came.
    #[error("evidence watch ended")]
    Ended,
}

/// A built-in analyst's evidence (its own content, with its computation)
/// stamped with the debate and the snapshot it cites.
#[derive(Serialize)]
struct StampedEvidence<'a> {
    /// The debate.
    debate_id: &'a str,
    /// The snapshot every debate message cites.
    snapshot_id: &'a str,
    /// The analyst's `debate_evidence` content.
    #[serde(flatten)]
    content: Value,
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
        let ack = DebateAck {
            debate_id: debate_id.to_string(),
            challenge_id: Some(c.challenge_id.clone()),
            respond_by: None,
            note: Some(note.clone()),
            snapshot_id: Some(snapshot_id.to_string()),
        };
        let env = Envelope::with_content(self.agent_type.clone(), &ack)
            .map_err(|e| HandleError::Refused {
                code: "invalid_content",
                reason: e.to_string(),
            })?
            .to(c.challenger.clone())
            .with_correlation_id(debate_id.to_string());
        self.publish(debate_id, "ack", env).await?;
        tracing::info!(debate_id, agent_type = %self.agent_type, "challenge acknowledged");
        let Ok(ev) = evidence else {
            tracing::warn!(debate_id, "{note}");
            return Ok(());
        };
        let stamped = StampedEvidence {
            debate_id,
            snapshot_id,
            content: ev.content,
        };
        let content = serde_json::to_value(&stamped).map_err(|e| HandleError::Refused {
            code: "invalid_content",
            reason: e.to_string(),
        })?;
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
        let content = DebateVerdict {
            debate_id: debate_id.to_string(),
            accepted: verdict.accepted,
            reason: Some(verdict.reason.clone()),
            snapshot_id: Some(snapshot_id.to_string()),
        };
        let env = match Envelope::with_content(self.agent_type.clone(), &content) {
            Ok(env) => env
                .to(c.challenged.clone())
                .with_correlation_id(debate_id.to_string()),
            Err(e) => {
                tracing::error!(debate_id, error = %e, "verdict invalid; no verdict");
                return;
            }
        };
        // A publish failure is retried a few times (0.2 s, 0.4 s, 0.8 s,
        // 1 s); the facilitator's verdict deadline covers the rest.
        let tries = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(200))
            .with_max_delay(Duration::from_secs(1))
            .with_max_times(4);
        let sent = (|| self.publish(debate_id, "verdict", env.clone()))
            .retry(tries)
            .notify(|e, after| {
                tracing::warn!(debate_id, error = %e, ?after, "verdict not published; retrying");
            })
            .await;
        match sent {
            Ok(()) => tracing::info!(
                debate_id,
                accepted = verdict.accepted,
                "verdict given: {}",
                verdict.reason
            ),
            Err(e) => tracing::warn!(
                debate_id,
                error = %e,
                "verdict not published; the facilitator's verdict deadline escalates"
            ),
        }
    }

    /// The first evidence `from` sent in `debate_id` (its content).
    async fn evidence_of(&self, debate_id: &str, from: &str) -> Result<Value, EvidenceWatchError> {
        let name = self.subjects.stream(StreamKind::Debates);
        let stream = match self.js.get_stream(&name).await {
            Ok(s) => s,
            Err(source) => return Err(EvidenceWatchError::Stream { name, source }),
        };
        let consumer = stream
            .create_consumer(OrderedConfig {
                deliver_subject: self.js.client().new_inbox(),
                filter_subject: self.subjects.debates(debate_id, "evidence"),
                deliver_policy: DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .map_err(EvidenceWatchError::Consumer)?;
        let mut messages = consumer
            .messages()
            .await
            .map_err(EvidenceWatchError::Messages)?;
        while let Some(m) = messages.next().await {
            let Ok(m) = m else { continue };
            // Someone else's bad body is not ours to dead-letter: the
            // facilitator's consumer does that.
            let Ok(env) = Envelope::decode(&m.payload, 1 << 20) else {
                continue;
            };
            let ours = env.message_type == MessageType::DebateEvidence
                && env.from_agent == from
                && env
                    .content_as::<DebateEvidence>()
                    .is_ok_and(|e| e.debate_id == debate_id);
            if ours {
                return Ok(env.content);
            }
        }
        Err(EvidenceWatchError::Ended)
    }
}
