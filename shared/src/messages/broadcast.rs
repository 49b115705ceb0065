//! Macro broadcasts (seed 001, "Macro Analyst Broadcasts"): the rule that
//! decides whether an event is system-critical, and the `alert` envelope on
//! `caucus.msg.all` that carries it. The built-in `macro` agent and
//! `caucus broadcast` both build their broadcasts here, so the two agree.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::{Alert, ValidationError};
use crate::envelope::{Envelope, MessageType, Priority};

/// `event_type` of a market-regime change.
pub const REGIME_CHANGE: &str = "regime_change";
/// `event_type` of a central-bank rate announcement.
pub const RATE_ANNOUNCEMENT: &str = "rate_announcement";
/// A regime change is broadcast only above this confidence (seed: > 80 %).
pub const MIN_REGIME_CONFIDENCE: f64 = 0.8;
/// A rate move is broadcast from this size on (seed: 25 bps+).
pub const MIN_RATE_CHANGE_BPS: f64 = 25.0;

/// The macro events that can be broadcast.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MacroEvent {
    /// Old regime → new regime (e.g. BULL_LOW_RATES → BEAR_HIGH_RATES).
    RegimeChange,
    /// A central-bank rate move.
    RateAnnouncement,
}

impl MacroEvent {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            MacroEvent::RegimeChange => REGIME_CHANGE,
            MacroEvent::RateAnnouncement => RATE_ANNOUNCEMENT,
        }
    }

    /// Parses the wire name.
    pub fn parse(s: &str) -> Result<MacroEvent, ValidationError> {
        match s {
            REGIME_CHANGE => Ok(MacroEvent::RegimeChange),
            RATE_ANNOUNCEMENT => Ok(MacroEvent::RateAnnouncement),
            other => Err(ValidationError::NotMacroEvent(other.to_string())),
        }
    }
}

/// One macro event, in the seed's broadcast content shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MacroBroadcast {
    /// `regime_change` or `rate_announcement`.
    pub event_type: MacroEvent,
    /// Regime before the change, e.g. `BULL_LOW_RATES`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_regime: Option<String>,
    /// Regime after the change (required for a regime change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_regime: Option<String>,
    /// Confidence in the event, 0..=1.
    pub confidence: f64,
    /// Size of a rate move in basis points (rate announcements).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_change_bps: Option<f64>,
    /// Discount-rate change for every sector (fraction: 0.01 = +1 pt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discount_rate_adjustment: Option<f64>,
    /// Discount-rate change per sector.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub discount_rate_changes: BTreeMap<String, f64>,
    /// Screening score change per sector (points).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub sector_favorability_changes: BTreeMap<String, f64>,
    /// What agents should do about it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recommended_actions: Vec<String>,
}

