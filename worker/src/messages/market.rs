//! The market regime a worker process holds, built from the broadcasts on
//! `caucus.msg.all` in stream order (so a restarted worker that replays the
//! stream ends in the same state).
//!
//! * A `system_critical` `alert` with `event_type` `regime_change` replaces
//!   the regime: its name, sector discount-rate and favourability changes,
//!   and its flat discount-rate adjustment.
//! * A `system_critical` `rate_announcement` adds its flat adjustment
//!   (`implications.discount_rate_adjustment`, else `rate_change_bps` ÷
//!   10 000) to the current regime until the next regime change.
//! * Anything else on `caucus.msg.all` (other alerts, lower priorities) is
//!   noted and ignored; a broadcast whose implications do not parse is an
//!   error (the caller dead-letters it).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use caucus_shared::envelope::Envelope;
use caucus_shared::messages::{critical_broadcast, MacroEvent, NotCritical};

use caucus_agents::analysts::regime::Regime;
use caucus_agents::analysts::AnalystError;

/// The regime in force.
#[derive(Debug, Clone, PartialEq)]
pub struct CurrentRegime {
    /// Regime label, e.g. `BEAR_HIGH_RATES`.
    pub name: Option<String>,
    /// The label before the change.
    pub old_name: Option<String>,
    /// Confidence of the regime change.
    pub confidence: Option<f64>,
    /// Flat discount-rate change (regime change plus later rate moves).
    pub flat_adjustment: f64,
    /// Discount-rate change per sector (lower-cased).
    pub discount_rate_changes: BTreeMap<String, f64>,
    /// Screening score change per sector (lower-cased).
    pub sector_favorability_changes: BTreeMap<String, f64>,
    /// Ids of the broadcasts that built it, oldest first.
    pub broadcast_ids: Vec<String>,
    /// When the last of them was sent.
    pub updated_at: DateTime<Utc>,
}

/// What applying one broadcast did.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The regime changed; a one-line summary.
    Applied(String),
    /// Nothing to apply; why.
    Ignored(String),
}

/// Why a critical broadcast cannot be applied (the caller dead-letters
/// it); each reads as the reason the DLQ record shows.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BadBroadcast {
    /// The alert content does not read as an alert.
    #[error("{0}")]
    Unreadable(String),
    /// Its implications do not parse (the message names the field).
    #[error("{}", .0.message)]
    Implications(#[source] AnalystError),
    /// A regime change naming no new regime.
    #[error("regime_change broadcast without new_regime")]
    NoNewRegime,
    /// A rate move whose `rate_change_bps` is not a finite number.
    #[error("rate_change_bps must be a number")]
    RateNotANumber,
    /// A rate move giving neither its size nor a flat adjustment.
    #[error("rate_announcement without rate_change_bps or implications.discount_rate_adjustment")]
    NoRateMove,
}

/// The worker's market state.
#[derive(Debug, Clone, Default)]
pub struct MarketState {
    current: Option<CurrentRegime>,
}

impl MarketState {
    /// The regime in force, if any broadcast set one.
    pub fn current(&self) -> Option<&CurrentRegime> {
        self.current.as_ref()
    }

    /// Applies one decoded broadcast (see the module docs).
    pub fn apply(&mut self, env: &Envelope) -> Result<Outcome, BadBroadcast> {
        let (event, alert) = match critical_broadcast(env) {
            Ok(b) => b,
            Err(NotCritical::Unreadable(e)) => return Err(BadBroadcast::Unreadable(e)),
            Err(why) => return Ok(Outcome::Ignored(why.to_string())),
        };
        let parsed = Regime::parse(&env.content).map_err(BadBroadcast::Implications)?;
        match event {
            MacroEvent::RegimeChange => {
                let Some(name) = alert.new_regime.clone() else {
                    return Err(BadBroadcast::NoNewRegime);
                };
                self.current = Some(CurrentRegime {
                    name: Some(name.clone()),
                    old_name: alert.old_regime.clone(),
                    confidence: alert.confidence,
                    flat_adjustment: parsed.flat_adjustment,
                    discount_rate_changes: parsed.discount_rate_changes,
                    sector_favorability_changes: parsed.sector_favorability_changes,
                    broadcast_ids: vec![env.id.clone()],
                    updated_at: env.timestamp,
                });
                Ok(Outcome::Applied(format!(
                    "regime {} → {name}",
                    alert.old_regime.as_deref().unwrap_or("?")
                )))
            }
            MacroEvent::RateAnnouncement => {
                let flat = if parsed.flat_adjustment != 0.0 {
                    parsed.flat_adjustment
                } else {
                    match alert.extra.get("rate_change_bps").map(Value::as_f64) {
                        Some(Some(b)) if b.is_finite() => b / 10_000.0,
                        Some(_) => return Err(BadBroadcast::RateNotANumber),
                        None => return Err(BadBroadcast::NoRateMove),
                    }
                };
                let cur = self.current.get_or_insert_with(|| CurrentRegime {
                    name: None,
                    old_name: None,
                    confidence: None,
                    flat_adjustment: 0.0,
                    discount_rate_changes: BTreeMap::new(),
                    sector_favorability_changes: BTreeMap::new(),
                    broadcast_ids: Vec::new(),
                    updated_at: env.timestamp,
                });
                cur.flat_adjustment += flat;
                cur.broadcast_ids.push(env.id.clone());
                cur.updated_at = env.timestamp;
                Ok(Outcome::Applied(format!(
                    "rate announcement: discount rates {:+.2} pts",
                    flat * 100.0
                )))
            }
        }
    }

