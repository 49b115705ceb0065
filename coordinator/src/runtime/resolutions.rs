//! Debates feed the analyses that depend on them: the coordinator consumes
//! the facilitator's `debate_resolution` events (`caucus.debates.*.resolution`,
//! durable consumer `coordinator-resolutions`) and, for a binding resolution
//! of a debate that belongs to one of its workflows, settles the assumption
//! and re-runs each completed task that used another value (see
//! [`crate::workflow::WorkflowRecord::settle_assumption`]).
//!
//! Provisional (level-4) resolutions change nothing here: the pipeline goes
//! on with the conservative default until a person reviews it at a gate.
//! Handling is idempotent (a task that already used the settled value is
//! not re-run), so a redelivered event or one for a review the coordinator
//! itself forwarded (`coordinator.gate_review`) does no harm.

use std::ops::ControlFlow;
use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, consumer::AckPolicy, AckKind};
use async_nats::Client;
use tokio_util::sync::CancellationToken;

use caucus_shared::api::facilitator::{DebateRequest, GetDebate};
use caucus_shared::api::{ApiClient, CODE_NOT_FOUND, CODE_NO_RESPONDERS};
use caucus_shared::envelope::{DecodeError, Envelope, MessageType};
use caucus_shared::messages::DebateResolution;
use caucus_shared::nats::dlq::{decode_or_dead_letter, Dlq};
use caucus_shared::subjects::{StreamKind, Subjects};

use super::commands::SchedulerHandle;
use super::gates::{GateOp, SettleReply};
use super::gates_api::call_as;

/// Durable name of the consumer.
pub const RESOLUTIONS_CONSUMER: &str = "coordinator-resolutions";

/// A binding resolution worth applying: (debate, metric, value, summary).
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    /// The debate.
    pub debate_id: String,
    /// The settled metric.
    pub metric: String,
    /// Its value.
    pub value: f64,
    /// For the re-run record.
    pub reason: String,
}

/// Decodes a resolution event; `Ok(None)` when it settles nothing numeric
/// (provisional, no position, no metric, a text value).
pub fn decode(bytes: &[u8], max: usize) -> Result<Option<Settled>, DecodeError> {
    let env = Envelope::decode(bytes, max)?;
    if env.message_type != MessageType::DebateResolution {
        return Ok(None);
    }
    let r: DebateResolution = env.content_as()?;
    if r.provisional {
        return Ok(None);
    }
    let Some(p) = r.position else { return Ok(None) };
    let Some(metric) = p.metric.clone() else {
        return Ok(None);
    };
    let Some(value) = p.number() else {
        return Ok(None);
    };
    Ok(Some(Settled {
        reason: format!(
            "debate {} resolved at level {}: {} ({metric} = {value})",
            r.debate_id, r.level, p.statement
        ),
        debate_id: r.debate_id,
        metric,
        value,
    }))
}

/// The durable consumer could not be made (retried until it can).
#[derive(Debug, thiserror::Error)]
#[error("consumer {consumer} on {stream}: {source}")]
pub struct ConsumerError {
    /// The consumer's durable name.
    consumer: String,
    /// The debates stream.
    stream: String,
    /// What JetStream answered.
    #[source]
    source: jetstream::stream::ConsumerError,
}

async fn ensure_consumer(
    js: &jetstream::Context,
    subjects: &Subjects,
    ack_wait: Duration,
    part: crate::runtime::partition::Partition,
) -> Result<jetstream::consumer::PullConsumer, ConsumerError> {
    let stream = subjects.stream(StreamKind::Debates);
    let cfg = pull::Config {
        durable_name: Some(part.consumer(RESOLUTIONS_CONSUMER)),
        description: Some("debate resolutions that settle workflow assumptions".into()),
        // A wildcard, written out: `Subjects::debates` would encode the `*`.
        filter_subject: format!("{}.debates.*.resolution", subjects.prefix()),
        ack_policy: AckPolicy::Explicit,
        ack_wait,
        max_ack_pending: 100,
        ..Default::default()
    };
    js.create_consumer_on_stream(cfg, &stream)
        .await
        .map_err(|source| ConsumerError {
            consumer: part.consumer(RESOLUTIONS_CONSUMER),
            stream,
            source,
        })
}

/// What became of one event.
enum Handled {
    Done,
    Retry,
}

