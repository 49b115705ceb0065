//! Registering the messages that await a `confirmation`, recording the
//! answers, and the alert card when none came in time.

use chrono::{DateTime, Utc};
use serde_json::json;

use caucus_shared::envelope::{Envelope, Priority};
use caucus_shared::messages::Confirmation;

use super::classify::{severity_of, text_of};
use super::context::Inbound;
use super::responses::{
    due_at, Answer, ResponseRecord, ResponseStoreError, RESPONSE_SCHEMA_VERSION,
};
use crate::runtime::publish;

impl Inbound {
    /// Starts waiting for the answer to `env` (stored at `stored_at`,
    /// about `item`). A redelivered message keeps what its record holds.
    pub async fn await_response(
        &self,
        env: &Envelope,
        item: &str,
        stored_at: DateTime<Utc>,
    ) -> Result<(), ResponseStoreError> {
        let timeout = self.timeouts.for_priority(env.priority);
        let mut rec = ResponseRecord {
            schema_version: RESPONSE_SCHEMA_VERSION,
            message_id: env.id.clone(),
            message_type: env.message_type.to_string(),
            from_agent: env.from_agent.clone(),
            to_agent: env.to_agent.clone().unwrap_or_default(),
            item: item.to_string(),
            priority: env.priority,
            text: text_of(env),
            stored_at,
            due_at: due_at(stored_at, timeout),
            answer: None,
            alerted_at: None,
        };
        if let Some(old) = self.responses.get(&env.id).await? {
            rec.answer = old.answer;
            rec.alerted_at = old.alerted_at;
        }
        self.responses.put(&rec).await?;
        self.pending().hold(rec);
        Ok(())
    }

    /// Records a `confirmation` as the answer to the message its
    /// `correlation_id` (else `content.in_reply_to`) names.
    pub async fn record_answer(
        &self,
        env: &Envelope,
        stored_at: DateTime<Utc>,
    ) -> Result<(), ResponseStoreError> {
        let content = env.content_as::<Confirmation>().ok();
        let Some(id) = env
            .correlation_id
            .clone()
            .or_else(|| content.as_ref().and_then(|c| c.in_reply_to.clone()))
        else {
            return Ok(());
        };
        let answer = Answer {
            by: env.from_agent.clone(),
            used: content.as_ref().and_then(|c| c.used),
            note: content.as_ref().and_then(|c| c.note.clone()),
            confirmation_id: env.id.clone(),
            at: stored_at,
        };
        // Only messages that asked for an answer are tracked; other
        // confirmations (debate flushes, agents' own exchanges) are not.
        let Some(mut rec) = self.responses.get(&id).await? else {
            return Ok(());
        };
        if rec.answer.is_some() {
            // The first answer stands (a redelivery, or a second
            // addressee of an `all` message).
            self.pending().release(&id);
            return Ok(());
        }
        rec.answer = Some(answer);
        self.responses.put(&rec).await?;
        self.pending().release(&id);
        Ok(())
    }

    /// Stops waiting for `message_id` (it was dead-lettered after all).
    pub async fn forget_response(&self, message_id: &str) -> Result<(), ResponseStoreError> {
        self.pending().release(message_id);
        self.responses.delete(message_id).await
    }

    /// Sends one alert card per message whose answer is overdue, then
    /// stops waiting for it. A card that cannot be sent is tried again on
    /// the next check.
    pub async fn alert_overdue(&self) {
        let now = self.clock.now();
        let due = self.pending().overdue(now);
        for mut rec in due {
            // Answered meanwhile (the message consumer runs alongside)?
            if let Ok(Some(cur)) = self.responses.get(&rec.message_id).await {
                if cur.answer.is_some() || cur.alerted_at.is_some() {
                    self.pending().release(&rec.message_id);
                    continue;
                }
            }
            let severity = match severity_of(rec.priority) {
                "info" => "warning",
                s => s,
            };
            let card = publish::alert(
                "response_overdue",
                severity,
                json!({
                    "message_id": rec.message_id,
                    "message_type": rec.message_type,
                    "from_agent": rec.from_agent,
                    "to_agent": rec.to_agent,
                    "item": rec.item,
                    "priority": rec.priority,
                    "text": rec.text,
                    "stored_at": rec.stored_at,
                    "due_at": rec.due_at,
                    "summary": format!(
                        "{} sent {} a {} about {} that required a response; none came by {}",
                        rec.from_agent, rec.to_agent, rec.message_type, rec.item, rec.due_at
                    ),
                    "actions": [format!(
                        "check that a {} worker runs and reads caucus.findings.{}",
                        rec.to_agent, rec.item
                    )],
                }),
            )
            .with_priority(rec.priority.max(Priority::High));
            let msg_id = format!("alert:response:{}", rec.message_id);
            if let Err(e) = self.card(severity, &card, &msg_id).await {
                tracing::warn!(message_id = %rec.message_id, error = %e, "response-overdue alert not sent; retrying on the next check");
                continue;
            }
            rec.alerted_at = Some(now);
            if let Err(e) = self.responses.put(&rec).await {
                tracing::warn!(message_id = %rec.message_id, error = %e, "cannot mark a response alerted; the card is de-duplicated if sent again");
            }
            tracing::info!(message_id = %rec.message_id, from = %rec.from_agent, to = %rec.to_agent, item = %rec.item, "response overdue");
            self.pending().release(&rec.message_id);
        }
    }
}