    /// The regime as a task input (`inputs.regime`, the shape
    /// [`Regime::parse`] reads), or `None` before any broadcast.
    pub fn regime_input(&self) -> Option<Value> {
        let c = self.current.as_ref()?;
        Some(json!({
            "name": c.name,
            "new_regime": c.name,
            "old_regime": c.old_name,
            "confidence": c.confidence,
            "discount_rate_adjustment": c.flat_adjustment,
            "discount_rate_changes": c.discount_rate_changes,
            "sector_favorability_changes": c.sector_favorability_changes,
            "source": "broadcast",
            "broadcast_ids": c.broadcast_ids,
            "updated_at": c.updated_at,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caucus_shared::envelope::Priority;
    use caucus_shared::messages::MacroBroadcast;

    fn broadcast(event: MacroEvent, conf: f64) -> Envelope {
        MacroBroadcast {
            event_type: event,
            old_regime: Some("BULL_LOW_RATES".into()),
            new_regime: Some("BEAR_HIGH_RATES".into()),
            confidence: conf,
            rate_change_bps: Some(50.0),
            discount_rate_adjustment: None,
            discount_rate_changes: [("Technology".to_string(), 0.025)].into(),
            sector_favorability_changes: [("Technology".to_string(), -15.0)].into(),
            recommended_actions: vec![],
        }
        .envelope("macro")
        .unwrap()
    }

    #[test]
    fn a_regime_change_then_a_rate_move_accumulate() {
        let mut m = MarketState::default();
        assert!(m.regime_input().is_none());
        let mut rc = broadcast(MacroEvent::RegimeChange, 0.9);
        rc.content["implications"]
            .as_object_mut()
            .unwrap()
            .remove("discount_rate_adjustment");
        assert!(matches!(m.apply(&rc).unwrap(), Outcome::Applied(_)));
        let r = Regime::parse(&m.regime_input().unwrap()).unwrap();
        assert_eq!(r.name.as_deref(), Some("BEAR_HIGH_RATES"));
        assert!((r.discount_adjustment("Technology") - 0.025).abs() < 1e-12);
        assert_eq!(r.favorability("technology"), -15.0);
        let mut rate = broadcast(MacroEvent::RateAnnouncement, 0.9);
        rate.content["implications"] = json!({});
        m.apply(&rate).unwrap();
        let r = Regime::parse(&m.regime_input().unwrap()).unwrap();
        assert!((r.discount_adjustment("Technology") - 0.030).abs() < 1e-12);
        assert!((r.discount_adjustment("Utilities") - 0.005).abs() < 1e-12);
        assert_eq!(m.current().unwrap().broadcast_ids.len(), 2);
        // A new regime change starts over.
        m.apply(&rc).unwrap();
        assert_eq!(m.current().unwrap().flat_adjustment, 0.0);
    }

    #[test]
    fn non_critical_and_non_alert_messages_are_ignored() {
        let mut m = MarketState::default();
        let low = broadcast(MacroEvent::RegimeChange, 0.9).with_priority(Priority::Normal);
        assert!(matches!(m.apply(&low).unwrap(), Outcome::Ignored(_)));
        let mut other = broadcast(MacroEvent::RegimeChange, 0.9);
        other.content["event_type"] = json!("threshold_breach");
        assert!(matches!(m.apply(&other).unwrap(), Outcome::Ignored(_)));
        assert!(m.current().is_none());
    }

    #[test]
    fn unreadable_implications_are_errors() {
        let mut m = MarketState::default();
        let mut bad = broadcast(MacroEvent::RegimeChange, 0.9);
        bad.content["implications"]["discount_rate_changes"] = json!({"Technology": "lots"});
        let e = m.apply(&bad).unwrap_err();
        assert!(e.to_string().contains("Technology"), "{e}");
    }
}
