//! Failure tiers: which of "retry", "pause" or "escalate" a failed attempt
//! gets. The rules are configuration ([`TierRule`]); the first rule whose
//! conditions all hold decides. Tier 1 needs retries left: a tier-1 match
//! on an attempt that used up its retry policy becomes tier 2.

use caucus_shared::config::TierRule;
use caucus_shared::task::TaskError;

/// The three tiers of the design.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Retry with backoff.
    Retry = 1,
    /// Pause the workflow with a checkpoint.
    Pause = 2,
    /// Escalate to a person; the workflow stays paused, flagged `escalated`.
    Escalate = 3,
}

impl Tier {
    /// 1, 2 or 3.
    pub fn number(self) -> u8 {
        self as u8
    }

    fn from_number(n: u8) -> Tier {
        match n {
            1 => Tier::Retry,
            2 => Tier::Pause,
            _ => Tier::Escalate,
        }
    }
}

/// What is known about one failed attempt.
#[derive(Debug, Clone, Copy)]
pub struct FailureFacts<'a> {
    /// The error reported.
    pub error: &'a TaskError,
    /// Whether the stage's retry policy has no attempt left.
    pub retries_exhausted: bool,
    /// Failures of this task with this `error_type`, this one included.
    pub repeats: u32,
}

/// The decision and the rule behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    /// The tier.
    pub tier: Tier,
    /// The rule that matched (`default` when none did).
    pub rule: String,
}

/// An ordered rule list.
#[derive(Debug, Clone, PartialEq)]
pub struct TierRules {
    rules: Vec<TierRule>,
}

impl Default for TierRules {
    fn default() -> Self {
        TierRules {
            rules: TierRule::defaults(),
        }
    }
}

fn matches(rule: &TierRule, f: &FailureFacts<'_>) -> bool {
    if !rule.error_types.is_empty()
        && !rule
            .error_types
            .iter()
            .any(|t| t.eq_ignore_ascii_case(&f.error.error_type))
    {
        return false;
    }
    if rule.class.is_some_and(|c| c != f.error.class) {
        return false;
    }
    if !rule.message_contains.is_empty() {
        let msg = f.error.message.to_ascii_lowercase();
        if !rule
            .message_contains
            .iter()
            .any(|s| msg.contains(&s.to_ascii_lowercase()))
        {
            return false;
        }
    }
    if rule
        .retries_exhausted
        .is_some_and(|x| x != f.retries_exhausted)
    {
        return false;
    }
    if rule.min_repeats.is_some_and(|n| f.repeats < n) {
        return false;
    }
    true
}

impl TierRules {
    /// The given rules (validated by the config: tiers are 1..=3).
    pub fn new(rules: Vec<TierRule>) -> Self {
        TierRules { rules }
    }

    /// The first matching rule's tier; with none, tier 1 while retries are
    /// left for a transient error, else tier 2.
    pub fn classify(&self, f: &FailureFacts<'_>) -> Classification {
        let found = self.rules.iter().find(|r| matches(r, f));
        let (tier, rule) = match found {
            Some(r) => (Tier::from_number(r.tier), r.name.clone()),
            None if !f.retries_exhausted
                && f.error.class == caucus_shared::task::ErrorClass::Transient =>
            {
                (Tier::Retry, "default".to_string())
            }
            None => (Tier::Pause, "default".to_string()),
        };
        let tier = if tier == Tier::Retry && f.retries_exhausted {
            Tier::Pause
        } else {
            tier
        };
        Classification { tier, rule }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use caucus_shared::task::ErrorClass;

    fn err(class: ErrorClass, t: &str, msg: &str) -> TaskError {
        TaskError {
            class,
            error_type: t.into(),
            message: msg.into(),
            data_source: None,
        }
    }

    fn tier(e: &TaskError, exhausted: bool, repeats: u32) -> (Tier, String) {
        let c = TierRules::default().classify(&FailureFacts {
            error: e,
            retries_exhausted: exhausted,
            repeats,
        });
        (c.tier, c.rule)
    }

    #[test]
    fn defaults_follow_the_design() {
        use ErrorClass::*;
        let timeout = err(Transient, "timeout", "upstream timed out");
        assert_eq!(tier(&timeout, false, 1), (Tier::Retry, "network".into()));
        assert_eq!(
            tier(&timeout, true, 3),
            (Tier::Pause, "retries_exhausted".into())
        );
        let conn = err(Transient, "connection_error", "refused");
        assert_eq!(tier(&conn, false, 1).0, Tier::Retry);
        // Quota: pause at once, retrying would only burn more quota.
        let quota = err(Transient, "quota_exceeded", "Koyfin 1000/1000");
        assert_eq!(
            tier(&quota, false, 1),
            (Tier::Pause, "quota_or_missing_data".into())
        );
        let quota_text = err(Permanent, "http_status", "API Quota Exceeded for key");
        assert_eq!(tier(&quota_text, false, 1).1, "quota_message");
        assert_eq!(
            tier(&err(Permanent, "data_not_found", "no 10-K"), false, 1).0,
            Tier::Pause
        );
        // A permanent error pauses once; the same error again escalates.
        let perm = err(Permanent, "exit_status", "exited with 1");
        assert_eq!(
            tier(&perm, true, 1),
            (Tier::Pause, "retries_exhausted".into())
        );
        assert_eq!(
            tier(&perm, true, 2),
            (Tier::Escalate, "permanent_error_repeated".into())
        );
        assert_eq!(
            tier(&err(Permanent, "handler_panic", "boom"), true, 1),
            (Tier::Escalate, "handler_bug".into())
        );
        // Unknown transient error with retries left: retry.
        assert_eq!(
            tier(&err(Transient, "exit_status", "x"), false, 1).0,
            Tier::Retry
        );
    }

    #[test]
    fn custom_rules_match_every_condition_and_tier_one_needs_retries() {
        let rules = TierRules::new(vec![TierRule {
            name: "flaky_vendor".into(),
            tier: 1,
            error_types: vec![],
            class: Some(ErrorClass::Permanent),
            message_contains: vec!["Vendor X".into()],
            retries_exhausted: None,
            min_repeats: None,
        }]);
        let e = err(ErrorClass::Permanent, "http_status", "vendor x said 500");
        let f = |exhausted| FailureFacts {
            error: &e,
            retries_exhausted: exhausted,
            repeats: 1,
        };
        assert_eq!(rules.classify(&f(false)).tier, Tier::Retry);
        assert_eq!(rules.classify(&f(true)).tier, Tier::Pause);
        let other = err(ErrorClass::Permanent, "http_status", "other");
        let c = rules.classify(&FailureFacts {
            error: &other,
            retries_exhausted: false,
            repeats: 1,
        });
        assert_eq!((c.tier, c.rule.as_str()), (Tier::Pause, "default"));
    }
}
