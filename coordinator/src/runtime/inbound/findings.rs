//! The findings consumer: `caucus.findings.>` through the durable consumer
//! `coordinator-findings` (from the stream's start when it is first made,
//! so findings stored before any coordinator ran are not missed; the index
//! is refilled from the stream by [`super::replay`] when a term begins). Each message
//! is acknowledged once its effect is stored: the finding held by the
//! scheduler (and the flags it set persisted), its awaited response
//! registered, or its alert card published.

use std::time::Duration;

use async_nats::jetstream;
use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy, PullConsumer};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use caucus_shared::envelope::Envelope;
use caucus_shared::subjects::{StreamKind, Subjects};

use super::classify::{finding_intake, severity_of, FindingIntake, CODE_UNADDRESSABLE};
use super::context::Inbound;
use super::settle::{self, dead_letter, Retry, Settle};
use crate::runtime::publish;

/// Durable name of the coordinator's findings consumer.
pub const FINDINGS_CONSUMER: &str = "coordinator-findings";

/// Creates (or updates) the consumer.
pub async fn ensure_consumer(
    js: &jetstream::Context,
    subjects: &Subjects,
    ack_wait: Duration,
    part: crate::runtime::partition::Partition,
) -> Result<PullConsumer, caucus_shared::Error> {
    let stream = subjects.stream(StreamKind::Findings);
    let cfg = pull::Config {
        durable_name: Some(part.consumer(FINDINGS_CONSUMER)),
        description: Some("findings: hand addressed ones to tasks, flag late ones".into()),
        filter_subject: subjects.findings_all(),
        ack_policy: AckPolicy::Explicit,
        deliver_policy: DeliverPolicy::All,
        ack_wait,
        ..Default::default()
    };
    js.create_consumer_on_stream(cfg, &stream)
        .await
        .map_err(|e| caucus_shared::Error::consumer(&part.consumer(FINDINGS_CONSUMER), &stream, e))
}

/// The item a findings subject names (`caucus.findings.BRK~2EB` → `BRK.B`).
pub fn item_of(subjects: &Subjects, subject: &str) -> Option<String> {
    settle::subject_token(subjects, "findings", subject)
}

pub use caucus_shared::nats::stored::stored_at;

/// Consumes until `shutdown` (or the scheduler goes away).
pub async fn run(consumer: PullConsumer, inbound: Inbound, shutdown: CancellationToken) {
    let inbound = &inbound;
    settle::consume(&consumer, "findings", &shutdown, |msg| async move {
        let outcome = handle(inbound, &msg).await;
        (msg, outcome)
    })
    .await;
}

async fn handle(inbound: &Inbound, msg: &jetstream::Message) -> Result<Settle, Retry> {
    // Dead-letters and settles what does not decode.
    let Some(env) = settle::decode(inbound, msg).await else {
        return Ok(Settle::Done);
    };
    let Some(item) = item_of(&inbound.subjects, &msg.subject) else {
        return dead_letter(
            inbound,
            msg,
            CODE_UNADDRESSABLE,
            "the subject's item token does not decode",
        )
        .await;
    };
    let at = stored_at(msg);
    let (addressee, finding) = match finding_intake(&env, at) {
        Err(r) => return dead_letter(inbound, msg, r.code, &r.reason).await,
        Ok(FindingIntake::Unaddressed) => return Ok(Settle::Ack),
        Ok(FindingIntake::Alert) => return outside_alert(inbound, &env, Some(&item)).await,
        Ok(FindingIntake::Addressed { addressee, finding }) => (addressee, finding),
    };
    // Registered before the scheduler hands the finding to a task, so
    // the task's confirmation always finds it.
    if finding.requires_response {
        inbound
            .await_response(&env, &item, at)
            .await
            .map_err(|e| Retry::Later(e.to_string()))?;
    }
    let held = super::hold::hold(
        inbound,
        item.clone(),
        addressee,
        finding,
        crate::runtime::requests::is_answer_finding(&env),
    )
    .await;
    match held {
        Ok(Ok(flagged)) => {
            if flagged > 0 {
                tracing::info!(finding_id = %env.id, item = %item, flagged, "late finding flagged workflows for re-evaluation");
            }
        }
        Ok(Err(why)) => {
            if env.requires_response {
                inbound
                    .forget_response(&env.id)
                    .await
                    .map_err(|e| Retry::Later(e.to_string()))?;
            }
            return dead_letter(inbound, msg, CODE_UNADDRESSABLE, &why).await;
        }
        Err(super::hold::NotHeld::Gone) => return Err(Retry::SchedulerGone),
        Err(super::hold::NotHeld::Later(e)) => return Err(Retry::Later(e)),
    }
    Ok(Settle::Ack)
}

/// An outside service's alert becomes a card people see, by priority.
pub(super) async fn outside_alert(
    inbound: &Inbound,
    env: &Envelope,
    item: Option<&str>,
) -> Result<Settle, Retry> {
    let severity = severity_of(env.priority);
    let alert = env
        .content_as::<caucus_shared::messages::Alert>()
        .unwrap_or_default();
    let card = publish::alert(
        alert.event_type.as_deref().unwrap_or("outside_alert"),
        severity,
        json!({
            "source": "outside",
            "message_id": env.id,
            "from_agent": env.from_agent,
            "to_agent": env.to_agent,
            "item": item,
            "priority": env.priority,
            "sent_at": env.timestamp,
            "content": env.content,
        }),
    )
    .with_priority(env.priority);
    inbound
        .card(severity, &card, &format!("alert:outside:{}", env.id))
        .await
        .map(|()| Settle::Ack)
        .map_err(|e| Retry::Later(e.to_string()))
}