impl MacroBroadcast {
    /// Checks the fields an event of its type needs.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if !(self.confidence.is_finite() && (0.0..=1.0).contains(&self.confidence)) {
            return Err(ValidationError::Confidence(self.confidence));
        }
        let finite = |name: &str, v: f64| {
            if v.is_finite() {
                Ok(())
            } else {
                Err(ValidationError::NotFinite(name.to_string()))
            }
        };
        if let Some(x) = self.discount_rate_adjustment {
            finite("discount_rate_adjustment", x)?;
        }
        for (k, v) in self
            .discount_rate_changes
            .iter()
            .chain(&self.sector_favorability_changes)
        {
            finite(k, *v)?;
        }
        match self.event_type {
            MacroEvent::RegimeChange => {
                if self
                    .new_regime
                    .as_deref()
                    .is_none_or(|r| r.trim().is_empty())
                {
                    return Err(ValidationError::Missing {
                        event: REGIME_CHANGE,
                        field: "new_regime",
                    });
                }
            }
            MacroEvent::RateAnnouncement => match self.rate_change_bps {
                Some(b) => finite("rate_change_bps", b)?,
                None => {
                    return Err(ValidationError::Missing {
                        event: RATE_ANNOUNCEMENT,
                        field: "rate_change_bps",
                    })
                }
            },
        }
        Ok(())
    }

    /// `Ok` when the seed calls the event system-critical (regime change
    /// with confidence > 0.8, rate move of 25 bps or more); otherwise why not.
    pub fn is_system_critical(&self) -> Result<(), BelowThreshold> {
        match self.event_type {
            MacroEvent::RegimeChange if self.confidence > MIN_REGIME_CONFIDENCE => Ok(()),
            MacroEvent::RegimeChange => Err(BelowThreshold::Confidence(self.confidence)),
            MacroEvent::RateAnnouncement => {
                let bps = self.rate_change_bps.unwrap_or(0.0);
                if bps.abs() >= MIN_RATE_CHANGE_BPS {
                    Ok(())
                } else {
                    Err(BelowThreshold::RateMove(bps))
                }
            }
        }
    }

    /// The flat discount-rate change: the explicit one, else a rate move's
    /// size (50 bps → +0.005).
    pub fn flat_adjustment(&self) -> f64 {
        self.discount_rate_adjustment
            .or_else(|| self.rate_change_bps.map(|b| b / 10_000.0))
            .unwrap_or(0.0)
    }

    /// The alert content, in the seed's shape (`implications` holds the
    /// sector changes and the flat adjustment).
    pub fn content(&self) -> Alert {
        let mut implications = Map::new();
        if !self.sector_favorability_changes.is_empty() {
            implications.insert(
                "sector_favorability_changes".into(),
                json!(self.sector_favorability_changes),
            );
        }
        if !self.discount_rate_changes.is_empty() {
            implications.insert(
                "discount_rate_changes".into(),
                json!(self.discount_rate_changes),
            );
        }
        let flat = self.flat_adjustment();
        if flat != 0.0 {
            implications.insert("discount_rate_adjustment".into(), json!(flat));
        }
        let mut extra = Map::new();
        if let Some(b) = self.rate_change_bps {
            extra.insert("rate_change_bps".into(), json!(b));
        }
        Alert {
            event_type: Some(self.event_type.as_str().into()),
            old_regime: self.old_regime.clone(),
            new_regime: self.new_regime.clone(),
            confidence: Some(self.confidence),
            implications: Some(Value::Object(implications)),
            recommended_actions: if self.recommended_actions.is_empty() {
                default_actions(self.event_type)
            } else {
                self.recommended_actions.clone()
            },
            extra,
        }
    }

    /// The `system_critical` alert envelope to every agent (`to_agent` =
    /// `all`); publish it on `caucus.msg.all` with its id as `Nats-Msg-Id`.
    pub fn envelope(&self, from_agent: &str) -> Result<Envelope, BroadcastError> {
        self.validate()?;
        let content = serde_json::to_value(self.content())?;
        Ok(Envelope::new(MessageType::Alert, from_agent, content)
            .to("all")
            .with_priority(Priority::SystemCritical)
            .with_requires_response(false))
    }
}

/// Why a valid macro event is reported but not broadcast.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BelowThreshold {
    /// A regime change not above [`MIN_REGIME_CONFIDENCE`].
    #[error("regime change confidence {0} is not above {MIN_REGIME_CONFIDENCE}: reported, not broadcast")]
    Confidence(f64),
    /// A rate move smaller than [`MIN_RATE_CHANGE_BPS`] (basis points).
    #[error("rate change of {0} bps is below {MIN_RATE_CHANGE_BPS} bps: reported, not broadcast")]
    RateMove(f64),
}