async fn apply(
    client: &Client,
    subjects: &Subjects,
    timeout: Duration,
    scheduler: &SchedulerHandle,
    part: crate::runtime::partition::Partition,
    s: Settled,
) -> Handled {
    let request = DebateRequest {
        debate_id: s.debate_id.clone(),
    };
    let debate = match ApiClient::new(client.clone(), subjects.clone(), timeout)
        .call::<GetDebate>(&request)
        .await
    {
        Ok(d) => d.debate,
        Err(e) if e.code == CODE_NOT_FOUND => return Handled::Done,
        Err(e) => {
            if e.code != CODE_NO_RESPONDERS {
                tracing::warn!(debate_id = %s.debate_id, error = %e, "cannot read the debate; will retry");
            }
            return Handled::Retry;
        }
    };
    let Some(wf) = debate.challenge.workflow_id.as_deref() else {
        return Handled::Done;
    };
    // Every partition reads every resolution; the workflow's owner acts.
    if !part.owns(wf) {
        return Handled::Done;
    }
    let op = GateOp::Settle {
        workflow_id: wf.to_string(),
        metric: s.metric.clone(),
        value: s.value,
        reason: s.reason.clone(),
    };
    match call_as::<SettleReply>(scheduler, op).await {
        Ok(v) => {
            let renewed = v.renewed.len();
            if renewed > 0 {
                tracing::info!(workflow_id = wf, debate_id = %s.debate_id, metric = %s.metric, value = s.value, renewed, "debate resolution re-runs tasks");
            }
            Handled::Done
        }
        // Not this coordinator's workflow, or already finished for good.
        Err(e) if e.code == CODE_NOT_FOUND || e.code == "workflow_finished" => Handled::Done,
        Err(e) => {
            tracing::warn!(workflow_id = wf, error = %e, "resolution not applied; will retry");
            Handled::Retry
        }
    }
}

/// Runs until `shutdown`.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    js: jetstream::Context,
    subjects: Subjects,
    ack_wait: Duration,
    request_timeout: Duration,
    dlq: Dlq,
    max_bytes: usize,
    scheduler: SchedulerHandle,
    part: crate::runtime::partition::Partition,
    shutdown: CancellationToken,
) {
    let client = js.client();
    let Some(consumer) =
        caucus_shared::nats::consume::ensure_retrying("resolutions", &shutdown, || {
            ensure_consumer(&js, &subjects, ack_wait, part)
        })
        .await
    else {
        return;
    };
    let (dlq, client, subjects, scheduler) = (&dlq, &client, &subjects, &scheduler);
    caucus_shared::nats::consume::consume(
        &consumer,
        "resolutions",
        &shutdown,
        move |msg| async move {
            let Some(settled) = decode_or_dead_letter(dlq, &msg, max_bytes, decode).await else {
                return ControlFlow::Continue(());
            };
            let outcome = match settled {
                None => Handled::Done,
                Some(s) => apply(client, subjects, request_timeout, scheduler, part, s).await,
            };
            match outcome {
                Handled::Done => {
                    let _ = msg.ack().await;
                }
                Handled::Retry => {
                    let _ = msg
                        .ack_with(AckKind::Nak(Some(Duration::from_secs(2))))
                        .await;
                }
            }
            ControlFlow::Continue(())
        },
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn event(provisional: bool, value: Value) -> Vec<u8> {
        json!({"message_type": "debate_resolution", "from_agent": "facilitator",
            "content": {"debate_id": "D1", "level": 2, "method": "credibility",
                        "provisional": provisional,
                        "position": {"statement": "28% operating margin", "metric": "operating_margin", "value": value}}})
        .to_string()
        .into_bytes()
    }

    #[test]
    fn binding_numeric_resolutions_settle_and_others_do_not() {
        let s = decode(&event(false, json!(0.28)), 1 << 20)
            .unwrap()
            .unwrap();
        assert_eq!((s.metric.as_str(), s.value), ("operating_margin", 0.28));
        assert!(s.reason.contains("level 2"), "{}", s.reason);
        let s = decode(&event(false, json!("28%")), 1 << 20)
            .unwrap()
            .unwrap();
        assert!((s.value - 0.28).abs() < 1e-12);
        assert_eq!(decode(&event(true, json!(0.25)), 1 << 20).unwrap(), None);
        assert_eq!(decode(&event(false, json!("high")), 1 << 20).unwrap(), None);
        assert!(decode(b"{not json", 1 << 20).is_err());
    }
}
