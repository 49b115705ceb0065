//! The messages consumer: `caucus.msg.>` through the durable consumer
//! `coordinator-messages` (from the stream's start when it is first made:
//! a request sent before any coordinator ran still becomes work).
//!
//! - `confirmation`: the answer to a message that awaited one
//!   ([`super::awaiting`]);
//! - `request` (other than the facilitator's flush request, which agents
//!   answer): becomes work (`runtime/requests`), and awaits its answer when
//!   it asked for one;
//! - `alert` addressed to anything but `all` (macro broadcasts have their
//!   own consumer): an alert card;
//! - anything else is for the agents and services it is addressed to.
//!
//! Bodies that do not decode are dead-lettered; the agents' own inbox
//! consumers do the same for their subjects, and the DLQ copy is
//! de-duplicated by the original's stream sequence.

use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy, PullConsumer};
use tokio_util::sync::CancellationToken;

use caucus_shared::envelope::{Envelope, MessageType};
use caucus_shared::messages::{agent_type_of, Request, FLUSH_WORKING_MEMORY};
use caucus_shared::subjects::{StreamKind, Subjects};

use super::classify::CODE_UNADDRESSABLE;
use super::context::Inbound;
use super::findings::{outside_alert, stored_at};
use super::settle::{self, dead_letter, Retry, Settle};
use crate::runtime::requests::RequestError;

/// Durable name of the coordinator's messages consumer.
pub const MESSAGES_CONSUMER: &str = "coordinator-messages";

/// Creates (or updates) the consumer.
pub async fn ensure_consumer(
    js: &jetstream::Context,
    subjects: &Subjects,
    ack_wait: Duration,
    part: crate::runtime::partition::Partition,
) -> Result<PullConsumer, caucus_shared::Error> {
    let stream = subjects.stream(StreamKind::Messages);
    let cfg = pull::Config {
        durable_name: Some(part.consumer(MESSAGES_CONSUMER)),
        description: Some("messages: confirmations, requests, outside alerts".into()),
        filter_subject: format!("{}.msg.>", subjects.prefix()),
        ack_policy: AckPolicy::Explicit,
        deliver_policy: DeliverPolicy::All,
        ack_wait,
        ..Default::default()
    };
    js.create_consumer_on_stream(cfg, &stream)
        .await
        .map_err(|e| caucus_shared::Error::consumer(&part.consumer(MESSAGES_CONSUMER), &stream, e))
}

/// The addressee token of a `caucus.msg.<to>` subject, decoded.
fn addressee_of(subjects: &Subjects, subject: &str) -> Option<String> {
    settle::subject_token(subjects, "msg", subject)
}

/// Consumes until `shutdown` (or the scheduler goes away).
pub async fn run(consumer: PullConsumer, inbound: Inbound, shutdown: CancellationToken) {
    let inbound = &inbound;
    settle::consume(&consumer, "messages", &shutdown, |msg| async move {
        // In the sender's trace: a request's workflow is submitted inside
        // this span, so its root is a child of the request message.
        let span = caucus_shared::nats::trace::consumer_span(&msg.subject, msg.headers.as_ref());
        let outcome = tracing::Instrument::instrument(handle(inbound, &msg), span).await;
        (msg, outcome)
    })
    .await;
}

async fn handle(inbound: &Inbound, msg: &jetstream::Message) -> Result<Settle, Retry> {
    let Some(env) = settle::decode(inbound, msg).await else {
        return Ok(Settle::Done);
    };
    let Some(to) = addressee_of(&inbound.subjects, &msg.subject) else {
        return dead_letter(
            inbound,
            msg,
            CODE_UNADDRESSABLE,
            "the subject's addressee token does not decode",
        )
        .await;
    };
    let at = stored_at(msg);
    match env.message_type {
        MessageType::Confirmation => {
            inbound
                .record_answer(&env, at)
                .await
                .map_err(|e| Retry::Later(e.to_string()))?;
            Ok(Settle::Ack)
        }
        MessageType::Request => request(inbound, msg, &env, &to, at).await,
        MessageType::Alert if !to.eq_ignore_ascii_case("all") => {
            let item = env
                .content
                .get("item")
                .and_then(|v| v.as_str())
                .map(str::to_string);
            outside_alert(inbound, &env, item.as_deref()).await
        }
        _ => Ok(Settle::Ack),
    }
}

async fn request(
    inbound: &Inbound,
    msg: &jetstream::Message,
    env: &Envelope,
    to: &str,
    at: chrono::DateTime<chrono::Utc>,
) -> Result<Settle, Retry> {
    // Decoding checked the content already.
    let Ok(req) = env.content_as::<Request>() else {
        return Ok(Settle::Ack);
    };
    if req.query == FLUSH_WORKING_MEMORY {
        return Ok(Settle::Ack);
    }
    if to.eq_ignore_ascii_case("all") {
        return dead_letter(
            inbound,
            msg,
            CODE_UNADDRESSABLE,
            "a request goes to one agent type: publish it on caucus.msg.<agent_type>",
        )
        .await;
    }
    let agent_type = agent_type_of(to).to_string();
    match inbound.requests.accept(env, at, &agent_type).await {
        Ok(()) => {}
        Err(RequestError::Invalid { code, reason }) => {
            return dead_letter(inbound, msg, code, &reason).await
        }
        Err(RequestError::Transient(why)) => return Err(Retry::Later(why)),
    }
    if env.requires_response {
        let item = req.item.clone().unwrap_or_default();
        inbound
            .await_response(env, &item, at)
            .await
            .map_err(|e| Retry::Later(e.to_string()))?;
    }
    Ok(Settle::Ack)
}
