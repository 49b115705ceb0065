//! What a message on `caucus.findings.<item>` or `caucus.msg.<to>` asks of
//! the coordinator: pure decisions, no I/O.

use chrono::{DateTime, Utc};

use caucus_shared::envelope::{Envelope, MessageType, Priority};
use caucus_shared::inbound::InputFinding;
use caucus_shared::messages::Addressee;

/// DLQ code of a message addressed to nothing the coordinator knows.
pub const CODE_UNADDRESSABLE: &str = "unaddressable";
/// DLQ code of a message type that does not belong on the subject.
pub const CODE_WRONG_SUBJECT: &str = "wrong_subject";

/// Why a message is dead-lettered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Reject {
    /// The DLQ error code.
    pub code: &'static str,
    /// What is wrong, for the sender.
    pub reason: String,
}

impl Reject {
    fn new(code: &'static str, reason: impl Into<String>) -> Self {
        Reject {
            code,
            reason: reason.into(),
        }
    }
}

/// What a message on `caucus.findings.<item>` is.
#[derive(Debug, Clone, PartialEq)]
pub enum FindingIntake {
    /// A finding addressed to an agent type (or `all`).
    Addressed {
        /// Who it is for.
        addressee: Addressee,
        /// It, as tasks receive it.
        finding: InputFinding,
    },
    /// A finding for whoever reads the subject (what agents publish about
    /// their own work): nothing to hand out.
    Unaddressed,
    /// An outside service's alert about the item.
    Alert,
}

/// Reads a decoded message from `caucus.findings.<item>`.
pub fn finding_intake(env: &Envelope, stored_at: DateTime<Utc>) -> Result<FindingIntake, Reject> {
    match env.message_type {
        MessageType::Finding | MessageType::FindingWithPrecedent => {}
        MessageType::Alert => return Ok(FindingIntake::Alert),
        other => {
            return Err(Reject::new(
                CODE_WRONG_SUBJECT,
                format!(
                    "caucus.findings.<item> carries findings and alerts; a `{other}` goes on caucus.msg.<to_agent>"
                ),
            ))
        }
    }
    let Some(to) = env.to_agent.as_deref() else {
        if env.requires_response {
            return Err(Reject::new(
                CODE_UNADDRESSABLE,
                "requires_response is set but to_agent is missing: name the agent type that should answer",
            ));
        }
        return Ok(FindingIntake::Unaddressed);
    };
    let Some(addressee) = Addressee::parse(to) else {
        return Err(Reject::new(
            CODE_UNADDRESSABLE,
            "to_agent is empty: name an agent type (`valuation` or `valuation_agent`) or `all`",
        ));
    };
    Ok(FindingIntake::Addressed {
        addressee,
        finding: InputFinding {
            id: env.id.clone(),
            from_agent: env.from_agent.clone(),
            to_agent: to.to_string(),
            priority: env.priority,
            requires_response: env.requires_response,
            content: env.content.clone(),
            stored_at,
        },
    })
}

/// Whether a finding of `priority` arriving late flags workflows.
pub fn flags_when_late(priority: Priority) -> bool {
    priority >= Priority::High
}

/// The alert-card severity for an outside message of `priority`.
pub fn severity_of(priority: Priority) -> &'static str {
    match priority {
        Priority::SystemCritical | Priority::Critical => "critical",
        Priority::High => "warning",
        Priority::Normal | Priority::Low => "info",
    }
}

/// The one-line text of a finding or request (`content.finding` or
/// `content.query`), for cards and records.
pub fn text_of(env: &Envelope) -> String {
    let typed = match env.message_type {
        MessageType::Request => env
            .content_as::<caucus_shared::messages::Request>()
            .map(|r| r.query)
            .ok(),
        _ => env
            .content_as::<caucus_shared::messages::Finding>()
            .map(|f| f.finding)
            .ok(),
    };
    typed.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn seed() -> Envelope {
        Envelope::decode(
            br#"{"message_type":"finding","from_agent":"financial_analyst","to_agent":"valuation_agent",
                "priority":"high","content":{"finding":"Abnormal capex increase","confidence":0.85,
                "evidence":["10-K p.47"],"impact":"Adjust FCF projections"},"requires_response":true}"#,
            1 << 20,
        )
        .unwrap()
    }

    #[test]
    fn the_seed_message_is_addressed_to_valuation() {
        let env = seed();
        let now = Utc::now();
        let FindingIntake::Addressed { addressee, finding } = finding_intake(&env, now).unwrap()
        else {
            panic!("addressed")
        };
        assert!(addressee.includes("valuation"));
        assert_eq!(finding.id, env.id);
        assert_eq!(finding.to_agent, "valuation_agent");
        assert_eq!(finding.priority, Priority::High);
        assert!(finding.requires_response);
        assert_eq!(finding.text(), "Abnormal capex increase");
        assert_eq!(finding.stored_at, now);
        assert_eq!(text_of(&env), "Abnormal capex increase");
    }

    #[test]
    fn unaddressed_wrong_type_and_empty_addressee() {
        let mut env = seed();
        env.to_agent = None;
        env.requires_response = false;
        assert_eq!(
            finding_intake(&env, Utc::now()).unwrap(),
            FindingIntake::Unaddressed
        );
        env.requires_response = true;
        assert_eq!(
            finding_intake(&env, Utc::now()).unwrap_err().code,
            CODE_UNADDRESSABLE
        );
        env.to_agent = Some(" ".into());
        assert_eq!(
            finding_intake(&env, Utc::now()).unwrap_err().code,
            CODE_UNADDRESSABLE
        );
        let req = Envelope::new(MessageType::Request, "x", json!({"query": "q"}));
        assert_eq!(
            finding_intake(&req, Utc::now()).unwrap_err().code,
            CODE_WRONG_SUBJECT
        );
        let alert = Envelope::new(MessageType::Alert, "x", json!({}));
        assert_eq!(
            finding_intake(&alert, Utc::now()).unwrap(),
            FindingIntake::Alert
        );
    }

    #[test]
    fn severities_and_lateness_follow_priority() {
        assert_eq!(severity_of(Priority::SystemCritical), "critical");
        assert_eq!(severity_of(Priority::Critical), "critical");
        assert_eq!(severity_of(Priority::High), "warning");
        assert_eq!(severity_of(Priority::Normal), "info");
        assert!(flags_when_late(Priority::High));
        assert!(flags_when_late(Priority::Critical));
        assert!(!flags_when_late(Priority::Normal));
    }
}
