//! The current market regime for regime-specific credibility (seed 000:
//! `current_regime = detect_market_regime()`): `facilitator.current_regime`
//! at first, then the `new_regime` of each `system_critical` regime change
//! broadcast on `caucus.msg.all` (durable consumer
//! `facilitator-broadcasts`). It is stored in KV (`<prefix>_facilitator`,
//! key `regime.current`), so a restarted facilitator, and every other
//! instance, uses the regime of the last broadcast.

use std::ops::ControlFlow;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use async_nats::jetstream::consumer::PullConsumer;
use async_nats::jetstream::{self, kv, AckKind};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use caucus_shared::envelope::Envelope;
use caucus_shared::messages::MacroEvent;
use caucus_shared::nats::bind::{self, BindBudget};
use caucus_shared::nats::dlq::{decode_or_dead_letter, Dlq};
use caucus_shared::nats::{buckets, consumers};
use caucus_shared::subjects::Subjects;

/// KV bucket of facilitator state (`<prefix>_facilitator`).
pub const STATE_BUCKET: &str = buckets::FACILITATOR_STATE;
/// Key of the current regime.
pub const REGIME_KEY: &str = "regime.current";
/// Durable name of the broadcast consumer.
pub const BROADCAST_CONSUMER: &str = consumers::FACILITATOR_BROADCASTS;

/// The stored regime.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RegimeRecord {
    /// Regime label, e.g. `BEAR_HIGH_RATES`; empty = none.
    pub regime: String,
    /// Where it came from: `config` or `broadcast`.
    pub source: String,
    /// Id of the broadcast that set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broadcast_id: Option<String>,
    /// Who sent that broadcast.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_agent: Option<String>,
    /// When the broadcast was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<DateTime<Utc>>,
}

/// The regime every credibility query uses when a debate names none.
#[derive(Clone)]
pub struct CurrentRegime {
    kv: kv::Store,
    cached: Arc<RwLock<RegimeRecord>>,
}

impl std::fmt::Debug for CurrentRegime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CurrentRegime")
            .field("cached", &self.cached.read().ok().map(|r| r.regime.clone()))
            .finish()
    }
}

impl CurrentRegime {
    /// Starts from the stored regime, else from `configured`.
    pub async fn open(kv: kv::Store, configured: &str) -> CurrentRegime {
        let initial = RegimeRecord {
            regime: configured.to_string(),
            source: "config".into(),
            broadcast_id: None,
            from_agent: None,
            since: None,
        };
        let r = CurrentRegime {
            kv,
            cached: Arc::new(RwLock::new(initial)),
        };
        r.record().await;
        r
    }

    /// The regime record: the stored one (another instance may have set
    /// it), else the last one this process knew.
    pub async fn record(&self) -> RegimeRecord {
        if let Ok(Some(bytes)) = self.kv.get(REGIME_KEY).await {
            if let Ok(r) = serde_json::from_slice::<RegimeRecord>(&bytes) {
                if let Ok(mut c) = self.cached.write() {
                    *c = r.clone();
                }
                return r;
            }
        }
        self.cached
            .read()
            .map(|c| c.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// The regime label (empty: none).
    pub async fn get(&self) -> String {
        self.record().await.regime
    }

    /// Stores a new regime.
    pub async fn set(&self, r: RegimeRecord) -> Result<(), caucus_shared::Error> {
        let bytes = serde_json::to_vec(&r)?;
        self.kv
            .put(REGIME_KEY, bytes.into())
            .await
            .map_err(|e| caucus_shared::Error::nats(format!("store regime: {e}")))?;
        if let Ok(mut c) = self.cached.write() {
            *c = r;
        }
        Ok(())
    }
}

/// The regime a broadcast sets, or `None` when it sets none.
pub fn regime_of(env: &Envelope) -> Option<RegimeRecord> {
    let (event, alert) = caucus_shared::messages::critical_broadcast(env).ok()?;
    if event != MacroEvent::RegimeChange {
        return None;
    }
    let regime = alert.new_regime.filter(|r| !r.trim().is_empty())?;
    Some(RegimeRecord {
        regime,
        source: "broadcast".into(),
        broadcast_id: Some(env.id.clone()),
        from_agent: Some(env.from_agent.clone()),
        since: Some(env.timestamp),
    })
}

/// Binds the broadcast consumer, which the coordinator or `caucus init`
/// creates (see [`consumers::facilitator_broadcasts`]). Every broadcast
/// from the stream's start is applied in order, so the last one wins.
pub async fn ensure_consumer(
    js: &jetstream::Context,
    subjects: &Subjects,
    ack_wait: Duration,
) -> Result<PullConsumer, caucus_shared::Error> {
    let spec = consumers::facilitator_broadcasts(subjects, ack_wait);
    bind::consumer(js, &spec, BindBudget::default()).await
}

/// Applies broadcasts until `shutdown`.
pub async fn run(
    consumer: PullConsumer,
    regime: CurrentRegime,
    dlq: Dlq,
    max_bytes: usize,
    shutdown: CancellationToken,
) {
    let (regime, dlq) = (&regime, &dlq);
    caucus_shared::nats::consume::consume(&consumer, "regime", &shutdown, move |msg| async move {
        let Some(env) = decode_or_dead_letter(dlq, &msg, max_bytes, Envelope::decode).await else {
            return ControlFlow::Continue(());
        };
        let Some(rec) = regime_of(&env) else {
            let _ = msg.ack().await;
            return ControlFlow::Continue(());
        };
        let name = rec.regime.clone();
        match regime.set(rec).await {
            Ok(()) => {
                tracing::info!(regime = %name, broadcast_id = %env.id, "current regime updated");
                let _ = msg.ack().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "regime not stored; will retry");
                let _ = msg
                    .ack_with(AckKind::Nak(Some(Duration::from_secs(1))))
                    .await;
            }
        }
        ControlFlow::Continue(())
    })
    .await;
}