/// Serialises as its message (the macro agent's output `reason`).
impl Serialize for BelowThreshold {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Why [`MacroBroadcast::envelope`] could not build the broadcast.
#[derive(Debug, thiserror::Error)]
pub enum BroadcastError {
    /// The event misses a field or has one out of range.
    #[error(transparent)]
    Invalid(#[from] ValidationError),
    /// The alert content did not serialise.
    #[error("alert content: {0}")]
    Encode(#[from] serde_json::Error),
}

/// The seed's recommended actions for each event.
fn default_actions(event: MacroEvent) -> Vec<String> {
    let mut v = vec![
        "Re-screen candidates with updated sector scores",
        "Recalculate DCF models with new discount rates",
        "Review in-progress analyses for regime sensitivity",
    ];
    if event == MacroEvent::RateAnnouncement {
        v.remove(0);
    }
    v.into_iter().map(str::to_string).collect()
}

/// Why a message on `caucus.msg.all` is not a system-critical macro
/// broadcast (receivers log it and carry on).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NotCritical {
    /// Another message type than `alert`.
    #[error("{0} on caucus.msg.all is not a macro alert")]
    NotAlert(MessageType),
    /// An alert below `system_critical`: informational.
    #[error("alert of priority {0} is informational (only system_critical broadcasts change the regime)")]
    Informational(&'static str),
    /// An alert whose content does not read as one.
    #[error("alert content unreadable: {0}")]
    Unreadable(String),
    /// A critical alert about something else than a macro event.
    #[error("alert event_type {0:?} is not a macro broadcast")]
    OtherEvent(Option<String>),
}

/// A system-critical macro broadcast as received: the one rule the
/// coordinator (flags workflows), the facilitator (current regime) and the
/// workers (regime adjustments) apply to `caucus.msg.all`: an `alert` of
/// priority `system_critical` whose `event_type` is `regime_change` or
/// `rate_announcement`.
pub fn critical_broadcast(env: &Envelope) -> Result<(MacroEvent, Alert), NotCritical> {
    if env.message_type != MessageType::Alert {
        return Err(NotCritical::NotAlert(env.message_type));
    }
    if env.priority != Priority::SystemCritical {
        return Err(NotCritical::Informational(env.priority.as_str()));
    }
    let alert: Alert = env
        .content_as()
        .map_err(|e| NotCritical::Unreadable(e.to_string()))?;
    match alert.event_type.as_deref().map(MacroEvent::parse) {
        Some(Ok(event)) => Ok((event, alert)),
        _ => Err(NotCritical::OtherEvent(alert.event_type.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn regime(conf: f64) -> MacroBroadcast {
        MacroBroadcast {
            event_type: MacroEvent::RegimeChange,
            old_regime: Some("BULL_LOW_RATES".into()),
            new_regime: Some("BEAR_HIGH_RATES".into()),
            confidence: conf,
            rate_change_bps: None,
            discount_rate_adjustment: Some(0.01),
            discount_rate_changes: [("Technology".to_string(), 0.025)].into(),
            sector_favorability_changes: [("Technology".to_string(), -15.0)].into(),
            recommended_actions: vec![],
        }
    }

    #[test]
    fn regime_changes_are_critical_only_above_080() {
        assert!(regime(0.85).is_system_critical().is_ok());
        let e = regime(0.8).is_system_critical().unwrap_err();
        assert!(e.to_string().contains("not above 0.8"), "{e}");
    }

    #[test]
    fn rate_moves_are_critical_from_25_bps() {
        let mut b = regime(0.9);
        b.event_type = MacroEvent::RateAnnouncement;
        b.discount_rate_adjustment = None;
        b.rate_change_bps = Some(-25.0);
        assert!(b.is_system_critical().is_ok());
        assert!((b.flat_adjustment() + 0.0025).abs() < 1e-12);
        b.rate_change_bps = Some(10.0);
        assert!(b.is_system_critical().is_err());
        b.rate_change_bps = None;
        assert!(b
            .validate()
            .unwrap_err()
            .to_string()
            .contains("rate_change_bps"));
    }

    #[test]
    fn envelope_is_a_system_critical_alert_to_all_that_decodes() {
        let env = regime(0.9).envelope("macro").unwrap();
        assert_eq!(env.priority, Priority::SystemCritical);
        assert!(env.is_broadcast());
        let back = Envelope::decode(&env.to_bytes(), 1 << 20).unwrap();
        let alert: Alert = back.content_as().unwrap();
        assert_eq!(alert.new_regime.as_deref(), Some("BEAR_HIGH_RATES"));
        let imp = alert.implications.unwrap();
        assert_eq!(imp["discount_rate_changes"]["Technology"], 0.025);
        assert_eq!(imp["sector_favorability_changes"]["Technology"], -15.0);
        assert_eq!(imp["discount_rate_adjustment"], 0.01);
        assert_eq!(alert.recommended_actions.len(), 3);
    }

    #[test]
    fn missing_or_bad_fields_are_named() {
        let mut b = regime(1.5);
        assert!(b.validate().unwrap_err().to_string().contains("confidence"));
        b.confidence = 0.9;
        b.new_regime = Some(" ".into());
        assert!(b.validate().unwrap_err().to_string().contains("new_regime"));
        assert!(MacroEvent::parse("gossip")
            .unwrap_err()
            .to_string()
            .contains("regime_change"));
    }

    #[test]
    fn only_system_critical_macro_alerts_are_critical_broadcasts() {
        let env = regime(0.9).envelope("macro").expect("broadcast");
        let (event, alert) = critical_broadcast(&env).expect("critical");
        assert_eq!(event, MacroEvent::RegimeChange);
        assert_eq!(alert.new_regime.as_deref(), Some("BEAR_HIGH_RATES"));
        let mut low = env.clone();
        low.priority = Priority::High;
        assert!(matches!(
            critical_broadcast(&low),
            Err(NotCritical::Informational(_))
        ));
        let mut other = env.clone();
        other.content["event_type"] = json!("threshold_breach");
        assert!(matches!(
            critical_broadcast(&other),
            Err(NotCritical::OtherEvent(_))
        ));
    }
}
