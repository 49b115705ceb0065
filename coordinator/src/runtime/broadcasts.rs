//! Macro broadcasts (seed 001: "Lead Coordinator: flag in-progress analyses
//! for potential re-evaluation"). The leader reads `caucus.msg.all` through
//! the durable consumer `coordinator-broadcasts` (new messages only: a
//! broadcast concerns the analyses in progress when it is sent) and, for a
//! `system_critical` regime change or rate announcement, adds a flag to
//! every unfinished workflow without stopping it. Bodies that do not decode
//! go to the DLQ; other broadcasts are acknowledged and ignored.

use std::ops::ControlFlow;
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, AckPolicy, DeliverPolicy, PullConsumer};
use async_nats::jetstream::{self, AckKind};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use caucus_shared::clock::SharedClock;
use caucus_shared::envelope::Envelope;
use caucus_shared::nats::dlq::{decode_or_dead_letter, Dlq};
use caucus_shared::subjects::{StreamKind, Subjects};

use super::commands::{ask, AskError, Command, SchedulerHandle};
use crate::workflow::WorkflowFlag;

/// Durable name of the coordinator's broadcast consumer.
pub const BROADCAST_CONSUMER: &str = "coordinator-broadcasts";

/// Creates (or updates) the consumer.
pub async fn ensure_consumer(
    js: &jetstream::Context,
    subjects: &Subjects,
    ack_wait: Duration,
    part: crate::runtime::partition::Partition,
) -> Result<PullConsumer, caucus_shared::Error> {
    let stream = subjects.stream(StreamKind::Messages);
    let cfg = pull::Config {
        durable_name: Some(part.consumer(BROADCAST_CONSUMER)),
        description: Some("macro broadcasts: flag running workflows".into()),
        filter_subject: subjects.msg_all(),
        ack_policy: AckPolicy::Explicit,
        deliver_policy: DeliverPolicy::New,
        ack_wait,
        ..Default::default()
    };
    js.create_consumer_on_stream(cfg, &stream)
        .await
        .map_err(|e| caucus_shared::Error::consumer(&part.consumer(BROADCAST_CONSUMER), &stream, e))
}

/// The flag a broadcast puts on workflows, or `None` when it flags nothing.
pub fn flag_for(env: &Envelope, now: chrono::DateTime<chrono::Utc>) -> Option<WorkflowFlag> {
    let (event, alert) = caucus_shared::messages::critical_broadcast(env).ok()?;
    Some(WorkflowFlag {
        kind: event.as_str().to_string(),
        at: now,
        detail: json!({
            "id": env.id,
            "from_agent": env.from_agent,
            "old_regime": alert.old_regime,
            "new_regime": alert.new_regime,
            "confidence": alert.confidence,
            "rate_change_bps": alert.extra.get("rate_change_bps"),
            "recommended_actions": alert.recommended_actions,
            "sent_at": env.timestamp,
        }),
    })
}

/// Consumes until `shutdown` (or the scheduler goes away).
pub async fn run(
    consumer: PullConsumer,
    dlq: Dlq,
    max_bytes: usize,
    clock: SharedClock,
    scheduler: SchedulerHandle,
    shutdown: CancellationToken,
) {
    let (dlq, clock, scheduler) = (&dlq, &clock, &scheduler);
    caucus_shared::nats::consume::consume(&consumer, "broadcasts", &shutdown, move |msg| async move {
            let Some(env) = decode_or_dead_letter(dlq, &msg, max_bytes, Envelope::decode).await
            else {
                return ControlFlow::Continue(());
            };
            let Some(flag) = flag_for(&env, clock.now()) else {
                let _ = msg.ack().await;
                return ControlFlow::Continue(());
            };
            match ask(scheduler, |reply| Command::Flag { flag, reply }).await {
                Err(AskError::Closed) => {
                    let _ = msg
                        .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                        .await;
                    return ControlFlow::Break(());
                }
                Ok(n) => {
                    tracing::info!(broadcast_id = %env.id, flagged = n, "workflows flagged for re-evaluation");
                    let _ = msg.ack().await;
                }
                _ => {
                    let _ = msg
                        .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                        .await;
                }
            }
            ControlFlow::Continue(())
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use caucus_shared::envelope::Priority;
    use caucus_shared::messages::{MacroBroadcast, MacroEvent};

    #[test]
    fn only_critical_regime_and_rate_broadcasts_flag() {
        let b = MacroBroadcast {
            event_type: MacroEvent::RegimeChange,
            old_regime: Some("BULL_LOW_RATES".into()),
            new_regime: Some("BEAR_HIGH_RATES".into()),
            confidence: 0.9,
            rate_change_bps: None,
            discount_rate_adjustment: None,
            discount_rate_changes: Default::default(),
            sector_favorability_changes: Default::default(),
            recommended_actions: vec![],
        };
        let env = b.envelope("macro").unwrap();
        let f = flag_for(&env, chrono::Utc::now()).unwrap();
        assert_eq!(f.kind, "regime_change");
        assert_eq!(f.detail["new_regime"], "BEAR_HIGH_RATES");
        assert_eq!(f.detail["id"], env.id.as_str());
        assert!(flag_for(
            &env.clone().with_priority(Priority::High),
            chrono::Utc::now()
        )
        .is_none());
        let mut other = env;
        other.content["event_type"] = json!("threshold_breach");
        assert!(flag_for(&other, chrono::Utc::now()).is_none());
    }
}
