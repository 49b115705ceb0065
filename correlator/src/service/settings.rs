//! `[correlator]` config → engine settings, checked once at start.

use caucus_shared::config::CorrelatorConfig;
use caucus_shared::envelope::Priority;

use crate::engine::{CorrelatorError, CorrelatorSettings};
use crate::root_cause::RootCauseThresholds;

/// The engine settings `cfg` asks for, validated; also checks the alert
/// severity, which becomes a subject token and an envelope priority.
pub fn engine_settings(cfg: &CorrelatorConfig) -> Result<CorrelatorSettings, CorrelatorError> {
    let settings = CorrelatorSettings {
        window: cfg.window,
        batch_threshold: cfg.batch_threshold,
        max_signatures: cfg.max_signatures,
        dedupe_horizon: cfg.dedupe_horizon,
        max_tracked_event_ids: cfg.max_tracked_ids,
        thresholds: RootCauseThresholds {
            quota_items: cfg.thresholds.quota,
            network_items: cfg.thresholds.network,
            not_found_items: cfg.thresholds.not_found,
            agent_bug_items: cfg.thresholds.agent_bug,
        },
        ..CorrelatorSettings::default()
    };
    settings.validate()?;
    if cfg.alert_severity.parse::<Priority>().is_err() {
        return Err(CorrelatorError::InvalidSetting {
            name: "alert_severity",
            reason: format!(
                "`{}` is not a priority (system_critical, critical, high, normal, low)",
                cfg.alert_severity
            ),
        });
    }
    let positive = [
        ("fetch_batch", cfg.fetch_batch == 0),
        ("expire_interval", cfg.expire_interval.is_zero()),
        ("record_flush_interval", cfg.record_flush_interval.is_zero()),
        ("ack_wait", cfg.ack_wait.is_zero()),
        ("leader_lease", cfg.leader_lease.is_zero()),
    ];
    for (name, zero) in positive {
        if zero {
            return Err(CorrelatorError::InvalidSetting {
                name,
                reason: "must be more than zero".into(),
            });
        }
    }
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_are_named() {
        let cfg = CorrelatorConfig::default();
        let s = engine_settings(&cfg).unwrap();
        assert_eq!(s.window, std::time::Duration::from_secs(300));
        assert_eq!(s.batch_threshold, 3);
        assert_eq!(s.thresholds.network_items, 5);
        let bad = CorrelatorConfig {
            alert_severity: "urgent.now".into(),
            ..CorrelatorConfig::default()
        };
        let e = engine_settings(&bad).unwrap_err().to_string();
        assert!(e.contains("alert_severity"), "{e}");
        let bad = CorrelatorConfig {
            batch_threshold: 0,
            ..CorrelatorConfig::default()
        };
        assert!(engine_settings(&bad)
            .unwrap_err()
            .to_string()
            .contains("batch_threshold"));
    }
}
